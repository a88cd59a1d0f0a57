"""Real processes: a holder stopped past its expiry, a holder killed, and
tables used after fork()."""

import os
import signal
import sys
import threading
import time

import pytest
import shmlease
from conftest import expect_line, spawn

# A holder that writes once, says so, then waits for a line on stdin before
# its next write: stopping it there stops it outside any critical section.
HOLDER = """
import sys, shmlease
t = shmlease.Table(sys.argv[1])
tok = t.acquire("job", "holder", float(sys.argv[2]))
t.write("job", "holder", tok, b"holder-1")
print("ready", tok)
sys.stdin.readline()
try:
    t.write("job", "holder", tok, b"holder-2")
    print("written")
except shmlease.Lost as e:
    print("lost", e.code)
"""


def test_stopped_holder_cannot_write(table, name):
    p = spawn(HOLDER, name, "0.3")
    try:
        tok = int(expect_line(p, "ready").split()[1])
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(0.5)  # past the holder's expiry, while it cannot run
        assert table.stat("job").state is shmlease.State.EXPIRED
        mine = table.acquire("job", "taker", 10)
        assert mine == tok + 1
        table.write("job", "taker", mine, b"taker-1")
        p.stdin.write("go\n")  # read once it runs again
        os.kill(p.pid, signal.SIGCONT)
        expect_line(p, "lost %d" % shmlease.Lost.code)
        assert table.read("job") == (b"taker-1", mine)  # the stale write changed nothing
        assert p.wait(10) == 0
    finally:
        p.kill()
        p.wait()


LEASE_HOLDER = """
import sys, shmlease
t = shmlease.Table(sys.argv[1])
try:
    with t.lease("job", "holder", ttl=0.3) as lease:
        lease.write(b"holder-1")
        print("ready", lease.token)
        sys.stdin.readline()
        print("lost-flag", lease.lost)
        try:
            lease.write(b"holder-2")
            print("written")
        except shmlease.Lost as e:
            print("write-lost", e.code)
except shmlease.Lost as e:
    print("exit-lost", e.code)
"""


def test_stopped_lease_context(table, name):
    """The same with the lease kept by the C renewer: the stop halts the
    renewer thread too; after resuming, the guarded write raises Lost, and
    leaving the block raises Lost again: the loss is not silent."""
    p = spawn(LEASE_HOLDER, name)
    try:
        tok = int(expect_line(p, "ready").split()[1])
        # The renewer starts half an interval (50 ms) after the acquisition;
        # stop the holder once it runs, so that the stop halts it too.
        for _ in range(500):
            if table.heartbeat("job").token == tok:
                break
            time.sleep(0.01)
        assert table.heartbeat("job").token == tok
        os.kill(p.pid, signal.SIGSTOP)
        # Should the stop land while the renewer is inside the lease's
        # critical section, the acquire below waits for it: resume it then.
        safety = threading.Timer(3.0, os.kill, (p.pid, signal.SIGCONT))
        safety.start()
        time.sleep(0.6)
        mine = table.acquire_wait("job", "taker", 10, timeout=10)
        safety.cancel()
        table.write("job", "taker", mine, b"taker-1")
        p.stdin.write("go\n")
        os.kill(p.pid, signal.SIGCONT)
        expect_line(p, "lost-flag True")
        expect_line(p, "write-lost %d" % shmlease.Lost.code)
        expect_line(p, "exit-lost %d" % shmlease.Lost.code)
        assert table.read("job") == (b"taker-1", mine)
        info = table.stat("job")
        assert (info.owner, info.token, info.state) == ("taker", mine, shmlease.State.HELD)
    finally:
        p.kill()
        p.wait()


KILLED = """
import sys, shmlease
t = shmlease.Table(sys.argv[1])
tok = t.acquire("job", "doomed", float(sys.argv[2]))
t.write("job", "doomed", tok, b"committed")
print("ready", tok)
sys.stdin.readline()
"""


def test_killed_holder_expires(table, name):
    p = spawn(KILLED, name, "0.4")
    tok = int(expect_line(p, "ready").split()[1])
    p.kill()
    p.wait()
    with pytest.raises(shmlease.Busy) as e:  # a dead holder's lease still runs its ttl
        table.acquire("job", "next", 1)
    assert e.value.owner == "doomed"
    mine = table.acquire_wait("job", "next", 1, timeout=5)
    assert mine == tok + 1
    assert table.read("job") == (b"committed", tok)  # the committed value survived


def test_killed_holder_reclaimed(name):
    """On a table that reclaims orphans, the kernel's proof of death lets the
    next acquire take over before the expiry, with the next token."""
    with shmlease.Table(name, create=True, capacity=4, reclaim_orphans=True,
                        reclaim_delay_ms=0) as t:
        p = spawn(KILLED, name, "600")
        tok = int(expect_line(p, "ready").split()[1])
        assert t.stat("job").state is shmlease.State.HELD
        p.kill()
        p.wait()
        assert t.stat("job").state is shmlease.State.ORPHANED
        mine = t.acquire("job", "next", 1)
        assert mine == tok + 1
        assert t.stat("job").owner == "next"
        assert t.info().reclaim_orphans and t.info().reclaim_delay_ms == 0


def test_default_table_reclaims_after_a_second(name):
    """A table made with the defaults frees a killed holder's 30 s lease
    about a second after the death, as shmlease run's tables do; the opt-out
    keeps it to the expiry."""
    with shmlease.Table(name, create=True) as t:
        assert t.info().reclaim_orphans and t.info().reclaim_delay_ms == 1000
        p = spawn(KILLED, name, "30")
        tok = int(expect_line(p, "ready").split()[1])
        p.kill()
        p.wait()
        start = time.monotonic()
        assert t.acquire_wait("job", "next", 1, timeout=20) == tok + 1
        assert time.monotonic() - start < 10  # generous: the delay is 1 s
    with shmlease.Table(name + "-keep", create=True, reclaim_orphans=False) as t:
        try:
            assert not t.info().reclaim_orphans and t.info().reclaim_delay_ms == 0
            p = spawn(KILLED, name + "-keep", "30")
            expect_line(p, "ready")
            p.kill()
            p.wait()
            with pytest.raises(shmlease.TimedOut):
                t.acquire_wait("job", "next", 1, timeout=1.5)
        finally:
            shmlease.unlink(name + "-keep")


def test_reclaim_delay(name):
    """The reclaim delay: the first acquire that sees the death starts it."""
    with shmlease.Table(name, create=True, capacity=4, reclaim_orphans=True,
                        reclaim_delay=0.3) as t:
        assert t.info().reclaim_delay_ms == 300
        p = spawn(KILLED, name, "600")
        tok = int(expect_line(p, "ready").split()[1])
        p.kill()
        p.wait()
        with pytest.raises(shmlease.Busy):
            t.acquire("job", "next", 1)
        time.sleep(0.4)
        mine = t.acquire("job", "next", 1)
        assert mine == tok + 1


def test_waiter_reclaims_when_the_delay_ends(name):
    """A waiter is kept out by a dead holder only until the reclaim delay
    ends (as a polling acquire is), not until the holder's expiry."""
    with shmlease.Table(name, create=True, capacity=4, reclaim_orphans=True,
                        reclaim_delay=0.2) as t:
        p = spawn(KILLED, name, "30")
        tok = int(expect_line(p, "ready").split()[1])
        p.kill()
        p.wait()
        start = time.monotonic()
        mine = t.acquire_wait("job", "next", 1, timeout=10)
        assert time.monotonic() - start < 5
        assert mine == tok + 1
        assert t.inspect("job").events[-1].op == "reclaim"


def _in_child(fn):
    """Runs fn() in a forked child; returns its exit status (0: fn returned
    True)."""
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if fn() else 2
        except BaseException as e:  # reported through the status
            sys.stderr.write("child: %r\n" % (e,))
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_fork(table, name):
    tok = table.acquire("job", "parent", 30)
    table.write("job", "parent", tok, b"parent")

    def child():
        for call in (lambda: table.acquire("other", "child", 1),
                     lambda: table.read("job"),
                     lambda: table.write("job", "parent", tok, b"child"),
                     lambda: table.release("job", "parent", tok)):
            with pytest.raises(shmlease.UsedAfterFork) as e:
                call()
            assert e.value.name == "SHL_EFORK"
        table.close()  # frees the child's copy only
        with shmlease.Table(name) as again:  # a table opened in the child works
            assert again.read("job") == (b"parent", tok)
            with pytest.raises(shmlease.Busy):
                again.acquire("job", "child", 1)
        return True

    assert _in_child(child) == 0
    # The parent's handle and lease are untouched.
    table.write("job", "parent", tok, b"parent-2")
    assert table.read("job") == (b"parent-2", tok)
    table.release("job", "parent", tok)


def test_fork_with_a_kept_lease(table):
    with table.lease("job", "parent", ttl=5) as lease:
        def child():
            with pytest.raises(shmlease.UsedAfterFork):
                lease.check()
            with pytest.raises(shmlease.UsedAfterFork):
                lease.write(b"child")
            return True

        assert _in_child(child) == 0
        lease.write(b"parent")  # the parent's renewer still runs
        assert not lease.lost
    assert table.stat("job").state is shmlease.State.FREE
