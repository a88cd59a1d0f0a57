"""Waiting for a lease under asyncio without the loop's executor.

A blocking wait in an executor thread takes that thread for as long as the
wait lasts (eight waits starve the default executor of a small machine),
and it cannot be stopped: a cancelled wait would still acquire the lease
later. Here one thread per process makes every pending wait's attempts:
short non-blocking acquisitions, the first at once, then after 1 ms,
doubling up to 20 ms (the library's SHL_WAIT_DOZE_NS, the delay of its
own sleeping waiters' looks), or up to 250 ms on an etcd table, where each
attempt is a request to the cluster. The result reaches the loop through
call_soon_threadsafe (the loop's wake-up descriptor).

Cancelling is a state change under a lock that an attempt never holds
while it runs, so the awaiting task ends at once, and a cancelled wait
makes no attempt afterwards. Only an attempt already running when the
cancel came can still succeed; its lease is released at once (it was
acquired before the cancel, never after).

The cost: these waits are not in the lease's fair queue (a plain acquire
does not queue), and they see a release up to 20 ms late. An attempt that
waits for a lease's lock (another process stopped inside it) holds up the
other waits of the process, never the event loop.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any, Callable, List, Optional

_FIRST_NS = 1_000_000
DOZE_NS = 20_000_000
ETCD_DOZE_NS = 250_000_000

WAITING, TRYING, DONE, CANCELLED = range(4)


class Sleeper:
    """A daemon thread, started at the first ring(), that sleeps in sleep()
    until a ring or a time."""

    def __init__(self, run: Callable[[], None], name: str) -> None:
        self._run = run
        self._name = name
        self._start = threading.Lock()
        self._bell = threading.Lock()
        self._bell.acquire()
        self._thread: Optional[threading.Thread] = None

    def ring(self) -> None:
        if self._thread is None:
            with self._start:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name,
                                                    daemon=True)
                    self._thread.start()
                    return
        try:
            self._bell.release()
        except RuntimeError:
            pass  # already rung

    def sleep(self, until_ns: Optional[int]) -> None:
        """Until a ring, or time.monotonic_ns() reaches until_ns (None: no time)."""
        if until_ns is None:
            self._bell.acquire()
        else:
            self._bell.acquire(timeout=max(until_ns - time.monotonic_ns(), 0) / 1e9)


class Wait:
    """One pending wait: `attempt()` acquires or raises (Busy when held)."""

    def __init__(self, attempt: Callable[[], Any], release: Callable[[Any], None],
                 deadline: Optional[int], timed_out: Callable[[], BaseException],
                 loop: asyncio.AbstractEventLoop, fut: "asyncio.Future[Any]",
                 doze_ns: int) -> None:
        self.attempt = attempt
        self.release = release
        self.deadline = deadline  # time.monotonic_ns(); None: no bound
        self.once = False  # a single try: Busy stays Busy
        self.timed_out = timed_out
        self.loop = loop
        self.fut = fut
        self.state = WAITING
        self.next_try = 0
        self.backoff = _FIRST_NS
        self.doze_ns = doze_ns  # the longest pause between attempts


class Waiter:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # guards every Wait's state and `waits`
        self.waits: List[Wait] = []
        self._sleeper = Sleeper(self._run, "shmlease-aio")

    def submit(self, w: Wait) -> None:
        with self.lock:
            self.waits.append(w)
        self._sleeper.ring()

    def cancel(self, w: Wait) -> None:
        with self.lock:
            if w.state in (WAITING, TRYING):
                w.state = CANCELLED  # a running attempt sees it when it ends

    def _run(self) -> None:
        while True:
            now = time.monotonic_ns()
            with self.lock:
                self.waits = [w for w in self.waits if w.state in (WAITING, TRYING)]
                due = [w for w in self.waits if w.state == WAITING and w.next_try <= now]
                for w in due:
                    w.state = TRYING
            for w in due:
                self._try(w)
            with self.lock:
                nxt = min((w.next_try for w in self.waits if w.state == WAITING), default=None)
            self._sleeper.sleep(nxt)

    def _try(self, w: Wait) -> None:
        result: Any = None
        error: Optional[BaseException] = None
        busy = False
        try:
            result = w.attempt()
        except BaseException as e:  # noqa: B902 - every outcome goes to the awaiting task
            error = e
            busy = getattr(e, "name", "") == "SHL_EBUSY"
        now = time.monotonic_ns()
        with self.lock:
            cancelled = w.state == CANCELLED
            if not cancelled:
                if busy and (w.deadline is None or now < w.deadline):
                    w.state = WAITING
                    w.next_try = now + w.backoff
                    if w.deadline is not None and w.next_try > w.deadline:
                        w.next_try = w.deadline  # one last look at the deadline
                    w.backoff = min(w.backoff * 2, w.doze_ns)
                    return
                w.state = DONE
        if cancelled:
            if error is None:
                w.release(result)  # acquired while the cancel came: give it back
            return
        if busy and not w.once:
            error = w.timed_out()  # a wait that ran out
        try:
            w.loop.call_soon_threadsafe(_deliver, w, result, error)
        except RuntimeError:  # the loop is closed: nobody will take it
            if error is None:
                w.release(result)


def _deliver(w: Wait, result: Any, error: Optional[BaseException]) -> None:
    if w.fut.done():  # cancelled after the attempt succeeded
        if error is None:
            w.release(result)
        return
    if error is None:
        w.fut.set_result(result)
    else:
        w.fut.set_exception(error)


waiter = Waiter()


def _after_fork() -> None:
    global waiter
    waiter = Waiter()


os.register_at_fork(after_in_child=_after_fork)


async def wait(attempt: Callable[[], Any], release: Callable[[Any], None],
               timeout_ns: Optional[int], timed_out: Callable[[], BaseException],
               doze_ns: int = DOZE_NS) -> Any:
    """Acquire with `attempt` (which raises Busy while the lease is held)
    until it succeeds or timeout_ns (None: no bound; 0: one try) passes."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    start = time.monotonic_ns()
    w = Wait(attempt, release, None if timeout_ns is None else start + timeout_ns,
             timed_out, loop, fut, doze_ns)
    w.once = timeout_ns == 0
    waiter.submit(w)
    try:
        return await fut
    except asyncio.CancelledError:
        waiter.cancel(w)
        raise
