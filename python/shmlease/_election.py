"""Leader election: a candidate (Election), its term (Term), and the leader
as others see it (Leader). A thin layer over the library's shl_election_*
calls: an election is one lease of the table, its leader the lease's
holder, the leader's token the lease's fencing token, and the proclaimed
value the lease's value, written with that token."""

from __future__ import annotations

import dataclasses
import types
from typing import (TYPE_CHECKING, Any, AsyncIterator, Generator, Iterator, Optional, Type)

from . import _aio, _shmlease
from ._errors import Busy, Lost, TimedOut
from ._lease import _ns, default_owner
from ._records import Buffer, Duration, LossReason, State

if TYPE_CHECKING:
    from . import Table

DEFAULT_TTL = 10  # seconds, as shmlease elect


@dataclasses.dataclass(frozen=True)
class Leader:
    """An election's leader when looked at (the C shl_leader)."""

    id: str  #: the leader's candidate id
    token: int  #: its term's fencing token
    remaining_ns: int  #: time left on its lease when looked at
    pid: Optional[int]  #: its pid; None on an etcd table, which keeps none
    state: State  #: HELD, or ORPHANED (proven dead, not yet taken over)
    value: Optional[bytes]  #: the value it proclaimed; None before its first proclaim

    @property
    def remaining(self) -> float:
        """Seconds left on its lease when looked at."""
        return self.remaining_ns / 1e9

    @classmethod
    def _from_tuple(cls, t: Any, etcd: bool) -> "Leader":
        return cls(t[0], t[1], t[2], None if etcd else t[3], State(t[4]),
                   t[6] if t[5] else None)


class Term(int):
    """The token of a term won by Election.campaign(), and a context manager
    that resigns when the block ends. If the term was lost meanwhile, the
    exit raises Lost (unless the block raised): a loss is never silent."""

    election: "Election"

    def __new__(cls, token: int, election: "Election") -> "Term":
        self = super().__new__(cls, token)
        self.election = election
        return self

    @property
    def token(self) -> int:
        """The fencing token (the Term itself, as an int)."""
        return int(self)

    def __enter__(self) -> "Term":
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[types.TracebackType]) -> None:
        self.election._end_term(int(self), et is None)

    async def __aenter__(self) -> "Term":
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[types.TracebackType]) -> None:
        self.election._end_term(int(self), et is None)


class Campaign:
    """What Election.campaign_async() returns: await it for the Term, or use
    it with ``async with`` (which resigns at the end)."""

    def __init__(self, coro: "Generator[Any, None, Term]") -> None:
        self._coro = coro
        self._term: Optional[Term] = None

    def __await__(self) -> Generator[Any, None, Term]:
        return self._coro

    async def __aenter__(self) -> Term:
        self._term = await self
        return self._term

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[types.TracebackType]) -> None:
        if self._term is not None:
            await self._term.__aexit__(et, ev, tb)


class Election:
    """A candidate ``id`` in the election ``name`` of a table (made by
    Table.election()). Nothing is written until campaign().

    campaign() waits, in the order candidates came, until this candidate
    leads, proclaims its value with its token, and has the library's
    renewer keep the term; it returns the term's token (a Term: also a
    context manager that resigns). A loss is reported as the renewer
    reports it: lost() (sticky), fileno() (readable once lost), check()
    (raises Lost). proclaim() replaces the value, fenced by the token: once
    the term is over the table refuses it (Lost). resign() ends the term so
    that the next candidate leads at once. leader() and observe() need no
    candidate: they tell who leads.
    """

    def __init__(self, table: "Table", name: str, id: Optional[str] = None) -> None:
        self.table = table
        self.name = name
        self.id = id if id is not None else default_owner()
        self._h = table._election(name, self.id)

    def __repr__(self) -> str:
        return "<shmlease.Election %r id=%r token=%d>" % (self.name, self.id, self.token)

    # -- the candidate

    def campaign(self, ttl: Optional[Duration] = DEFAULT_TTL, timeout: Optional[Duration] = None,
                 value: Buffer = b"", *, ttl_ns: Optional[int] = None,
                 timeout_ns: Optional[int] = None, interval: Optional[Duration] = None,
                 margin: Optional[Duration] = None) -> Term:
        """Wait (GIL released) until this candidate leads, at most
        ``timeout`` seconds (None: no bound; 0: one try), then proclaim
        ``value`` and keep the term with a renewer (ttl default 10 s,
        renewed every ``interval``, ttl/3 by default, declared lost
        ``margin`` before an expiry it could not push back, ttl/10).
        Returns the term's token as a Term. Raises TimedOut; Busy when this
        handle already leads; TooBig when the value is longer than the
        table's value size (before waiting)."""
        ttl_v, wait_v, iv, mg = self._args(ttl, timeout, ttl_ns, timeout_ns, interval, margin)
        return Term(self._h.campaign(ttl_v, wait_v, value, iv, mg), self)

    def campaign_async(self, ttl: Optional[Duration] = DEFAULT_TTL,
                       timeout: Optional[Duration] = None, value: Buffer = b"", *,
                       ttl_ns: Optional[int] = None, timeout_ns: Optional[int] = None,
                       interval: Optional[Duration] = None,
                       margin: Optional[Duration] = None) -> Campaign:
        """campaign() for asyncio, without an executor thread (as
        Table.acquire_wait_async()): one thread per process makes short
        one-try campaigns (every 1 to 20 ms, 250 ms on etcd) and hands the
        result to the loop. Cancelling the awaiting task ends the wait at
        once, and the candidate never leads afterwards (a term that an
        attempt running at the cancel won is resigned at once). These waits
        are not in the fair queue. ``await`` it for the Term, or use
        ``async with`` to resign at the end."""
        ttl_v, wait_v, iv, mg = self._args(ttl, timeout, ttl_ns, timeout_ns, interval, margin)
        h = self._h

        def attempt() -> int:
            try:
                token: int = h.campaign(ttl_v, 0, value, iv, mg)
                return token
            except TimedOut:
                raise Busy("%s: led by another" % self.name) from None

        def give_back(token: int) -> None:
            if h.token == token:
                h.resign()

        def timed_out() -> BaseException:
            return TimedOut("%s: %s" % (self.name, _shmlease.strerror(TimedOut.code)[1]))

        async def run() -> Term:
            token: int = await _aio.wait(attempt, give_back, wait_v, timed_out,
                                         _aio.ETCD_DOZE_NS if self.table.etcd else _aio.DOZE_NS)
            return Term(token, self)

        return Campaign(run().__await__())

    def _args(self, ttl: Optional[Duration], timeout: Optional[Duration], ttl_ns: Optional[int],
              timeout_ns: Optional[int], interval: Optional[Duration],
              margin: Optional[Duration]) -> Any:
        if ttl_ns is not None and ttl == DEFAULT_TTL:
            ttl = None
        ttl_v = _ns(ttl, ttl_ns, "ttl", False)
        if ttl_v is None:
            raise TypeError("missing ttl (seconds) or ttl_ns")
        return (ttl_v, _ns(timeout, timeout_ns, "timeout"), _ns(interval, None, "interval"),
                _ns(margin, None, "margin"))

    @property
    def token(self) -> int:
        """The current term's token; 0 when not leading (never campaigned,
        resigned, or the loss was declared)."""
        t: int = self._h.token
        return t

    @property
    def leading(self) -> bool:
        """Whether this candidate leads, as far as this process can tell."""
        return self.token != 0

    def proclaim(self, value: Buffer) -> None:
        """Replace the proclaimed value, fenced by the leader's token: Lost
        once the term is over (nothing written); InvalidArgument when not
        leading; TooBig."""
        self._h.proclaim(value)

    def resign(self) -> bool:
        """End the term: the renewer stops and the lease is released, so that
        the next candidate leads at once. True when this call ended the
        term; False when it had been lost, or there was none."""
        return self._h.resign() is True

    def _end_term(self, token: int, raise_lost: bool) -> None:
        if self._h.closed or (self._h.token not in (0, token)):
            return  # resigned and campaigned again: that term is not this one
        if self._h.resign() is False and raise_lost:
            raise Lost("%s: the term of token %d was lost before its end" % (self.name, token))

    def lost(self) -> Optional[LossReason]:
        """Why the current term was declared lost (sticky), None while
        leading or when not leading."""
        r: int = self._h.lost()
        return LossReason(r) if r else None

    def fileno(self) -> int:
        """An eventfd that turns readable when the term is declared lost (for
        select or loop.add_reader); -1 when not leading."""
        fd: int = self._h.fileno()
        return fd

    def check(self) -> None:
        """Raise Lost unless this candidate still leads, as far as this
        process can tell."""
        self._h.check()

    def close(self) -> None:
        """Resign if leading, then free the handle."""
        self._h.close()

    def __enter__(self) -> "Election":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- anyone

    def leader(self) -> Optional[Leader]:
        """Who leads now, with its token and value; None when nobody does
        (never led, resigned, expired or revoked)."""
        t = self.table._leader(self.name)
        return None if t is None else Leader._from_tuple(t, self.table.etcd)

    def observe(self, after: int = 0, timeout: Optional[Duration] = None, *,
                timeout_ns: Optional[int] = None) -> Iterator[Leader]:
        """The leaders whose token is above ``after``, in token order, as
        they come (the current one first): each wait for the next one lasts
        up to ``timeout`` seconds (None: no bound), and the iteration ends
        when one runs out. A leader whose whole term passed between two
        looks may be skipped; the current one never is."""
        wait_v = _ns(timeout, timeout_ns, "timeout")
        while True:
            t = self.table._observe(self.name, after, wait_v)
            if t is None:
                return
            leader = Leader._from_tuple(t, self.table.etcd)
            after = leader.token
            yield leader

    async def observe_async(self, after: int = 0, timeout: Optional[Duration] = None, *,
                            timeout_ns: Optional[int] = None) -> AsyncIterator[Leader]:
        """observe() for asyncio, without an executor thread: one-try looks
        made by the package's waiting thread (as campaign_async()); a
        cancelled iteration ends at once."""
        wait_v = _ns(timeout, timeout_ns, "timeout")
        doze = _aio.ETCD_DOZE_NS if self.table.etcd else _aio.DOZE_NS

        def timed_out() -> BaseException:
            return TimedOut(self.name)

        while True:
            def attempt(after: int = after) -> Any:
                t = self.table._observe(self.name, after, 0)
                if t is None:
                    raise Busy(self.name)
                return t

            try:
                t = await _aio.wait(attempt, lambda r: None, wait_v, timed_out, doze)
            except TimedOut:
                return
            leader = Leader._from_tuple(t, self.table.etcd)
            after = leader.token
            yield leader

