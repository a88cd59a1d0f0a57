"""One thread per process that starts the library's renewer for the kept
leases that need one.

Starting a renewer costs a thread, an eventfd and a renewal (tens of
microseconds, joined again at the end), while most ``with t.lease(...)``
blocks end long before their lease's first renewal would be due. So the
lease context does not start one: it registers the lease here with a due
time, half a renewal interval after the acquisition began, and this thread
starts the renewer for the leases still held then. The renewer's start
renews at once and sets its local deadline from that renewal, so a late
start loses nothing: until the due time the lease's expiry is most of a ttl
away. A lease that is asked for what only the renewer knows (check(),
lost, fileno(), ...) starts it at once itself (Lease._kept()).

The fast path is two dictionary operations: registering puts the lease in
``pending`` and wakes the thread only when its due time is earlier than the
thread's next look; leaving the block takes the lease out again. Whoever
takes a lease out of ``pending`` owns its next step: the block's end
releases it, a starter starts its renewer. Starters take ``lock`` among
themselves and publish ``lease._starting`` (a held lock) before taking the
lease, so that a block ending meanwhile waits for the start to finish.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, Optional

_NEVER = 1 << 63
_IDLE_NS = 1_000_000_000  # an idle thread looks this often ...
_IDLE_ROUNDS = 8  # ... this many times, then sleeps until a lease comes


class Sleeper:
    """A daemon thread, started at the first ring(), that sleeps in sleep()
    until a ring or a time (also used by _aio.py)."""

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


class Keeper:
    def __init__(self) -> None:
        self.pending: Dict[Any, int] = {}  # lease -> due (time.monotonic_ns())
        self.lock = threading.Lock()  # among starters
        self.wake_at = _NEVER  # the thread's next look; _NEVER while it scans
        self._sleeper = Sleeper(self._run, "shmlease-keeper")
        self.ring = self._sleeper.ring

    def add(self, lease: Any, due: int) -> None:
        self.pending[lease] = due  # (Lease.acquire does the same, inline)
        if due < self.wake_at:
            self.ring()

    def claim(self, lease: Any) -> Optional[Any]:
        """Take a pending lease out to start its renewer: a held lock (also
        in lease._starting) to release once done; None if the lease was no
        longer pending."""
        with self.lock:
            if lease not in self.pending:
                return None
            ready = threading.Lock()
            ready.acquire()
            lease._starting = ready
            if self.pending.pop(lease, None) is None:  # its block ended meanwhile
                lease._starting = None
                return None
            return ready

    def _run(self) -> None:
        idle = 0
        while True:
            self.wake_at = _NEVER  # a lease added during the scan rings
            now = time.monotonic_ns()
            nxt = _NEVER
            due = []
            for lease, at in list(self.pending.items()):
                if at <= now:
                    due.append(lease)
                elif at < nxt:
                    nxt = at
            for lease in due:
                try:
                    lease._keep_now(on_keeper=True)
                except Exception:  # noqa: BLE001 - this thread must go on for the others
                    pass  # the lease is pending again (Lease._keep_now)
            idle = 0 if due or self.pending else idle + 1
            if nxt == _NEVER and idle <= _IDLE_ROUNDS:
                nxt = now + _IDLE_NS
            self.wake_at = nxt
            self._sleeper.sleep(None if nxt == _NEVER else nxt)


keeper = Keeper()


def _after_fork() -> None:
    # The child has no keeper thread; the parent's pending leases stay the
    # parent's (every call on them raises UsedAfterFork in the child).
    global keeper
    keeper = Keeper()


os.register_at_fork(after_in_child=_after_fork)
