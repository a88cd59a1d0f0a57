"""The words Python users bring from filelock and the other lock packages:
timeout and blocking, NotAcquired, timedelta durations, a Table that is
made when missing, and a README that maps their APIs onto this one."""

import datetime
import os
import threading
import time

import pytest
import shmlease

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def _release_later(table, lease, owner, token, after=0.3):
    t = threading.Timer(after, table.release, (lease, owner, token))
    t.start()
    return t


def test_lease_waits_by_default_as_filelock(table):
    """filelock's default: block until acquired (timeout=-1)."""
    # Each releasing thread is joined: the waiter can take the lease and
    # end its block before the thread has returned from release(), and the
    # table's close refuses while a call is under way.
    tok = table.acquire("job", "holder", 30)
    later = _release_later(table, "job", "holder", tok)
    with table.lease("job", "me", ttl=5) as lease:
        assert lease.token == tok + 1
    later.join()
    for no_bound in (-1, None, -5.0):
        tok = table.acquire("job", "holder", 30)
        later = _release_later(table, "job", "holder", tok, 0.1)
        with table.lease("job", "me", ttl=5, timeout=no_bound) as lease:
            assert lease.token == tok + 1
        later.join()


def test_timeout_and_blocking(table):
    table.acquire("job", "holder", 30)
    for kw in ({"blocking": False}, {"timeout": 0}, {"blocking": False, "timeout": 10},
               {"wait": 0}):
        t0 = time.monotonic()
        with pytest.raises(shmlease.Busy) as e:
            with table.lease("job", "me", ttl=5, **kw):
                pass
        assert isinstance(e.value, shmlease.NotAcquired) and e.value.owner == "holder"
        assert time.monotonic() - t0 < 5, kw  # one try, not a wait
    t0 = time.monotonic()
    with pytest.raises(shmlease.TimedOut) as e:
        with table.lease("job", "me", ttl=5, timeout=0.2):
            pass
    assert time.monotonic() - t0 >= 0.2
    assert isinstance(e.value, shmlease.NotAcquired) and isinstance(e.value, TimeoutError)
    with pytest.raises(TypeError):
        table.lease("job", ttl=5, timeout=1, wait=1)


def test_not_acquired_is_the_base_of_busy_and_timed_out(table):
    assert issubclass(shmlease.Busy, shmlease.NotAcquired)
    assert issubclass(shmlease.TimedOut, shmlease.NotAcquired)
    assert issubclass(shmlease.NotAcquired, shmlease.Error)
    assert not issubclass(shmlease.Lost, shmlease.NotAcquired)
    table.acquire("job", "holder", 30)
    for call in (lambda: table.acquire("job", "me", 5),
                 lambda: table.acquire_wait("job", "me", 5, timeout=0.05)):
        with pytest.raises(shmlease.NotAcquired):
            call()


def test_timedelta_wherever_seconds_are(manual, name):
    td = datetime.timedelta
    manual.clock_set(1000)
    tok = manual.acquire("a", "A", td(seconds=2, microseconds=5))
    info = manual.stat("a")
    assert info.expiry_ns - info.now_ns == 2_000_005_000  # exact
    manual.renew("a", "A", tok, ttl=td(milliseconds=1))
    info = manual.stat("a")
    assert info.expiry_ns - info.now_ns == 1_000_000
    with pytest.raises(shmlease.TimedOut):
        manual.acquire_wait("a", "B", td(seconds=1), timeout=td(milliseconds=20))
    with pytest.raises(shmlease.InvalidArgument):
        manual.acquire("b", "B", td(seconds=-1))
    with pytest.raises(shmlease.InvalidArgument):
        manual.acquire("b", "B", td(0))
    with pytest.raises(shmlease.InvalidArgument):
        manual.acquire("b", "B", td(days=999_999_999))
    with shmlease.Table(name + "-d", create=True, capacity=4, reclaim_orphans=True,
                        reclaim_delay=td(milliseconds=1500)) as t:
        try:
            assert t.info().reclaim_delay_ms == 1500
            with t.lease("x", ttl=td(seconds=5), timeout=td(seconds=1),
                         interval=td(seconds=1), margin=td(milliseconds=500)) as lease:
                assert lease.ttl_ns == 5_000_000_000
        finally:
            shmlease.unlink(name + "-d")


def test_table_is_made_when_missing_as_run_does(name):
    with pytest.raises(shmlease.NotFound):
        shmlease.Table(name, create=False)
    with shmlease.Table(name) as t:  # missing: made, with the defaults
        info = t.info()
        assert info.created and (info.capacity, info.value_size) == (1024, 256)
        tok = t.acquire("job", "me", 5)
    with shmlease.Table(name, capacity=16) as again:  # there: opened as it is
        info = again.info()
        assert not info.created and info.capacity == 1024
        assert again.stat("job").token == tok
    with pytest.raises(shmlease.Mismatch):
        shmlease.Table(name, create=True, capacity=16)  # create=True: must match
    shmlease.unlink(name)
    with shmlease.Table(name, capacity=8, reclaim_orphans=False) as t:
        assert t.info().capacity == 8 and t.info().reclaim_orphans is False


def test_readme_maps_the_peers_and_cites_what_ships():
    text = open(README).read()
    for peer in ("filelock", "fasteners", "portalocker", "redis", "etcd3"):
        rows = [line for line in text.splitlines()
                if line.startswith("|") and peer in line.split("|")[1]]
        assert rows, "no migration row for %s" % peer
    # The package ships no article: the README must not send readers to one.
    assert "article" not in text.lower() and "reference/" not in text
