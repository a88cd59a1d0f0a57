"""The records the package returns: lease and table snapshots, the
inspector's detail and history, heartbeats, and their enums."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any, Dict, Optional, Tuple, Union

from . import _shmlease

Seconds = Union[int, float]
Duration = Union[int, float, datetime.timedelta]
Buffer = Union[bytes, bytearray, memoryview]



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
    capacity, mode, reclaim_orphans, reclaim_delay_ms, size, allocated,
    creator_pid, token_floor and the pools and history (no slots, mode, policy, segment,
    creator, floor or pools)."""

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
    max_shared: Optional[int] = None  #: reader pool: shared holders of all leases at once
    shared_taken: Optional[int] = None  #: of those, in groups taken now
    max_waiters: Optional[int] = None  #: waiter pool: queued waiters of all leases
    waiters_taken: Optional[int] = None  #: of those, in groups taken now
    history: Optional[int] = None  #: events kept per lease
    spare_values: Optional[int] = None  #: value pool: spare value buffers of all leases
    spare_values_taken: Optional[int] = None  #: of those, kept by a lease now
    #: since creation, groups (spares) a lease kept that were taken back for
    #: another: a growing spare count says spare_values is below the leases
    #: written (each such write copies the other lease's value first)
    shared_taken_back: Optional[int] = None
    waiters_taken_back: Optional[int] = None
    spare_values_taken_back: Optional[int] = None
    #: memory the table takes now (its segment's allocated bytes): a slot is
    #: taken when its name is added, so it grows up to ``size``
    allocated: Optional[int] = None


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


for _c in (State, LossReason, LeaseInfo, TableInfo, Event, LeaseDetail, Heartbeat):
    _c.__module__ = "shmlease"  # where users find them
