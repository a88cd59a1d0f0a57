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

import asyncio
import dataclasses
import datetime
import enum
import inspect
import os
import socket
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type, Union, overload

from . import _aio, _shmlease
from ._shmlease import Fence, _duration_ns, strerror, unlink, version

__all__ = [
    "Table", "Lease", "LeaseInfo", "TableInfo", "LeaseDetail", "Event", "Heartbeat", "State",
    "LossReason", "Fence", "Error", "errors", "error_class", "strerror", "version", "unlink",
    "default_owner",
    "NAME_MAX", "OWNER_MAX", "TABLE_NAME_MAX", "CAPACITY_MAX", "VALUE_MAX",
]

NAME_MAX: int = _shmlease.SHL_NAME_MAX
OWNER_MAX: int = _shmlease.SHL_OWNER_MAX
TABLE_NAME_MAX: int = _shmlease.SHL_TABLE_NAME_MAX
CAPACITY_MAX: int = _shmlease.SHL_CAPACITY_MAX
VALUE_MAX: int = _shmlease.SHL_VALUE_MAX

Seconds = Union[int, float]
Duration = Union[int, float, datetime.timedelta]
Buffer = Union[bytes, bytearray, memoryview]

# ------------------------------------------------------------------ errors


class Error(Exception):
    """A shmlease error. Subclasses, one per library code, carry .code (the
    negative SHL_E* value) and .name ("SHL_EBUSY"), taken at import from the
    library's error table (shmlease.errors())."""

    code: int = 0
    name: str = "SHL_UNKNOWN"


# The codes' Python names and bases are chosen here; their numbers, C names and
# messages come from the library (_bind_errors below). A code the library adds
# later gets a class too, made at import, without an edit here.


class NotAcquired(Error):
    """The lease was not acquired: Busy (one try) or TimedOut (a wait ran
    out). Catch this one where either means "someone else has it", as
    filelock's Timeout is caught."""


class Busy(NotAcquired):
    """Held by another owner and unexpired. .holder is the holder seen at the
    refusal (a LeaseInfo; also .owner, .token, .remaining)."""

    name = "SHL_EBUSY"
    holder: Optional["LeaseInfo"] = None  # set by the extension at the refusal

    @property
    def owner(self) -> Optional[str]:
        return self.holder.owner if self.holder else None

    @property
    def token(self) -> Optional[int]:
        return self.holder.token if self.holder else None

    @property
    def remaining(self) -> Optional[float]:
        """Seconds the holder had left at the refusal."""
        return self.holder.remaining if self.holder else None


class Lost(Error):
    name = "SHL_ELOST"


class InvalidArgument(Error, ValueError):
    name = "SHL_EINVAL"


class ClockBackwards(Error, ValueError):
    name = "SHL_ECLOCK"


class NotFound(Error):
    name = "SHL_ENOENT"


class Full(Error):
    name = "SHL_EFULL"


class Corrupt(Error):
    name = "SHL_ECORRUPT"


class VersionMismatch(Error):
    name = "SHL_EVERSION"


class PermissionDenied(Error):
    name = "SHL_EPERM"


class Exists(Error):
    name = "SHL_EEXIST"


class TooBig(Error, ValueError):
    name = "SHL_E2BIG"


class NoSpace(Error):
    name = "SHL_ENOSPC"


class OutOfMemory(Error, MemoryError):
    name = "SHL_ENOMEM"


class SystemFailure(Error):
    name = "SHL_ESYS"


class TimeNamespace(Error):
    name = "SHL_ETIMENS"


class Broken(Error):
    name = "SHL_EBROKEN"


class UsedAfterFork(Error):
    name = "SHL_EFORK"


class TimedOut(NotAcquired, TimeoutError):
    name = "SHL_ETIMEDOUT"


class Mismatch(Error):
    name = "SHL_EMISMATCH"


class Canceled(Error):
    name = "SHL_ECANCELED"


class Stale(Error):
    name = "SHL_ESTALE"


class TokensExhausted(Error):
    name = "SHL_ETOKENS"


class NotSupported(Error):
    """The call has no meaning on this kind of table (on an etcd table: a
    manual clock, guard, clock_set, repair), or the library was built
    without etcd support and the name is an etcd:// one."""
    name = "SHL_ENOTSUP"


class Unavailable(Error):
    """The etcd cluster did not answer within the deadline (5 s): the change
    may or may not have happened."""
    name = "SHL_EUNAVAIL"


class Removed(Error):
    """The table was removed under this handle (shmlease rm, shl_unlink, or
    its name deleted or given to a new table): open it again. A new table
    under the name does not continue this one's tokens unless it was created
    with a token state file."""
    name = "SHL_EREMOVED"


# Aliases a Python user would look for.
Timeout = TimedOut
ForkError = UsedAfterFork

# A code the library gains later is named after its C name (SHL_EXYZ -> EXYZ).

_BY_CODE: Dict[int, Type[Error]] = {}


def _error_classes(base: Type[Error]) -> Iterator[Type[Error]]:
    for c in base.__subclasses__():
        yield c
        yield from _error_classes(c)


def _bind_errors() -> None:
    # Every class below Error that names a code (NotAcquired names none).
    static = {c.name: c for c in _error_classes(Error) if "name" in c.__dict__}
    for code, cname, message in _shmlease.errors():
        if code == 0:
            continue
        cls = static.pop(cname, None)
        if cls is None:
            pyname = cname[len("SHL_"):]
            cls = type(pyname, (Error,), {"__module__": __name__, "name": cname})
            globals()[pyname] = cls
        cls.code = code
        cls.__doc__ = "%s (%d): %s.%s" % (cname, code, message,
                                           "\n\n" + inspect.cleandoc(cls.__doc__)
                                           if cls.__doc__ else "")
        _BY_CODE[code] = cls
        __all__.append(cls.__name__)
    if static:  # the package was built against another library
        raise ImportError("shmlease: the library has no code %s" % ", ".join(sorted(static)))


_bind_errors()
__all__ += ["NotAcquired", "Timeout", "ForkError"]


def error_class(code: int) -> Type[Error]:
    """The exception class of a library return code (Error for an unknown one)."""
    return _BY_CODE.get(code, Error)


def errors() -> List[Tuple[int, str, str]]:
    """The library's error table: (code, name, message) for every code."""
    return _shmlease.errors()


# ------------------------------------------------------------------ records


class State(enum.IntEnum):
    """A lease's state (SHL_STATE_*)."""

    FREE = 0  #: never held, or released
    HELD = 1  #: held and unexpired
    EXPIRED = 2  #: the holder's time has run out; acquirable
    REVOKED = 3  #: ended by an administrator; acquirable
    ORPHANED = 4  #: held and unexpired, but the holder is proven dead


class LossReason(enum.IntEnum):
    """Why a kept lease was declared lost (SHL_LOSS_*)."""

    REFUSED = _shmlease.SHL_LOSS_REFUSED  #: the table refused a renewal or a write
    DEADLINE = _shmlease.SHL_LOSS_DEADLINE  #: no renewal succeeded in time
    MAX_HOLD = _shmlease.SHL_LOSS_MAX_HOLD  #: the bounded hold time was reached
    REMOVED = _shmlease.SHL_LOSS_REMOVED  #: the table was removed under the lease


@dataclasses.dataclass(frozen=True)
class LeaseInfo:
    """A snapshot of a lease (the fields of the C shl_lease_info)."""

    owner: str  #: last holder ("" if never held)
    token: int  #: the lease's current token (0: never acquired)
    expiry_ns: int  #: table clock at which the holder's time ends
    remaining_ns: int  #: expiry - now when HELD or ORPHANED, else 0
    now_ns: int  #: table clock when the snapshot was taken
    #: table clock of the acquisition; None on an etcd table, which records none
    since_ns: Optional[int]
    pid: Optional[int]  #: holder's pid (0 if never held); None on an etcd table, which records none
    state: State
    waiters: int  #: processes waiting to acquire
    value_len: int
    value_token: int  #: token that wrote the value (0: never written)

    @property
    def remaining(self) -> float:
        """Seconds the holder has left (0.0 unless HELD or ORPHANED)."""
        return self.remaining_ns / 1e9

    @property
    def held(self) -> bool:
        """Whether someone holds the lease now (HELD or ORPHANED)."""
        return self.state in (State.HELD, State.ORPHANED)

    @classmethod
    def _from_tuple(cls, t: Tuple[Any, ...]) -> "LeaseInfo":
        return cls(t[0], t[1], t[2], t[3], t[4], t[5], t[6], State(t[7]), t[8], t[9], t[10])


@dataclasses.dataclass(frozen=True)
class TableInfo:
    """A table's parameters (the fields of the C shl_table_info). On an etcd
    table what etcd does not keep is None, as in ``shmlease dump --json``:
    capacity, mode, reclaim_orphans, reclaim_delay_ms, size, creator_pid and
    token_floor (no slots, mode, policy, segment, creator or floor)."""

    capacity: Optional[int]
    value_size: int
    used: int  #: lease names in the table
    manual_clock: bool
    mode: Optional[int]
    reclaim_orphans: Optional[bool]
    reclaim_delay_ms: Optional[int]
    created: bool  #: this handle's open created the table
    size: Optional[int]  #: segment bytes
    creator_pid: Optional[int]
    token_floor: Optional[int]  #: every token of this table is above it (0: none)


@dataclasses.dataclass(frozen=True)
class Event:
    """One entry of a lease's history."""

    time_ns: Optional[int]  #: None on an etcd table (etcd keeps no time per revision)
    token: int
    pid: Optional[int]  #: None on an etcd table
    op: str  #: "acquire", "takeover", "renew", "release", "revoke", ...
    why: str  #: for "reject": the reason counter ("rej_stale", ...)
    owner: str  #: at most the owner's first 16 bytes
    #: etcd tables: the etcd revision of the event (increasing along a lease's
    #: history; time_ns and pid are None there); 0 on shared-memory tables
    revision: int


@dataclasses.dataclass(frozen=True)
class LeaseDetail:
    """What the inspector shows of a lease (the C shl_lease_detail). On an
    etcd table what only a segment has is None, as in ``shmlease dump
    --json``: slot, stable, the lock, the intent, heartbeat_ns,
    renewer_stalled, dead_seen_ns and counters (and in info, since_ns and
    pid; in each event, time_ns and pid, which carry a revision instead)."""

    name: str
    slot: Optional[int]
    info: LeaseInfo
    stable: Optional[bool]  #: False: a change was in flight; fields may mix before and after
    lock: Optional[str]  #: "FREE", "HELD", "DEAD" or "BROKEN"
    lock_pid: Optional[int]
    intent_armed: Optional[bool]
    intent_op: Optional[str]
    intent_token: Optional[int]
    heartbeat_ns: Optional[int]
    renewer_stalled: Optional[bool]
    dead_seen_ns: Optional[int]
    counters: Optional[Dict[str, int]]
    events_total: int
    events: Tuple[Event, ...]
    preview: bytes  #: the value's first bytes
    #: etcd tables: True when older events may exist that the history could
    #: not reach (compacted revisions, the bound); always False on shared memory
    history_partial: bool

    @classmethod
    def _from_tuple(cls, t: Tuple[Any, ...], etcd: bool = False) -> "LeaseDetail":
        info = LeaseInfo._from_tuple(t[2])
        if etcd:
            events = tuple(Event(None, e[1], None, *e[3:]) for e in t[14])
            return cls(t[0], None, info, None, None, None, None, None, None, None, None, None,
                       None, t[13], events, t[15], bool(t[16]))
        return cls(t[0], t[1], info, bool(t[3]), t[4], t[5], bool(t[6]),
                   t[7], t[8], t[9], bool(t[10]), t[11], dict(t[12]), t[13],
                   tuple(Event(*e) for e in t[14]), t[15], bool(t[16]))


@dataclasses.dataclass(frozen=True)
class Heartbeat:
    """The heartbeat a lease's renewer records in the table."""

    token: int  #: token of the lease the renewer keeps (0: none)
    beat_ns: int
    interval_ns: int
    age_ns: int
    stalled: bool


_shmlease._setup(_BY_CODE, Error, LeaseInfo._from_tuple)


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
        _owner = host[: OWNER_MAX - len(pid)] + pid
    return _owner


def _forget_owner() -> None:
    global _owner
    _owner = ""


os.register_at_fork(after_in_child=_forget_owner)


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
    as None, both are the library's defaults (shl_options_init()).
    ``token_state_path`` names a token state file that keeps tokens
    increasing across re-creations of the table. A table is a context
    manager; close() unmaps it (leases stay as they are).

    One Table may be used by any number of threads. After os.fork() every
    call on it raises UsedAfterFork in the child: open the table again there.
    """

    def __init__(self, name: str, *, create: Optional[bool] = None, exclusive: bool = False,
                 capacity: int = 1024, value_size: int = 256, mode: int = 0o600,
                 manual_clock: bool = False, reclaim_orphans: Optional[bool] = None,
                 reclaim_delay: Optional[Duration] = None, reclaim_delay_ms: Optional[int] = None,
                 token_state_path: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
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
            token_state_path=token_state_path)
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
                             None)
        return TableInfo(t[0], t[1], t[2], manual, t[4],
                         bool(t[5] & _shmlease.SHL_POLICY_RECLAIM_ORPHANS), t[6], bool(t[7]),
                         t[8], t[9], t[10])

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
