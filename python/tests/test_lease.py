"""The Lease context (the C renewer), its loss, asyncio, the GIL, and the
inspector's view."""

import asyncio
import concurrent.futures
import os
import select
import threading
import time

import pytest
import shmlease


def test_lease_keeps_and_releases(table):
    with table.lease("job", ttl=0.2) as lease:
        assert lease.owner == shmlease.default_owner()
        assert lease.token == table.stat("job").token
        time.sleep(0.7)  # more than three ttls: only the renewer keeps it
        assert not lease.lost and lease.loss_reason is None
        lease.check()
        lease.write(b"step 1")
        assert lease.read() == (b"step 1", lease.token)
        hb = table.heartbeat("job")
        assert hb.token == lease.token and hb.beat_ns > 0 and not hb.stalled
        info = table.stat("job")
        assert info.state is shmlease.State.HELD and info.owner == lease.owner
    info = table.stat("job")
    assert info.state is shmlease.State.FREE and info.token == lease.token
    with pytest.raises(ValueError):
        lease.write(b"after")  # not held by this context any more


def _threads() -> set:
    return set(os.listdir("/proc/self/task"))


def test_short_block_starts_no_thread(table):
    """The idiom's cost: a block that ends before the lease's first renewal
    is due starts no renewer thread (the per-process keeper starts one only
    for leases held long enough to need it)."""
    with table.lease("warm", ttl=30):
        pass  # the keeper's own thread, once per process
    before = _threads()
    with table.lease("job", ttl=30) as lease:
        new = _threads() - before  # (a thread of an earlier test may end meanwhile)
        lease.write(b"short")
    assert not new
    assert table.stat("job").state is shmlease.State.FREE


def test_lease_kept_three_ttls(table):
    """Held three ttls inside the block: kept alive (by the renewer the
    keeper started), and the guarded write with the token is still
    accepted at the end."""
    with table.lease("job", ttl=0.3) as lease:
        time.sleep(0.9)
        table.write("job", lease.owner, lease.token, b"still mine")
        lease.write(b"still mine 2")
        info = table.stat("job")
        assert (info.state, info.token, info.owner) == (shmlease.State.HELD, lease.token,
                                                        lease.owner)
    assert table.read("job") == (b"still mine 2", lease.token)
    assert table.stat("job").state is shmlease.State.FREE


def _hold_the_gil(seconds: float) -> None:
    """A C call that keeps the GIL for about `seconds` (sum() over a range
    never lets another thread in)."""
    n = 1_000_000
    per = []
    for _ in range(3):
        t0 = time.perf_counter()
        sum(range(n))
        per.append((time.perf_counter() - t0) / n)
    sum(range(int(seconds / sorted(per)[1])))


def test_renewer_starts_while_the_gil_is_held(table):
    """The thread that starts renewers late needs no GIL: a lease held
    through a C call that keeps the GIL past the lease's ttl is still kept
    alive, as it was with a renewer started at once."""
    with table.lease("job", ttl=1) as lease:  # its renewer due at 0.17 s
        t0 = time.monotonic()
        _hold_the_gil(3.0)
        held = time.monotonic() - t0
        table.write("job", lease.owner, lease.token, b"still mine")
        assert not lease.lost
    assert held > 1.0  # the GIL was held past the ttl (else the test proves nothing)


def test_loss_before_the_renewer_starts_is_loud(table):
    """Revoked while no renewer runs yet: the guarded write and the end of
    the block raise Lost, and the lease is not released from under the new
    holder."""
    with pytest.raises(shmlease.Lost):
        with table.lease("job", "me", ttl=30) as lease:
            table.revoke("job")
            with pytest.raises(shmlease.Lost):
                lease.write(b"too late")
            assert lease.lost and lease.loss_reason is shmlease.LossReason.REFUSED
            r, _, _ = select.select([lease], [], [], 5)
            assert r == [lease]  # readable, as the renewer's descriptor would be
            other = table.acquire("job", "other", 5)
    assert table.stat("job").owner == "other" and table.stat("job").token == other
    with pytest.raises(shmlease.Lost):
        with table.lease("job2", "me", ttl=30):
            table.revoke("job2")  # nothing else: the end alone says it


def test_removal_by_another_seen_when_the_renewer_starts(table, name):
    """The table's file removed by something other than shl_unlink (rm, a
    tmp cleaner): a lease whose renewer starts after that sees it at the
    start (the renewer itself looks only before its next renewal, one
    interval later)."""
    with pytest.raises(shmlease.Lost):
        with table.lease("job", ttl=6) as lease:  # interval 2 s; the renewer due at 1 s
            os.unlink("/dev/shm/" + name)
            time.sleep(1.5)
            assert lease.loss_reason is shmlease.LossReason.REMOVED


def test_lease_busy_and_timeout(table):
    table.acquire("job", "other", 30)
    with pytest.raises(shmlease.Busy):
        with table.lease("job", "me", ttl=1, blocking=False):  # try once
            pass
    t0 = time.monotonic()
    with pytest.raises(shmlease.Timeout):
        with table.lease("job", "me", ttl=1, wait=0.2):
            pass
    assert time.monotonic() - t0 >= 0.2


def test_lease_waits_for_release(table):
    tok = table.acquire("job", "other", 30)
    releaser = threading.Timer(0.2, table.release, ("job", "other", tok))
    releaser.start()
    with table.lease("job", "me", ttl=1, wait=10) as lease:
        assert lease.token == tok + 1
    # The release woke the wait before it returned: closing the table
    # before it has is "table in use" (seen on a loaded host).
    releaser.join()


def test_lease_loses_loudly(table):
    """A revoked lease: the renewer notices at once; the flag, the
    descriptor and the guarded write say so, and leaving the block raises
    Lost although the block itself did not fail."""
    with pytest.raises(shmlease.Lost):
        with table.lease("job", "me", ttl=5) as lease:
            table.revoke("job")
            r, _, _ = select.select([lease], [], [], 5)
            assert r == [lease]
            assert lease.lost and lease.loss_reason is shmlease.LossReason.REFUSED
            with pytest.raises(shmlease.Lost):
                lease.write(b"too late")
            with pytest.raises(shmlease.Lost):
                lease.check()
            other = table.acquire("job", "other", 5)
            table.write("job", "other", other, b"theirs")
    assert table.read("job") == (b"theirs", other)
    assert table.stat("job").owner == "other"  # the lost lease was not released


def test_lease_loss_noted_on_another_error(table):
    with pytest.raises(KeyError) as e:
        with table.lease("job", "me", ttl=5):
            table.revoke("job")
            raise KeyError("the body's own error")
    assert any("lost" in n for n in getattr(e.value, "__notes__", ["lost"]))


def test_lease_deadline_without_renewal(table):
    """A renewer that cannot renew in time (a hold bound) declares the loss."""
    with pytest.raises(shmlease.Lost):
        with table.lease("job", "me", ttl=0.2, max_hold=0.3) as lease:
            time.sleep(0.6)
            assert lease.loss_reason is shmlease.LossReason.MAX_HOLD
    assert table.stat("job").state is shmlease.State.FREE  # released at the bound


def test_close_refused_while_kept(name):
    t = shmlease.Table(name, create=True, capacity=4)
    with t.lease("job", "me", ttl=1):
        with pytest.raises(RuntimeError):
            t.close()
    t.close()


def test_gil_released_while_waiting(table):
    """A thread blocked in acquire_wait lets the others run."""
    tok = table.acquire("job", "holder", 30)
    out = {}

    def waiter():
        out["token"] = table.acquire_wait("job", "waiter", 5, timeout=10)

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.05)
    count = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.3:  # Python code runs meanwhile
        count += 1
    assert th.is_alive() and count > 10000
    assert table.stat("job").waiters == 1
    table.release("job", "holder", tok)
    th.join(10)
    assert out["token"] == tok + 1


def test_async_acquire_wait(table):
    tok = table.acquire("job", "holder", 30)

    async def main():
        loop = asyncio.get_running_loop()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tk = asyncio.create_task(ticker())
        loop.call_later(0.3, table.release, "job", "holder", tok)
        got = await table.acquire_wait_async("job", "me", 5, timeout=10)
        tk.cancel()
        return got, ticks

    got, ticks = asyncio.run(main())
    assert got == tok + 1
    assert ticks >= 10  # the loop ran while the wait went on


def test_async_cancel_never_acquires_afterwards(table):
    """A cancelled wait ends at once and never takes the lease later: after
    the holder releases it and time passes, its token has not moved."""
    tok = table.acquire("job", "holder", 30)

    async def main():
        task = asyncio.create_task(table.acquire_wait_async("job", "me", 5, timeout=10))
        await asyncio.sleep(0.1)
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ended = time.monotonic() - t0
        table.release("job", "holder", tok)
        await asyncio.sleep(1.0)  # fifty times the waits' longest nap
        return ended

    ended = asyncio.run(main())
    assert ended < 1.0  # at once; generous for a loaded machine
    info = table.stat("job")
    assert (info.token, info.state, info.waiters) == (tok, shmlease.State.FREE, 0)


def test_async_waits_take_no_executor_thread(table):
    """Eight pending waits leave the loop's executor free for other work."""
    tok = table.acquire("job", "holder", 30)

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=8))
        waits = [asyncio.create_task(table.acquire_wait_async("job", "w%d" % i, 5, timeout=8))
                 for i in range(8)]
        await asyncio.sleep(0.2)
        try:
            # Prompt work needs a free executor thread (bound generous for a
            # loaded machine; a starved executor answers only after 8 s).
            return await asyncio.wait_for(loop.run_in_executor(None, lambda: 42), 5)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    assert asyncio.run(main()) == 42
    assert table.stat("job").token == tok


def test_async_wait_times_out(table):
    table.acquire("job", "holder", 30)

    async def main():
        with pytest.raises(shmlease.TimedOut):
            await table.acquire_wait_async("job", "me", 5, timeout=0.2)
        with pytest.raises(shmlease.Busy):
            async with table.lease("job", "me", ttl=5, blocking=False):
                pass

    asyncio.run(main())


def test_async_lease_busy(table):
    table.acquire("job", "other", 30)

    async def main():
        async with table.lease("job", "me", ttl=5, timeout=0):
            pass

    with pytest.raises(shmlease.Busy) as e:
        asyncio.run(main())
    assert e.value.owner == "other"


def test_async_lease_and_wait_lost(table):
    async def main():
        async with table.lease("job", "me", ttl=5, wait=1) as lease:
            waiter = asyncio.create_task(lease.wait_lost())
            await asyncio.sleep(0.05)
            assert not waiter.done()
            lease.write(b"async")
            table.revoke("job")
            reason = await asyncio.wait_for(waiter, 5)
            assert reason is shmlease.LossReason.REFUSED

    with pytest.raises(shmlease.Lost):
        asyncio.run(main())


def test_inspector(table):
    tok = table.acquire("a", "A", 10)
    table.write("a", "A", tok, b"preview me")
    with pytest.raises(shmlease.Lost):
        table.write("a", "B", tok, b"x")
    table.acquire("b", "B", 10)
    details = list(table.leases())
    assert [d.name for d in details] == ["a", "b"]
    a = table.inspect("a")
    assert a.info.owner == "A" and a.preview == b"preview me" and a.lock == "FREE"
    assert a.counters["acquire"] == 1 and a.counters["write"] == 1
    assert a.counters["rej_owner"] == 1
    assert [e.op for e in a.events] == ["acquire", "reject"]  # writes are counted only
    assert a.events[-1].why == "rej_owner" and a.events[-1].owner == "B"
    # Revisions are etcd's; a segment's history is never partial.
    assert [e.revision for e in a.events] == [0, 0] and a.history_partial is False
    assert table.check() == (True, [])
    assert table.repair(dry_run=True) == (True, [])
    info = table.info()
    assert (info.capacity, info.value_size, info.used) == (16, 256, 2)
    assert info.created and not info.manual_clock


def test_memory_taken_as_names_are_added(name):
    """A table takes its slots as names are added: info().allocated grows
    with the names, up to the size."""
    with shmlease.Table(name, create=True, capacity=10000, value_size=256) as t:
        fresh = t.info().allocated
        assert 0 < fresh < t.info().size // 4
        for i in range(100):
            t.acquire(f"lease-{i}", "w", ttl=30)
        grew = t.info().allocated - fresh
        assert 100 * 1000 < grew < t.info().size // 10
