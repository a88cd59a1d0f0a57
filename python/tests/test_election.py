"""Leader election from Python: campaign, resign, leader() and observe();
the term as a context manager (resigns on exit and on exception); the
asyncio campaign (a cancel ends the wait at once and never leads
afterwards) and observe_async(); a SIGSTOPped leader's proclaim refused
once it resumes, in a real second process."""

import asyncio
import os
import signal
import threading
import time

import pytest
import shmlease

from conftest import expect_line, spawn


def test_campaign_leader_resign(table):
    a = table.election("leader", id="a")
    b = table.election("leader", id="b")
    assert a.leader() is None
    term = a.campaign(ttl=5, value=b"10.0.0.1:80")
    assert isinstance(term, shmlease.Term) and term == a.token > 0
    seen = b.leader()
    assert (seen.id, seen.token, seen.value, seen.state) == ("a", term, b"10.0.0.1:80",
                                                             shmlease.State.HELD)
    assert seen.pid == os.getpid() and 0 < seen.remaining <= 5
    with pytest.raises(shmlease.TimedOut):
        b.campaign(ttl=5, timeout=0.1)
    with pytest.raises(shmlease.Busy):
        a.campaign(ttl=5, timeout=0)  # this handle already leads
    a.proclaim(b"10.0.0.1:81")
    assert b.leader().value == b"10.0.0.1:81"
    assert a.resign() is True
    assert a.token == 0 and a.leader() is None
    assert a.resign() is False  # nothing left to end
    term_b = b.campaign(ttl=5, timeout=0)
    assert term_b > term and b.leader().id == "b" and b.leader().value == b""
    with pytest.raises(shmlease.InvalidArgument):
        a.proclaim(b"not leading")
    b.close()
    assert a.leader() is None  # close resigned
    a.close()


def test_value_too_big_is_refused_before_waiting(table):
    a = table.election("leader", id="a")
    with pytest.raises(shmlease.TooBig):
        a.campaign(ttl=5, value=b"x" * 257)
    assert a.token == 0 and a.leader() is None


def test_context_manager_resigns_on_exit_and_on_exception(table):
    e = table.election("leader", id="me")
    with e.campaign(ttl=5, value=b"v") as term:
        assert e.leader().token == term
    assert e.token == 0 and e.leader() is None
    with pytest.raises(KeyError):
        with table.election("leader").campaign(ttl=5) as term2:
            assert term2 > term
            raise KeyError("boom")
    assert e.leader() is None, "the term outlived the exception"


def test_a_lost_term_is_not_silent(table):
    e = table.election("leader", id="me")
    with pytest.raises(shmlease.Lost):
        # A short ttl: the loss is declared within a renewal interval of the
        # revoke even should the renewer miss the revoke's wake-up.
        with e.campaign(ttl=1, margin=0.1):
            table.revoke("leader")
            deadline = time.monotonic() + 10
            while e.lost() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert e.lost() is shmlease.LossReason.REFUSED


def test_observe_reports_leaders_in_token_order(table):
    watcher = table.election("leader")
    assert list(watcher.observe(timeout=0)) == []
    got = []
    done = threading.Event()

    def watch():
        for leader in watcher.observe(timeout=10):
            got.append((leader.id, leader.token, leader.value))
            if len(got) == 3:
                break
        done.set()

    th = threading.Thread(target=watch)
    th.start()
    for i in range(3):
        c = table.election("leader", id="c%d" % i)
        with c.campaign(ttl=5, value=b"v%d" % i) as term:
            # The term lasts until the observer has seen it: none is skipped.
            deadline = time.monotonic() + 10
            while len(got) <= i and time.monotonic() < deadline:
                time.sleep(0.005)
        c.close()
    assert done.wait(10)
    th.join()
    assert [g[0] for g in got] == ["c0", "c1", "c2"]
    assert [g[2] for g in got] == [b"v0", b"v1", b"v2"]
    assert got[0][1] < got[1][1] < got[2][1]
    assert list(watcher.observe(after=got[2][1], timeout=0.05)) == []


def test_async_campaign_and_observe(table):
    async def main():
        a = table.election("leader", id="a")
        b = table.election("leader", id="b")
        async with a.campaign_async(ttl=5, value=b"va") as term:
            assert a.leader().id == "a"
            agen = b.observe_async(timeout=5)
            first = await agen.__anext__()
            assert (first.id, first.token, first.value) == ("a", term, b"va")
            waiting = asyncio.ensure_future(b.campaign_async(ttl=5, timeout=10, value=b"vb"))
            await asyncio.sleep(0.05)
            assert not waiting.done()
        assert a.token == 0  # async with resigned
        term_b = await waiting
        assert term_b > term and b.token == term_b
        second = await agen.__anext__()
        assert (second.id, second.token, second.value) == ("b", term_b, b"vb")
        await agen.aclose()
        b.resign()
        ends = [x async for x in a.observe_async(after=term_b, timeout=0.05)]
        assert ends == []
    asyncio.run(main())


def test_async_campaign_cancel_ends_at_once_and_never_leads(table):
    holder = table.election("leader", id="holder")
    held = holder.campaign(ttl=30)

    async def main():
        e = table.election("leader", id="waiter")
        task = asyncio.ensure_future(e.campaign_async(ttl=5))
        await asyncio.sleep(0.1)
        assert not task.done()
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        took = time.monotonic() - t0
        # The election frees while the loop still runs: a wait that went on
        # after the cancel would lead now.
        assert holder.resign() is True
        await asyncio.sleep(0.5)
        return e, took

    e, took = asyncio.run(main())
    # The cancel is a state change, not a wait for an attempt to end: the
    # bound is generous for a loaded machine, and still far below the 30 s
    # that the holder keeps the election.
    assert took < 2.0, took
    assert e.token == 0 and holder.leader() is None, "the cancelled wait led afterwards"
    assert held > 0


STOPPED_LEADER = """
import sys, shmlease
t = shmlease.Table(sys.argv[1])
e = t.election("leader", id="stopped")
term = e.campaign(ttl=0.5, value=b"stopped-1")
print("leading", term)
sys.stdin.readline()
try:
    e.proclaim(b"stopped-2")
    print("proclaimed")
except shmlease.Lost as err:
    print("refused", err.name)
"""


def test_stopped_leader_proclaim_is_refused_after_it_resumes(table, name):
    p = spawn(STOPPED_LEADER, name)
    try:
        tok = int(expect_line(p, "leading").split()[1])
        os.kill(p.pid, signal.SIGSTOP)
        # Should the stop land while its renewer is inside the lease's
        # critical section, the campaign below waits for it: resume it then.
        safety = threading.Timer(5.0, os.kill, (p.pid, signal.SIGCONT))
        safety.start()
        e = table.election("leader", id="next")
        mine = e.campaign(ttl=30, timeout=20, value=b"next-1")
        safety.cancel()
        assert mine > tok
        p.stdin.write("go\n")
        os.kill(p.pid, signal.SIGCONT)
        # Refused (Lost) by the table or by its renewer's deadline, whichever
        # comes first; either way nothing was written:
        expect_line(p, "refused SHL_ELOST")
        now = e.leader()
        assert (now.id, now.token, now.value) == ("next", mine, b"next-1")
        assert p.wait(10) == 0
        e.resign()
    finally:
        p.kill()
        p.wait()
