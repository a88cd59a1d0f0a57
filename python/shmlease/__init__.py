"""Leases with fencing tokens in POSIX shared memory.

A binding of the shmlease C library: processes on one Linux host share named
leases (exclusive ownership until a deadline) through a shared-memory table.
Every acquisition gets a new, strictly increasing fencing token, and every
write made through the library is checked, atomically with the write, against
the lease's owner, token and expiry: a process paused past its expiry, or
holding an old token, cannot change the lease's value.

    import shmlease
    with shmlease.Table("jobs") as t:        # made if missing, as shmlease run does
        with t.lease("nightly", ttl=30, timeout=300) as lease:
            lease.write(b"step 1")          # raises Lost the moment it is lost
            do_step(fence=lease.token)      # pass the token to outside resources

``timeout`` and ``blocking`` mean what they mean to filelock (by default
the acquisition waits without a bound); Busy and TimedOut are NotAcquired.
Durations are seconds (int or float, like time.sleep, or a
datetime.timedelta); each call that takes one also takes the exact integer
nanoseconds (ttl_ns=, timeout_ns=). Errors are exceptions, one class per
library code under Error, each with .code and .name (see errors()). Blocking
calls release the GIL; acquire_wait_async() and ``async with t.lease(...)``
do not block an event loop nor take an executor thread, and end on cancel.

Names of the form ``etcd://HOST:PORT/TABLE`` are passed to the library as they
are: they work wherever the C library supports etcd tables.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union, overload

from . import _errors, _shmlease
from ._errors import (Broken, Busy, Canceled, ClockBackwards, Corrupt, Error, Exists, ForkError,
                      Full, InvalidArgument, Lost, Mismatch, NoSpace, NotAcquired, NotFound,
                      NotSupported, OutOfMemory, PermissionDenied, Removed, Stale, SystemFailure,
                      TimeNamespace, TimedOut, Timeout, TokensExhausted, TooBig, Unavailable,
                      UsedAfterFork, VersionMismatch, _BY_CODE, error_class, errors)
from ._election import Campaign, Election, Leader, Term
from ._lease import Lease, _aio_acquire_wait, _ns, default_owner
from ._records import (Buffer, Duration, Event, Heartbeat, LeaseDetail, LeaseInfo,  # noqa: F401
                       LossReason, Seconds, State, TableInfo)
from ._shmlease import Fence, _duration_ns, strerror, unlink, version

__all__ = [
    "Table", "Lease", "Election", "Leader", "Term", "Campaign", "LeaseInfo", "TableInfo", "LeaseDetail", "Event", "Heartbeat", "State",
    "LossReason", "Fence", "errors", "error_class", "strerror", "version", "unlink",
    "default_owner",
    "NAME_MAX", "OWNER_MAX", "TABLE_NAME_MAX", "CAPACITY_MAX", "VALUE_MAX",
    "Broken", "Busy", "Canceled", "ClockBackwards", "Corrupt", "Error", "Exists", "ForkError",
    "Full", "InvalidArgument", "Lost", "Mismatch", "NoSpace", "NotAcquired", "NotFound",
    "NotSupported", "OutOfMemory", "PermissionDenied", "Removed", "Stale", "SystemFailure",
    "TimeNamespace", "TimedOut", "Timeout", "TokensExhausted", "TooBig", "Unavailable",
    "UsedAfterFork", "VersionMismatch",
]

NAME_MAX: int = _shmlease.SHL_NAME_MAX
OWNER_MAX: int = _shmlease.SHL_OWNER_MAX
TABLE_NAME_MAX: int = _shmlease.SHL_TABLE_NAME_MAX
CAPACITY_MAX: int = _shmlease.SHL_CAPACITY_MAX
VALUE_MAX: int = _shmlease.SHL_VALUE_MAX

# Classes made at import for codes the library has and this package does not name.
globals().update(_errors.generated)
__all__ += list(_errors.generated)

_shmlease._setup(_BY_CODE, Error, LeaseInfo._from_tuple)

# ------------------------------------------------------------------ Table


class Table(_shmlease._Table):
    """A lease table: a shared-memory segment (or, where the library supports
    them, an ``etcd://`` table), opened by this process.

    By default (``create=None``) the table is opened as ``shmlease run``
    opens it: an existing table whatever its parameters, else a new one made
    with the parameters given (the library's defaults otherwise).
    ``create=False`` only opens an existing table (NotFound otherwise);
    ``create=True`` makes a missing table and opens an existing one only if
    it matches the parameters (else Mismatch); ``exclusive`` refuses an
    existing one (Exists). ``capacity`` lease slots of ``value_size`` bytes
    each; ``mode`` 0o600 or 0o660 (group sharing). ``manual_clock`` makes a
    table whose clock only clock_set() moves, for deterministic tests.
    ``reclaim_orphans`` lets an acquire take over an unexpired lease whose
    holder is proven dead, once ``reclaim_delay`` seconds (or
    ``reclaim_delay_ms``) have passed since the death was first seen; left
    as None, both are the library's defaults (shl_options_init(): on, after
    1 s, as in shmlease run); ``reclaim_orphans=False`` keeps such a lease
    until its expiry.
    ``token_state_path`` names a token state file that keeps tokens
    increasing across re-creations of the table. ``max_shared`` and
    ``max_waiters`` size the table's reader and waiter pools (shared holders
    and queued waiters of all its leases at once), ``spare_values`` its value
    pool (spare value buffers, one kept by each lease written, taken back
    from another lease when none is free; 0: no lease can be written);
    None: the library's defaults, from the capacity. ``history`` is the
    events kept per lease (None: 8). A call that needs a full pool raises
    Full, never waits.
    A table is a context manager; close() unmaps it (leases stay as they
    are).

    One Table may be used by any number of threads. After os.fork() every
    call on it raises UsedAfterFork in the child: open the table again there.
    """

    def __init__(self, name: str, *, create: Optional[bool] = None, exclusive: bool = False,
                 capacity: int = 1024, value_size: int = 256, mode: int = 0o600,
                 manual_clock: bool = False, reclaim_orphans: Optional[bool] = None,
                 reclaim_delay: Optional[Duration] = None, reclaim_delay_ms: Optional[int] = None,
                 token_state_path: Optional[Union[str, "os.PathLike[str]"]] = None,
                 max_shared: Optional[int] = None, max_waiters: Optional[int] = None,
                 spare_values: Optional[int] = None, history: Optional[int] = None) -> None:
        if reclaim_delay is not None and reclaim_delay_ms is not None:
            raise TypeError("give reclaim_delay or reclaim_delay_ms, not both")
        if reclaim_delay is not None:
            ns = _ns(reclaim_delay, None, "reclaim_delay") or 0
            reclaim_delay_ms = -(-ns // 1_000_000)
        if create is not None and not isinstance(create, bool):
            raise TypeError("create must be None, True or False")
        opts: Dict[str, Any] = dict(
            capacity=capacity, value_size=value_size, mode=mode, manual_clock=manual_clock,
            reclaim_orphans=reclaim_orphans, reclaim_delay_ms=reclaim_delay_ms,
            token_state_path=token_state_path, max_shared=max_shared, max_waiters=max_waiters,
            spare_values=spare_values, history=history)
        if create is None and not exclusive:
            try:  # as shmlease run: the table there, whatever its parameters ...
                super().__init__(name)
            except NotFound:  # ... or a new one
                try:
                    super().__init__(name, create=True, **opts)
                except (Exists, Mismatch):  # made meanwhile by another process
                    super().__init__(name)
        else:
            super().__init__(name, create=bool(create), exclusive=exclusive, **opts)
        self._lazy_keep: Optional[bool] = None  # Lease: whether the renewer may start late

    def __repr__(self) -> str:
        return "<shmlease.Table %r %s>" % (self.name, "closed" if self.closed else "open")

    def stat(self, lease: str) -> LeaseInfo:
        """A lock-free snapshot of the lease. NotFound if it was never used."""
        return LeaseInfo._from_tuple(self._stat(lease))

    @property
    def etcd(self) -> bool:
        """Whether this is a table in an etcd cluster (an etcd:// or etcds:// name)."""
        return self.name.startswith(("etcd://", "etcds://"))

    def info(self) -> TableInfo:
        """The table's parameters and how many lease names it holds."""
        t = self._info()
        manual = t[3] == _shmlease.SHL_CLOCK_MANUAL
        if self.etcd:
            return TableInfo(None, t[1], t[2], manual, None, None, None, bool(t[7]), None, None,
                             None, None, None, None, None, None, None, None, None, None, None,
                             None)
        return TableInfo(t[0], t[1], t[2], manual, t[4],
                         bool(t[5] & _shmlease.SHL_POLICY_RECLAIM_ORPHANS), t[6], bool(t[7]),
                         t[8], t[9], t[10], t[11], t[12], t[13], t[14], t[15], t[16], t[17],
                         t[18], t[19], t[20], t[21])

    def inspect(self, lease: str) -> LeaseDetail:
        """The inspector's detail of one lease (history, counters, lock state)."""
        t = self._inspect(lease)
        assert t is not None
        return LeaseDetail._from_tuple(t, self.etcd)

    def leases(self) -> Iterator[LeaseDetail]:
        """Every lease of the table, in slot order, as the inspector sees it
        (``shmlease ls``). Never waits long on a lease whose lock is held."""
        slot = 0
        while True:
            t = self._inspect(slot)
            if t is None:
                return
            yield LeaseDetail._from_tuple(t, self.etcd)
            slot += 1

    def heartbeat(self, lease: str) -> Heartbeat:
        """The heartbeat of the lease's renewer (token 0: no renewer runs)."""
        h = self._heartbeat(lease)
        return Heartbeat(h[0], h[1], h[2], h[3], bool(h[4]))

    # ttl is required, in seconds or exactly in ttl_ns: one of them.
    @overload
    def lease(self, name: str, owner: Optional[str], ttl: Duration,
              timeout: Optional[Duration] = ..., *, blocking: bool = ..., ttl_ns: None = ...,
              timeout_ns: Optional[int] = ..., wait: Optional[Duration] = ...,
              wait_ns: Optional[int] = ..., interval: Optional[Duration] = ...,
              margin: Optional[Duration] = ..., max_hold: Optional[Duration] = ...,
              shared: bool = ...) -> "Lease": ...

    @overload
    def lease(self, name: str, owner: Optional[str] = ..., *, ttl: Duration,
              timeout: Optional[Duration] = ..., blocking: bool = ..., ttl_ns: None = ...,
              timeout_ns: Optional[int] = ..., wait: Optional[Duration] = ...,
              wait_ns: Optional[int] = ..., interval: Optional[Duration] = ...,
              margin: Optional[Duration] = ..., max_hold: Optional[Duration] = ...,
              shared: bool = ...) -> "Lease": ...

    @overload
    def lease(self, name: str, owner: Optional[str] = ..., ttl: None = ...,
              timeout: Optional[Duration] = ..., *, blocking: bool = ..., ttl_ns: int,
              timeout_ns: Optional[int] = ..., wait: Optional[Duration] = ...,
              wait_ns: Optional[int] = ..., interval: Optional[Duration] = ...,
              margin: Optional[Duration] = ..., max_hold: Optional[Duration] = ...,
              shared: bool = ...) -> "Lease": ...

    def lease(self, name: str, owner: Optional[str] = None, ttl: Optional[Duration] = None,
              timeout: Optional[Duration] = -1, *, blocking: bool = True,
              ttl_ns: Optional[int] = None, timeout_ns: Optional[int] = None,
              wait: Optional[Duration] = None, wait_ns: Optional[int] = None,
              interval: Optional[Duration] = None, margin: Optional[Duration] = None,
              max_hold: Optional[Duration] = None, shared: bool = False) -> "Lease":
        """A context manager that holds the lease and keeps it alive.

        ``with t.lease("nightly", ttl=30) as lease:`` acquires the lease,
        keeps it alive with the library's renewer (renewing every
        ``interval``, ttl/3 by default, and declaring the lease lost
        ``margin`` before an expiry it could not push back, ttl/10 by
        default), and on exit releases it. If the lease was lost, the exit
        raises Lost: the loss is never silent. ``async with`` does the same
        without blocking the event loop.

        ``timeout`` and ``blocking`` mean what they mean to filelock: by
        default (``timeout=-1``, ``blocking=True``) the acquisition waits as
        long as it takes; ``timeout=T`` waits at most T seconds and then
        raises TimedOut; ``timeout=0`` or ``blocking=False`` tries once and
        raises Busy (with the holder). Both are NotAcquired. ``wait`` is the
        older spelling of ``timeout`` (None: no bound). Durations are seconds
        (int, float or datetime.timedelta) or exact ``*_ns`` integers.

        The owner defaults to "host:pid". With ``shared=True`` the lease is
        held shared (acquire_shared()): ``lease.gen`` is the writer
        generation for Fence.admit_read(), and write() raises Lost.
        """
        ttl_v = _duration_ns(ttl, ttl_ns, "ttl", False)
        if ttl_v is None:
            raise TypeError("missing ttl (seconds) or ttl_ns")
        if not blocking:
            wait_v: Optional[int] = 0
        elif wait is not None or wait_ns is not None:
            if timeout != -1 or timeout_ns is not None:
                raise TypeError("give timeout or wait, not both")
            wait_v = _duration_ns(wait, wait_ns, "wait", True)
        elif timeout is None or (timeout == -1 and timeout_ns is None):
            wait_v = None  # no bound
        elif type(timeout) in (int, float) and timeout < 0:  # type: ignore[operator]
            wait_v = None  # filelock's "no bound"
        else:
            wait_v = _duration_ns(timeout if timeout != -1 else None, timeout_ns, "timeout", True)
        return Lease(self, name, owner, ttl_v, wait_v, shared, interval, margin, max_hold)

    def election(self, name: str, id: Optional[str] = None) -> Election:
        """A candidate ``id`` (default "host:pid", as default_owner()) in the
        election ``name``: one lease of this table, whose holder is the
        leader. Nothing is written until Election.campaign().

            with t.election("scheduler").campaign(ttl=5, value=b"10.0.0.7:80") as term:
                serve(fence=term)       # the term's fencing token

        Election.leader() and Election.observe() tell who leads."""
        return Election(self, name, id)

    @overload
    async def acquire_wait_async(self, lease: str, owner: str, ttl: Duration,
                                 timeout: Optional[Duration] = ..., *, ttl_ns: None = ...,
                                 timeout_ns: Optional[int] = ...) -> int: ...

    @overload
    async def acquire_wait_async(self, lease: str, owner: str, ttl: None = ...,
                                 timeout: Optional[Duration] = ..., *, ttl_ns: int,
                                 timeout_ns: Optional[int] = ...) -> int: ...

    async def acquire_wait_async(self, lease: str, owner: str, ttl: Optional[Duration] = None,
                                 timeout: Optional[Duration] = None, *,
                                 ttl_ns: Optional[int] = None,
                                 timeout_ns: Optional[int] = None) -> int:
        """acquire_wait() for asyncio, without an executor thread: one thread
        per process makes the waits' short non-blocking attempts (every 1 to
        20 ms) and hands the result to the loop. Cancelling the awaiting task
        ends the wait at once, and the wait never acquires afterwards (a
        lease that an attempt running at the cancel acquired is released at
        once). These waits are not in the lease's fair queue."""
        token: int = await _aio_acquire_wait(self, lease, owner, ttl, timeout, ttl_ns, timeout_ns)
        return token

    @overload
    async def acquire_shared_wait_async(self, lease: str, owner: str, ttl: Duration,
                                        timeout: Optional[Duration] = ..., *,
                                        ttl_ns: None = ...,
                                        timeout_ns: Optional[int] = ...) -> Tuple[int, int]: ...

    @overload
    async def acquire_shared_wait_async(self, lease: str, owner: str, ttl: None = ...,
                                        timeout: Optional[Duration] = ..., *, ttl_ns: int,
                                        timeout_ns: Optional[int] = ...) -> Tuple[int, int]: ...

    async def acquire_shared_wait_async(self, lease: str, owner: str,
                                        ttl: Optional[Duration] = None,
                                        timeout: Optional[Duration] = None, *,
                                        ttl_ns: Optional[int] = None,
                                        timeout_ns: Optional[int] = None) -> Tuple[int, int]:
        """acquire_shared_wait() for asyncio, as acquire_wait_async()."""
        r: Tuple[int, int] = await _aio_acquire_wait(self, lease, owner, ttl, timeout, ttl_ns,
                                                     timeout_ns, shared=True)
        return r
