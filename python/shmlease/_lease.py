"""The lease context: Table.lease() makes a Lease, which acquires, keeps
the lease alive with the library's renewer (started only when the lease
needs it) and releases it; and the asyncio waits."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import TYPE_CHECKING, Any, Optional, Tuple

from . import _aio, _shmlease
from ._errors import Error, Lost, Removed, TimedOut, UsedAfterFork
from ._records import Buffer, Duration, LossReason
from ._shmlease import _duration_ns

if TYPE_CHECKING:
    from . import Table

_mono = time.monotonic_ns  # the clock of the library's local deadlines (CLOCK_MONOTONIC)
_owner = ""  # this process's default owner, once made ("" again in a forked child)


def default_owner() -> str:
    """ "host:pid", cut to OWNER_MAX bytes of printable ASCII: the owner that
    Table.lease() uses when none is given."""
    global _owner
    if not _owner:
        pid = ":%d" % os.getpid()
        host = socket.gethostname().encode("ascii", "replace").decode()
        host = "".join(c if " " <= c <= "~" else "?" for c in host) or "localhost"
        _owner = host[: _shmlease.SHL_OWNER_MAX - len(pid)] + pid
    return _owner


def _forget_owner() -> None:
    global _owner
    _owner = ""


os.register_at_fork(after_in_child=_forget_owner)


async def _aio_acquire_wait(table: Table, lease: str, owner: str, ttl: Optional[Duration],
                            timeout: Optional[Duration], ttl_ns: Optional[int],
                            timeout_ns: Optional[int], shared: bool = False) -> Any:
    """The asyncio wait (shmlease/_aio.py): no executor thread; a cancel ends
    it at once, and a cancelled wait never acquires afterwards."""
    ttl_v = _duration_ns(ttl, ttl_ns, "ttl", False)
    if ttl_v is None:
        raise TypeError("missing ttl (seconds) or ttl_ns")
    wait_v = _duration_ns(timeout, timeout_ns, "timeout", True)
    return await _wait_async(table, lease, owner, ttl_v, wait_v, shared)


def _wait_async(table: Table, lease: str, owner: str, ttl_ns: int, wait_ns: Optional[int],
                shared: bool) -> Any:
    if shared:
        def attempt() -> Any:
            return table.acquire_shared(lease, owner, ttl_ns=ttl_ns)

        def give_back(r: Any) -> None:
            _release_quietly(table, lease, owner, r[0])
    else:
        def attempt() -> Any:
            return table.acquire(lease, owner, ttl_ns=ttl_ns)

        def give_back(r: Any) -> None:
            _release_quietly(table, lease, owner, r)

    def timed_out() -> BaseException:
        return TimedOut("%s: %s" % (lease, _shmlease.strerror(TimedOut.code)[1]))

    return _aio.wait(attempt, give_back, wait_ns, timed_out,
                     _aio.ETCD_DOZE_NS if table.etcd else _aio.DOZE_NS)


def _release_quietly(table: Table, lease: str, owner: str, token: int) -> None:
    try:
        table.release(lease, owner, token)
    except Error:
        pass  # already lost: nothing to give back


def _ns(sec: Optional[Duration], ns: Optional[int], what: str,
        zero_ok: bool = True) -> Optional[int]:
    """Seconds or exact nanoseconds (``what_ns``) as the extension reads them in
    every call; None when neither is given."""
    return _shmlease._duration_ns(sec, ns, what, zero_ok)


class Lease:
    """A held lease kept alive by the library's renewer thread; made by
    Table.lease(). Use it as a context manager (``with`` or ``async with``).

    Attributes: ``token`` (the fencing token), ``shared`` and, for a shared
    lease, ``gen`` (the writer generation it began under), ``lost`` (True
    once this process can no longer be sure it holds the lease),
    ``loss_reason``.
    Methods: write() (guarded; raises Lost), read(), check() (raises Lost),
    fileno() (readable once the lease is lost: for select/asyncio),
    wait_lost() (async), release().

    The renewer thread is started only when the lease needs it: half a
    renewal interval after the acquisition (one native thread per process,
    which needs no GIL, does that: Table._defer), or at once by check(),
    ``lost``, ``loss_reason``, fileno() and wait_lost(). Until then the
    lease's expiry is most of a ttl away and write() checks the local
    deadline and the table, as the renewer's guarded write does; so a short
    block costs an acquire and a release, not a thread. With ``interval``,
    ``margin`` or ``max_hold``, or on a manual-clock table (which the
    renewer refuses), the renewer starts with the lease, as before.
    """


    # What most uses leave as it is: class attributes, not set per use.
    gen: int = 0  #: a shared lease's writer generation
    token: int = 0  #: the fencing token (0 until acquired)
    _interval: Optional[int] = None
    _margin: Optional[int] = None
    _max_hold: Optional[int] = None
    _eager = False  # start the renewer with the lease
    _renewer: Optional[Any] = None
    _held = False  # acquired by this context and not yet released
    _safe_ns = 0  # local deadline while no renewer runs
    _loss = 0  # SHL_LOSS_* seen while no renewer ran
    _loss_fd = -1  # readable pipe for fileno() after such a loss
    _deferred: Optional[Any] = None  # while the renewer is not started (Table._defer)
    _forked: Optional[BaseException] = None  # the refusal in a forked child
    _reason = 0

    def __init__(self, table: Table, name: str, owner: Optional[str], ttl_ns: int,
                 wait_ns: Optional[int], shared: bool = False,
                 interval: Optional[Duration] = None, margin: Optional[Duration] = None,
                 max_hold: Optional[Duration] = None) -> None:
        self.table = table
        self.name = name
        self.owner = owner if owner is not None else (_owner or default_owner())
        self.ttl_ns = ttl_ns
        self.wait_ns = wait_ns  # 0: try once; None: no bound
        self.shared = shared
        if interval is not None or margin is not None or max_hold is not None:
            self._interval = _ns(interval, None, "interval")
            self._margin = _ns(margin, None, "margin")
            self._max_hold = _ns(max_hold, None, "max_hold")
            self._eager = True

    # -- acquiring and ending

    def _start(self, token: int, began_ns: int) -> None:
        self.token = token
        table = self.table
        lazy = table._lazy_keep
        if lazy is None:
            lazy = table._lazy_keep = not table.info().manual_clock
        ttl = self.ttl_ns
        if lazy and not self._eager and ttl >= 3:  # the defaults are valid: interval > 0
            _, self._safe_ns, self._deferred = table._defer(self.name, self.owner, token, ttl,
                                                            began_ns, 0)
            self._held = True
            return
        try:
            self._renewer = table._renewer(self.name, self.owner, token, self.ttl_ns,
                                           self._interval, self._margin, self._max_hold)
        except BaseException:
            try:
                table.release(self.name, self.owner, token)
            except Error:
                pass
            raise
        self._held = True

    def _settle(self, out: Any) -> None:
        """What a Deferred's take() gave: the Renewer, or the loss found at
        its start."""
        if isinstance(out, int):
            self._loss = out
        else:
            self._renewer = out

    def _kept(self) -> Optional[Any]:
        """The renewer, started now if it was not yet; None when the lease
        was found lost before one could start."""
        if not self._held:
            raise ValueError("lease %r is not held by this context" % self.name)
        if self._forked is not None:
            raise self._forked
        d = self._deferred
        if d is not None:
            d.start()
            self._deferred = None
            out = d.take()
            if out is None:
                # Not started: refused for a passing reason, or a forked
                # child (the parent's keeper). Here, now, or pending again.
                try:
                    out = self.table._renewer(self.name, self.owner, self.token, self.ttl_ns)
                except UsedAfterFork as e:
                    self._forked = e  # the parent's lease: nothing to keep here
                    raise
                except BaseException:
                    # Pending again, due now; the local deadline stays.
                    began = self._safe_ns - self.ttl_ns + self.ttl_ns // 10
                    _, _, self._deferred = self.table._defer(self.name, self.owner, self.token,
                                                             self.ttl_ns, began, _mono())
                    raise
            self._settle(out)
        return self._renewer

    def _lost_early(self, reason: int) -> None:
        """Declare, without a renewer, that the lease was lost (unless its
        renewer started meanwhile: then it tells)."""
        d = self._deferred
        if d is not None and d.lose(reason):
            self._deferred = None
            self._settle(d.take())
        else:
            self._kept()

    def acquire(self) -> "Lease":
        """Acquire (waiting as configured) and start keeping the lease."""
        if self._held:
            raise RuntimeError("lease already held by this context")
        table = self.table
        lazy = table._lazy_keep
        if lazy and not self._eager and not self.shared and self.ttl_ns >= 3:
            # The common case in one native call: acquire, then keep the
            # lease with a renewer that starts when due (as _start does).
            self.token, self._safe_ns, self._deferred = table._acquire_kept(
                self.name, self.owner, self.ttl_ns, self.wait_ns)
            self._held = True
            return self
        began = _mono()
        if self.shared:
            if self.wait_ns == 0:
                token, self.gen = table.acquire_shared(self.name, self.owner, ttl_ns=self.ttl_ns)
            else:
                token, self.gen = table.acquire_shared_wait(
                    self.name, self.owner, ttl_ns=self.ttl_ns, timeout_ns=self.wait_ns)
        elif self.wait_ns == 0:
            token = table.acquire(self.name, self.owner, ttl_ns=self.ttl_ns)
        else:
            token = table.acquire_wait(self.name, self.owner, ttl_ns=self.ttl_ns,
                                       timeout_ns=self.wait_ns)
        self._start(token, began)
        return self

    async def acquire_async(self) -> "Lease":
        """acquire() without blocking the event loop or taking an executor
        thread (see acquire_wait_async())."""
        if self._held:
            raise RuntimeError("lease already held by this context")
        began = _mono()
        r = await _wait_async(self.table, self.name, self.owner, self.ttl_ns, self.wait_ns,
                              self.shared)
        if self.shared:
            token, self.gen = r
        else:
            token = r
        self._start(token, began)
        return self

    def release(self) -> None:
        """Stop the renewer and release the lease. Raises Lost if it was lost
        (then nothing was released: someone else may hold it)."""
        if not self._held:
            return
        self._held = False
        d = self._deferred
        if d is not None:
            self._deferred = None
            try:
                # Released there if it never needed its renewer: the table
                # alone says whether it is still ours (no renewer declared a
                # local deadline).
                out = d.release()
            except Lost:
                self._reason = 0
                raise Lost("%s: lease lost before its release (%s)" % (
                    self.name, self._reason_text())) from None
            if out is None:
                return
            self._settle(out)
        r, self._renewer = self._renewer, None
        if self._loss_fd >= 0:
            os.close(self._loss_fd)
            self._loss_fd = -1
        if r is None:
            if self._loss:
                self._reason, self._loss = self._loss, 0
                raise Lost("%s: lease lost before its release (%s)" % (
                    self.name, self._reason_text()))
            self.table.release(self.name, self.owner, self.token)
            return
        self._reason = r.lost() if r.running else 0
        if not r.stop(True):
            raise Lost("%s: lease lost before its release (%s)" % (
                self.name, self._reason_text()))

    def _reason_text(self) -> str:
        reason = self._reason
        return LossReason(reason).name.lower() if reason else "refused at release"

    __enter__ = acquire

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        if et is None:
            self.release()
            return
        try:
            self.release()
        except Lost as e:
            # Another exception is on its way out: keep it, say the lease
            # was lost too.
            if hasattr(ev, "add_note"):
                ev.add_note("shmlease: %s" % e)

    async def __aenter__(self) -> "Lease":
        return await self.acquire_async()

    async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None:
        if self._renewer is None:
            self.__exit__(et, ev, tb)  # a release: no thread to join
            return
        # Stopping joins the renewer's thread: a short wait, done off the loop.
        await asyncio.get_running_loop().run_in_executor(None, self.__exit__, et, ev, tb)

    # -- while held

    def _r(self) -> Any:
        r = self._kept()
        if r is None:
            raise Lost("%s: lease lost (%s)" % (self.name, LossReason(self._loss).name.lower()))
        return r

    @property
    def lost(self) -> bool:
        """True once this process can no longer be sure it holds the lease:
        a renewal was refused or came too late (the local deadline passed)."""
        try:
            self._r().check()
            return False
        except Lost:
            return True

    @property
    def loss_reason(self) -> Optional[LossReason]:
        """Why the lease was declared lost, None while held."""
        r = self._kept()
        reason = r.lost() if r is not None else self._loss
        return LossReason(reason) if reason else None

    def check(self) -> None:
        """Raise Lost unless the lease is still held as far as this process
        can tell. Call it before an effect outside the table (and pass
        ``token`` to the resource so that it can refuse a stale one)."""
        self._r().check()

    def write(self, value: Buffer) -> None:
        """Replace the lease's value, checked against the lease in the table
        atomically with the write. Raises Lost (nothing written). A shared
        lease never writes: the table refuses it (Lost), and the lease stays
        held."""
        if not self._held:
            raise ValueError("lease %r is not held by this context" % self.name)
        if self.shared:
            self.table.write(self.name, self.owner, self.token, value)
        r = self._renewer
        if r is not None:
            r.write(value)
            return
        # No renewer yet: what shl_renewer_write() does, against the local
        # deadline and the table.
        if not self._loss and self._deferred is not None:
            if _mono() >= self._safe_ns:
                self._lost_early(_shmlease.SHL_LOSS_DEADLINE)
            else:
                try:
                    self.table.write(self.name, self.owner, self.token, value)
                    return
                except Lost:
                    self._lost_early(_shmlease.SHL_LOSS_REFUSED)
                    raise
                except Removed:
                    self._lost_early(_shmlease.SHL_LOSS_REMOVED)
                    raise
        self._r().write(value)

    def read(self) -> Tuple[bytes, int]:
        """The lease's value and the token that wrote it."""
        return self.table.read(self.name)

    def fileno(self) -> int:
        """A descriptor that becomes readable when the lease is declared lost
        (the renewer's eventfd), for select() and event loops."""
        r = self._kept()
        if r is not None:
            return int(r.fileno())
        if self._loss_fd < 0:  # lost before a renewer could start: readable now
            self._loss_fd, w = os.pipe()
            os.write(w, b"!")
            os.close(w)
        return self._loss_fd

    async def wait_lost(self) -> LossReason:
        """Wait, without blocking the event loop, until the lease is lost."""
        loop = asyncio.get_running_loop()
        fd = self.fileno()
        done = loop.create_future()
        def readable() -> None:
            if not done.done():
                done.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await done
        finally:
            loop.remove_reader(fd)
        reason = self.loss_reason
        assert reason is not None
        return reason

    def __repr__(self) -> str:
        state = "held" if self._held else "not held"
        return "<shmlease.Lease %r owner=%r token=%d %s>" % (self.name, self.owner, self.token,
                                                             state)


Lease.__module__ = "shmlease"
