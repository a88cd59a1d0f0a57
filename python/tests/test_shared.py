"""Shared (reader) leases from Python: many readers or one writer, each with
its own token and the writer generation it began under."""

import os
import signal
import time

import pytest
import shmlease

from conftest import expect_line, spawn


def test_readers_share_writers_wait(table):
    t1, g1 = table.acquire_shared("doc", "r1", ttl=30)
    t2, g2 = table.acquire_shared("doc", "r2", ttl=30)
    assert (t1, g1) == (1, 0) and (t2, g2) == (2, 0)
    with pytest.raises(shmlease.Busy) as e:
        table.acquire("doc", "w", ttl=30)
    assert e.value.owner in ("r1", "r2")
    assert table.try_acquire("doc", "w", ttl=30) is None
    with pytest.raises(shmlease.Busy):
        table.acquire_shared("doc", "r1", ttl=30)  # owners differ among readers
    with pytest.raises(shmlease.Lost):
        table.write("doc", "r1", t1, b"no")  # a reader cannot write
    assert table.read("doc") == (b"", 0)
    table.renew("doc", "r1", t1, ttl=30)
    table.release("doc", "r1", t1)
    with pytest.raises(shmlease.Lost):
        table.release("doc", "r1", t1)
    assert table.try_acquire("doc", "w", ttl=30) is None  # r2 still holds
    table.release("doc", "r2", t2)
    w = table.acquire("doc", "w", ttl=30)
    assert w == 3  # one counter for both kinds
    table.write("doc", "w", w, b"v3")
    assert table.try_acquire_shared("doc", "r3", ttl=30) is None
    table.release("doc", "w", w)
    assert table.acquire_shared("doc", "r3", ttl=30) == (4, 3)


def test_fence_refuses_a_reader_older_than_an_admitted_writer():
    buf = bytearray(64)
    with shmlease.Fence(buf) as f:
        f.admit(5)
        f.admit_read(5)
        f.admit_read(7)
        with pytest.raises(shmlease.Stale):
            f.admit_read(4)
        assert f.load() == 5


def test_shared_lease_context(table):
    with table.lease("doc", owner="r1", ttl=1, shared=True) as a, \
            table.lease("doc", owner="r2", ttl=1, shared=True) as b:
        assert a.shared and b.shared and a.gen == b.gen == 0
        time.sleep(1.5)  # the renewers keep both past their ttl
        a.check()
        b.check()
        with pytest.raises(shmlease.Lost):
            a.write(b"no")
        assert table.try_acquire("doc", "w", ttl=5) is None
    w = table.acquire("doc", "w", ttl=5)
    table.release("doc", "w", w)
    with table.lease("doc", owner="r3", ttl=5, shared=True) as c:
        assert c.gen == w and c.token == w + 1


def test_shared_wait_lets_readers_in_after_the_writer(table):
    w = table.acquire("doc", "w", ttl=30)
    p = spawn("""
        import sys, shmlease
        t = shmlease.Table(sys.argv[1])
        print("waiting", flush=True)
        tok, gen = t.acquire_shared_wait("doc", "r", ttl=30, timeout=20)
        print("got", tok, gen, flush=True)
        sys.stdin.readline()
    """, table.name)
    try:
        expect_line(p, "waiting")
        time.sleep(0.2)
        table.release("doc", "w", w)
        line = expect_line(p, "got", timeout=20)
        assert line.split()[1:] == [str(w + 1), str(w)]
    finally:
        p.kill()
        p.wait()


def test_stopped_reader_does_not_block_a_writer(table):
    """A reader paused past its expiry: the writer gets in, and the reader's
    lease is gone when it resumes."""
    p = spawn("""
        import sys, shmlease
        t = shmlease.Table(sys.argv[1])
        tok, gen = t.acquire_shared("doc", "r", ttl=0.3)
        print("held", tok, flush=True)
        sys.stdin.readline()
        try:
            t.renew("doc", "r", tok, ttl=30)
            print("renewed", flush=True)
        except shmlease.Lost:
            print("lost", flush=True)
    """, table.name)
    try:
        tok = int(expect_line(p, "held").split()[1])
        os.kill(p.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while (w := table.try_acquire("doc", "w", ttl=30)) is None:
            assert time.monotonic() < deadline, "a stopped reader blocked the writer"
            time.sleep(0.05)
        assert w == tok + 1
        os.kill(p.pid, signal.SIGCONT)
        p.stdin.write("go\n")
        p.stdin.flush()
        expect_line(p, "lost")
    finally:
        os.kill(p.pid, signal.SIGCONT)
        p.kill()
        p.wait()


def test_shared_wait_async(table):
    """A reader's asyncio wait: the writer's release lets it in, with the
    writer's token as its generation; a cancelled reader never comes in."""
    import asyncio

    w = table.acquire("doc", "w", ttl=30)

    async def main():
        loop = asyncio.get_running_loop()
        gone = asyncio.create_task(table.acquire_shared_wait_async("doc", "r0", 5, timeout=10))
        await asyncio.sleep(0.05)
        gone.cancel()
        loop.call_later(0.2, table.release, "doc", "w", w)
        return await table.acquire_shared_wait_async("doc", "r1", 5, timeout=10)

    tok, gen = asyncio.run(main())
    assert gen == w and tok == w + 1
    time.sleep(0.3)
    # r0, cancelled, took no token after r1's: the next reader's is the next one.
    assert table.acquire_shared("doc", "r2", 5)[0] == tok + 1


def test_pools_sized_at_creation_full_is_an_error(name):
    """max_shared / max_waiters / history size the table; a reader that
    needs a group of a full reader pool gets Full, naming the pool."""
    with shmlease.Table(name, create=True, capacity=8, max_shared=4, max_waiters=0,
                        history=0) as t:
        info = t.info()
        assert (info.max_shared, info.max_waiters, info.history) == (4, 0, 0)
        toks = [t.acquire_shared("a", "r%d" % i, ttl=30)[0] for i in range(4)]
        assert t.info().shared_taken == 4
        with pytest.raises(shmlease.Full) as e:
            t.acquire_shared("b", "other", ttl=30)
        assert "reader pool" in str(e.value)
        for i, tok in enumerate(toks):
            t.release("a", "r%d" % i, tok)
        assert t.info().shared_taken == 4  # kept by "a", unused
        tok_b = t.acquire_shared("b", "other", ttl=30)[0]  # taken back from "a"
        t.release("b", "other", tok_b)
        w = t.acquire("a", "w", ttl=30)
        with pytest.raises(shmlease.Full) as e:  # no waiter pool: no queue
            t.acquire_wait("a", "v", ttl=30, timeout=30)
        assert "waiter pool" in str(e.value)
        t.release("a", "w", w)
        assert t.inspect("a").events == ()
    with pytest.raises(shmlease.InvalidArgument):
        shmlease.Table(name + "x", create=True, capacity=2, max_shared=65)


def test_value_pool_sized_at_creation(name):
    """spare_values sizes the value pool: a lease keeps a spare from its
    first write, a write on another lease takes it back when none is free
    (the first lease's value stays), no pool refuses every write (Full,
    naming the pool), and more spares than leases is refused."""
    with shmlease.Table(name, create=True, capacity=8, spare_values=1) as t:
        info = t.info()
        assert (info.spare_values, info.spare_values_taken) == (1, 0)
        assert info.spare_values_taken_back == 0
        a = t.acquire("a", "w", ttl=30)
        t.write("a", "w", a, b"one")
        assert t.info().spare_values_taken == 1
        b = t.acquire("b", "w", ttl=30)
        t.write("b", "w", b, b"two")  # takes the spare back from "a"
        assert t.info().spare_values_taken == 1
        assert t.info().spare_values_taken_back == 1
        assert t.read("a") == (b"one", a) and t.read("b") == (b"two", b)
        t.write("b", "w", b, b"three")  # "b" keeps it
        assert t.info().spare_values_taken_back == 1
    shmlease.unlink(name)
    with shmlease.Table(name, create=True, capacity=8, spare_values=0) as t:
        assert t.info().spare_values == 0
        tok = t.acquire("a", "w", ttl=30)
        with pytest.raises(shmlease.Full) as e:
            t.write("a", "w", tok, b"x")
        assert "value pool" in str(e.value)
    with pytest.raises(shmlease.InvalidArgument) as e:
        shmlease.Table(name + "x", create=True, capacity=8, spare_values=9)
    assert "spare_values: 9" in str(e.value)
