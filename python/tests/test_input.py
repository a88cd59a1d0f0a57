"""Bad input gets a clear exception, never a crash."""

import math

import pytest
import shmlease


@pytest.mark.parametrize("ttl", [float("nan"), float("inf"), -1, -0.1, 0, 0.0, 2**64, 1e30,
                                 2**64 // 10**9 + 1])
def test_bad_ttl_seconds(table, ttl):
    with pytest.raises(shmlease.InvalidArgument):
        table.acquire("a", "A", ttl)
    with pytest.raises(shmlease.InvalidArgument):
        table.acquire_wait("a", "A", ttl, 0)
    with pytest.raises(shmlease.NotFound):
        table.stat("a")  # nothing was added


@pytest.mark.parametrize("ttl_ns", [0, -1, 2**64, 2**200])
def test_bad_ttl_ns(table, ttl_ns):
    with pytest.raises(shmlease.InvalidArgument):
        table.acquire("a", "A", ttl_ns=ttl_ns)


def test_overflowing_expiry(manual):
    manual.clock_set(2**63)
    with pytest.raises(shmlease.InvalidArgument):
        manual.acquire("a", "A", ttl_ns=2**64 - 1)


@pytest.mark.parametrize("ttl", [True, "1", b"1", None, [1], 1j])
def test_ttl_types(table, ttl):
    with pytest.raises(TypeError):
        table.acquire("a", "A", ttl)


def test_arguments(table):
    t = table
    with pytest.raises(TypeError):
        t.acquire("a", "A", 1, ttl_ns=5)  # both forms
    with pytest.raises(TypeError):
        t.acquire("a", "A")  # no ttl
    with pytest.raises(TypeError):
        t.acquire("a")
    with pytest.raises(TypeError):
        t.acquire("a", "A", 1, 2)
    with pytest.raises(TypeError):
        t.acquire("a", "A", 1, bogus=2)
    with pytest.raises(TypeError):
        t.acquire("a", "A", 1, ttl=2)
    with pytest.raises(TypeError):
        t.acquire(b"a", "A", 1)
    with pytest.raises(TypeError):
        t.acquire("a", 7, 1)
    tok = t.acquire(lease="a", owner="A", ttl=10)
    with pytest.raises(TypeError):
        t.write("a", "A", tok, "text")  # str is not bytes
    with pytest.raises(TypeError):
        t.write("a", "A", str(tok), b"x")
    with pytest.raises(TypeError):
        t.write("a", "A", tok, 12)
    with pytest.raises(TypeError):
        t.write("a", "A", True, b"x")
    with pytest.raises(shmlease.InvalidArgument):
        t.write("a", "A", -1, b"x")
    with pytest.raises(shmlease.InvalidArgument):
        t.write("a", "A", 2**64, b"x")
    t.write("a", "A", tok, bytearray(b"ba"))
    t.write("a", "A", tok, memoryview(b"xmv")[1:])
    assert t.read("a") == (b"mv", tok)
    with pytest.raises(shmlease.TooBig):
        t.write("a", "A", tok, bytes(257))
    t.write("a", "A", tok, bytes(256))
    assert t.read("a") == (bytes(256), tok)
    with pytest.raises(TypeError):
        t.clock_set(1.5)


@pytest.mark.parametrize("bad", ["a\0b", "x" * 64, "", "sp ace", "é", "a\n"])
def test_bad_lease_names(table, bad):
    with pytest.raises(shmlease.InvalidArgument):
        table.acquire(bad, "A", 1)
    with pytest.raises(shmlease.InvalidArgument):
        table.read(bad)
    with pytest.raises(shmlease.InvalidArgument):
        table.stat(bad)


def test_name_limits(table):
    table.acquire("x" * shmlease.NAME_MAX, "o" * shmlease.OWNER_MAX, 1)
    with pytest.raises(shmlease.InvalidArgument):
        table.acquire("y", "o" * (shmlease.OWNER_MAX + 1), 1)
    with pytest.raises(shmlease.InvalidArgument):
        table.acquire("y", "own\0er", 1)
    table.acquire("y", "owner with spaces", 1)


@pytest.mark.parametrize("bad", ["t\0x", "a" * 201, ".hidden", "sl/ash", ""])
def test_bad_table_names(bad):
    with pytest.raises(shmlease.InvalidArgument):
        shmlease.Table(bad, create=True)


def test_bad_table_options(name):
    with pytest.raises(shmlease.InvalidArgument):
        shmlease.Table(name, create=True, capacity=0)
    with pytest.raises(shmlease.InvalidArgument):
        shmlease.Table(name, create=True, value_size=shmlease.VALUE_MAX + 1)
    with pytest.raises(shmlease.InvalidArgument):
        shmlease.Table(name, create=True, mode=0o644)
    with pytest.raises(TypeError):
        shmlease.Table(name, create=True, capacity="many")
    with pytest.raises(TypeError):
        shmlease.Table(name, True)
    with pytest.raises(TypeError):
        shmlease.Table(7)


def test_closed_table(name):
    t = shmlease.Table(name, create=True, capacity=4)
    t.close()
    t.close()  # twice is fine
    assert t.closed
    with pytest.raises(ValueError):
        t.acquire("a", "A", 1)
    with pytest.raises(ValueError):
        t.stat("a")


def test_timeouts(table):
    table.acquire("a", "A", 10)
    for bad in (float("nan"), -1, -0.5):
        with pytest.raises(shmlease.InvalidArgument):
            table.acquire_wait("a", "B", 1, bad)
    with pytest.raises(shmlease.TimedOut):
        table.acquire_wait("a", "B", 1, 0)  # 0 tries once
    with pytest.raises(shmlease.TimedOut):
        table.acquire_wait("a", "B", 1, timeout_ns=1000)


def test_lease_context_arguments(table):
    with pytest.raises(TypeError):
        table.lease("a")  # no ttl
    with pytest.raises(shmlease.InvalidArgument):
        table.lease("a", ttl=math.nan)
    with pytest.raises(shmlease.InvalidArgument):
        table.lease("a", ttl=0)
    with pytest.raises(TypeError):
        table.lease("a", ttl=1, ttl_ns=5)
    with pytest.raises(shmlease.InvalidArgument):
        with table.lease("a", ttl=1, interval=2):  # interval >= ttl - margin
            pass
    assert table.stat("a").state is shmlease.State.FREE  # given back when the renewer refused
