"""The same calls on an etcd table: a throwaway etcd member started here, on
free localhost ports in a temporary directory, stopped by pid afterwards.

Where the library is built without etcd support, an etcd name must be
refused with NotSupported, and that is what is tested instead."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest
import shmlease

from conftest import expect_line, spawn, unique_name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _has_etcd_support() -> bool:
    try:
        shmlease.unlink("etcd://127.0.0.1:1/probe")
    except shmlease.NotSupported:
        return False
    except shmlease.Error:
        return True
    return True


HAVE_ETCD = _has_etcd_support()


@pytest.fixture(scope="module")
def member():
    """One etcd member; yields its endpoint "127.0.0.1:PORT"."""
    if not HAVE_ETCD:
        yield None
        return
    etcd = shutil.which("etcd")
    assert etcd, "etcd is missing (make test installs etcd-server)"
    d = tempfile.mkdtemp(prefix="shl-py-etcd-")
    for _ in range(5):
        cport, pport = _free_port(), _free_port()
        log = open(os.path.join(d, "etcd.log"), "ab")
        p = subprocess.Popen([etcd, "--name", "m0", "--data-dir", os.path.join(d, "data"),
                              "--listen-client-urls", "http://127.0.0.1:%d" % cport,
                              "--advertise-client-urls", "http://127.0.0.1:%d" % cport,
                              "--listen-peer-urls", "http://127.0.0.1:%d" % pport,
                              "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % pport,
                              "--initial-cluster", "m0=http://127.0.0.1:%d" % pport,
                              "--unsafe-no-fsync"],
                             stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        end = time.monotonic() + 20
        healthy = False
        while time.monotonic() < end and p.poll() is None:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/health" % cport, timeout=1) as r:
                    healthy = b'"true"' in r.read()
            except OSError:
                pass
            if healthy:
                break
            time.sleep(0.1)
        if healthy:
            break
        if p.poll() is None:
            p.kill()
        p.wait()
        shutil.rmtree(os.path.join(d, "data"), ignore_errors=True)
    else:
        pytest.fail("no etcd member came up; see %s/etcd.log" % d)
    try:
        yield "127.0.0.1:%d" % cport
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def etcd_name(member, request):
    if member is None:
        yield None
        return
    n = "etcd://%s/%s" % (member, unique_name("e"))
    yield n
    try:
        shmlease.unlink(n)
    except shmlease.NotFound:
        pass


def test_etcd_names_follow_the_build():
    """Without etcd support an etcd name is NotSupported; with it, a cluster
    that does not answer (nothing listens on the port) is Unavailable."""
    name = "etcd://127.0.0.1:%d/jobs" % _free_port()
    want = shmlease.Unavailable if HAVE_ETCD else shmlease.NotSupported
    with pytest.raises(want):
        shmlease.Table(name, create=True)


needs_etcd = pytest.mark.skipif(not HAVE_ETCD, reason="built without etcd support (make ETCD=0)")


@needs_etcd
def test_same_calls_on_etcd(etcd_name):
    with shmlease.Table(etcd_name, create=True, value_size=64) as t:
        tok = t.acquire("nightly", "worker-1", ttl=5)
        assert tok == 1
        with pytest.raises(shmlease.Busy) as e:
            t.acquire("nightly", "worker-2", ttl=5)
        assert e.value.owner == "worker-1" and e.value.token == 1
        assert 0 < e.value.remaining <= 5
        assert t.try_acquire("nightly", "worker-2", ttl=5) is None
        t.write("nightly", "worker-1", tok, b"step 1")
        assert t.read("nightly") == (b"step 1", 1)
        t.renew("nightly", "worker-1", tok, ttl=5)
        info = t.stat("nightly")
        assert info.owner == "worker-1" and info.token == 1 and info.held
        t.release("nightly", "worker-1", tok)
        with pytest.raises(shmlease.Lost):
            t.write("nightly", "worker-1", tok, b"late")
        with pytest.raises(shmlease.Lost):
            t.renew("nightly", "worker-1", tok, ttl=5)
        assert t.read("nightly") == (b"step 1", 1)
        # Release kept the token: the next acquisition gets 2.
        assert t.acquire("nightly", "worker-2", ttl=5) == 2


@needs_etcd
def test_since_ns_is_none_on_etcd(etcd_name, table):
    """etcd records no acquisition time: since_ns is None on an etcd table
    (stat, inspect, a Busy's holder), not a made-up 0; a segment has one."""
    with shmlease.Table(etcd_name, create=True) as t:
        for tab in (t, table):
            tab.acquire("job", "w1", ttl=30)
            with pytest.raises(shmlease.Busy) as e:
                tab.acquire("job", "w2", ttl=30)
            seen = [tab.stat("job"), tab.inspect("job").info, e.value.holder]
            assert [i.owner for i in seen] == ["w1"] * 3
            if tab is t:
                assert [i.since_ns for i in seen] == [None] * 3
            else:
                assert all(isinstance(i.since_ns, int) and i.since_ns > 0 for i in seen)


@needs_etcd
def test_tokens_live_in_etcd_across_handles(etcd_name):
    with shmlease.Table(etcd_name, create=True) as t:
        a = t.acquire("job", "w1", ttl=5)
        t.release("job", "w1", a)
    with shmlease.Table(etcd_name) as t2:
        assert t2.acquire("job", "w2", ttl=5) == a + 1


@needs_etcd
def test_what_differs_on_etcd_is_refused(etcd_name, member):
    with pytest.raises(shmlease.NotSupported):
        shmlease.Table("etcd://%s/%s" % (member, unique_name("m")), create=True,
                       manual_clock=True)
    with shmlease.Table(etcd_name, create=True) as t:
        with pytest.raises(shmlease.NotSupported):
            t.clock_set(10)
        with pytest.raises(shmlease.NotSupported):
            t.repair()


@needs_etcd
def test_lease_context_on_etcd(etcd_name):
    with shmlease.Table(etcd_name, create=True, value_size=64) as t:
        with t.lease("nightly", owner="w1", ttl=2, wait=10) as lease:
            lease.write(b"one")
            time.sleep(2.5)  # the renewer keeps it past its ttl
            lease.check()
            lease.write(b"two")
            tok = lease.token
        assert t.read("nightly") == (b"two", tok)
        assert t.acquire("nightly", "w2", ttl=5) == tok + 1


@needs_etcd
def test_stopped_holder_on_etcd_cannot_write(etcd_name):
    """A holder paused past its expiry, resumed after another acquired and
    wrote: etcd refuses its write and the value stays the new holder's."""
    with shmlease.Table(etcd_name, create=True, value_size=64) as t:
        p = spawn("""
            import sys, shmlease
            t = shmlease.Table(sys.argv[1])
            tok = t.acquire("res", "old", ttl=1)
            print("held", tok, flush=True)
            sys.stdin.readline()
            try:
                t.write("res", "old", tok, b"stale")
                print("written", flush=True)
            except shmlease.Lost:
                print("lost", flush=True)
        """, etcd_name)
        try:
            tok = int(expect_line(p, "held").split()[1])
            os.kill(p.pid, signal.SIGSTOP)
            deadline = time.monotonic() + 15
            while True:
                nt = t.try_acquire("res", "new", ttl=30)
                if nt is not None:
                    break
                assert time.monotonic() < deadline, "the paused holder's lease never expired"
                time.sleep(0.2)
            assert nt == tok + 1
            t.write("res", "new", nt, b"fresh")
            os.kill(p.pid, signal.SIGCONT)
            p.stdin.write("go\n")
            p.stdin.flush()
            expect_line(p, "lost", timeout=20)
            assert t.read("res") == (b"fresh", nt)
        finally:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()


@needs_etcd
def test_shared_wait_on_etcd(etcd_name):
    """acquire_shared_wait on an etcd table: readers queued behind a writer go in
    together when it releases; a reader queued after a waiting writer goes in
    only after that writer; a timeout raises TimedOut."""
    import threading

    with shmlease.Table(etcd_name, create=True) as t:
        h = t.acquire("doc", "holder", ttl=30)
        got = {}

        def wait(owner, shared):
            with shmlease.Table(etcd_name) as mine:
                if shared:
                    got[owner] = mine.acquire_shared_wait("doc", owner, ttl=30, timeout=30)
                else:
                    got[owner] = (mine.acquire_wait("doc", owner, ttl=30, timeout=30), None)

        def start(owner, shared, queued):
            th = threading.Thread(target=wait, args=(owner, shared))
            th.start()
            deadline = time.monotonic() + 20
            while t.stat("doc").waiters < queued:
                assert time.monotonic() < deadline, owner + " did not queue"
                time.sleep(0.01)
            return th

        with pytest.raises(shmlease.TimedOut):
            t.acquire_shared_wait("doc", "impatient", ttl=30, timeout=0.5)
        threads = [start("r1", True, 1), start("r2", True, 2), start("w", False, 3),
                   start("r3", True, 4)]
        t.release("doc", "holder", h)
        deadline = time.monotonic() + 20
        while not ("r1" in got and "r2" in got):
            assert time.monotonic() < deadline, "the readers ahead of the writer did not go in"
            time.sleep(0.01)
        assert sorted([got["r1"], got["r2"]]) == [(h + 1, h), (h + 2, h)]
        time.sleep(0.7)
        assert "w" not in got and "r3" not in got
        t.release("doc", "r1", got["r1"][0])
        t.release("doc", "r2", got["r2"][0])
        threads[2].join(20)
        assert got["w"][0] == h + 3
        time.sleep(0.5)
        assert "r3" not in got, "the reader behind the writer waits while it holds"
        t.release("doc", "w", got["w"][0])
        threads[3].join(20)
        assert got["r3"] == (h + 4, h + 3)
        for th in threads:
            th.join(20)
        assert t.stat("doc").waiters == 0


@needs_etcd
def test_history_revisions_on_etcd(etcd_name):
    """A lease's history on etcd: each event carries the etcd revision of the
    change to its holder record, increasing, and a history read on a fresh
    table is complete."""
    with shmlease.Table(etcd_name, create=True) as t:
        a = t.acquire("job", "w1", ttl=5)
        t.renew("job", "w1", a, ttl=7)  # a changed ttl: a renew event
        t.release("job", "w1", a)
        b = t.acquire("job", "w2", ttl=5)
        d = t.inspect("job")
        assert [(e.op, e.token) for e in d.events] == [("acquire", a), ("renew", a),
                                                       ("end", a), ("acquire", b)]
        revs = [e.revision for e in d.events]
        assert revs[0] > 0 and all(x < y for x, y in zip(revs, revs[1:])), revs
        assert d.history_partial is False


@needs_etcd
def test_what_etcd_does_not_keep_is_none(etcd_name):
    """As `shmlease dump --json` has them: what an etcd table does not keep
    is None, never a made-up 0; its revisions and history_partial are
    there."""
    with shmlease.Table(etcd_name, create=True) as t:
        assert t.etcd
        tok = t.acquire("job", "w1", ttl=30)
        info = t.info()
        assert (info.capacity, info.mode, info.reclaim_orphans, info.reclaim_delay_ms,
                info.size, info.allocated, info.creator_pid, info.token_floor) == (None,) * 8
        assert info.value_size > 0 and info.used == 1
        assert t.stat("job").pid is None
        d = t.inspect("job")
        assert (d.slot, d.stable, d.lock, d.lock_pid, d.intent_armed, d.intent_op,
                d.intent_token, d.heartbeat_ns, d.renewer_stalled, d.dead_seen_ns,
                d.counters) == (None,) * 11
        assert d.info.pid is None and d.info.since_ns is None and d.history_partial is False
        assert [(e.op, e.token, e.time_ns, e.pid) for e in d.events] == [
            ("acquire", tok, None, None)]
        assert d.events[0].revision > 0


@needs_etcd
def test_election_on_etcd(etcd_name):
    """The same election calls on an etcd table: who leads, with its value
    (no pid there), observe in token order, an async campaign that waits
    for a resign."""
    import asyncio
    with shmlease.Table(etcd_name, create=True, value_size=64) as t:
        a = t.election("leader", id="host-a")
        b = t.election("leader", id="host-b")
        with a.campaign(ttl=5, value=b"10.0.0.1:80") as term:
            seen = b.leader()
            assert (seen.id, seen.token, seen.value, seen.pid) == ("host-a", term,
                                                                  b"10.0.0.1:80", None)
            with pytest.raises(shmlease.TimedOut):
                b.campaign(ttl=5, timeout=0)
            first = next(b.observe(timeout=5))
            assert (first.id, first.token) == ("host-a", term)

        async def take_over():
            return await b.campaign_async(ttl=5, timeout=10, value=b"10.0.0.2:80")

        term_b = asyncio.run(take_over())
        assert term_b > term
        second = next(a.observe(after=term, timeout=5))
        assert (second.id, second.token, second.value) == ("host-b", term_b, b"10.0.0.2:80")
        assert b.resign() is True and a.leader() is None
        a.close()
        b.close()
