"""Every library code is an exception class under shmlease.Error, with .code
and .name, made from the library's own table; each is raised by the real
library where a test can bring the condition about."""

import mmap
import os

import pytest
import shmlease


def test_one_class_per_code():
    table = shmlease.errors()
    codes = [c for c, _, _ in table]
    assert codes[0] == 0 and len(set(codes)) == len(codes)
    classes = set()
    for code, name, message in table[1:]:
        cls = shmlease.error_class(code)
        assert issubclass(cls, shmlease.Error) and cls is not shmlease.Error
        assert (cls.code, cls.name) == (code, name)
        assert message in cls.__doc__
        assert getattr(shmlease, cls.__name__) is cls
        classes.add(cls)
    assert len(classes) == len(table) - 1
    assert shmlease.error_class(-10**6) is shmlease.Error


def test_python_bases():
    assert issubclass(shmlease.InvalidArgument, ValueError)
    assert issubclass(shmlease.ClockBackwards, ValueError)
    assert issubclass(shmlease.TimedOut, TimeoutError)
    assert shmlease.Timeout is shmlease.TimedOut
    assert shmlease.ForkError is shmlease.UsedAfterFork
    assert not issubclass(shmlease.Lost, ValueError)
    made = shmlease.Busy("by hand")
    assert (made.holder, made.owner, made.token, made.remaining) == (None, None, None, None)


def raised(cls, fn, *args, **kw):
    with pytest.raises(cls) as e:
        fn(*args, **kw)
    assert type(e.value) is cls
    assert e.value.code == cls.code and e.value.name == cls.name
    assert shmlease.strerror(cls.code)[1] in str(e.value)
    return e.value


def test_codes_from_the_library(name, table):
    t = table
    tok = t.acquire("a", "A", 10)
    raised(shmlease.Busy, t.acquire, "a", "B", 1)
    raised(shmlease.Lost, t.write, "a", "A", tok + 1, b"x")
    raised(shmlease.Lost, t.renew, "a", "B", tok, 1)
    raised(shmlease.Lost, t.release, "a", "B", tok)
    raised(shmlease.NotFound, t.stat, "never")
    raised(shmlease.NotFound, t.read, "never")
    raised(shmlease.NotFound, shmlease.Table, name + "-missing", create=False)
    raised(shmlease.TooBig, t.write, "a", "A", tok, bytes(257))
    raised(shmlease.InvalidArgument, t.acquire, "bad name", "A", 1)
    raised(shmlease.InvalidArgument, t.clock_set, 5)  # monotonic table
    raised(shmlease.TimedOut, t.acquire_wait, "a", "B", 1, 0.05)
    raised(shmlease.Exists, shmlease.Table, name, create=True, exclusive=True, capacity=16)
    raised(shmlease.Mismatch, shmlease.Table, name, create=True, capacity=17)
    raised(shmlease.NotFound, t.revoke, "never")


def test_full(name):
    with shmlease.Table(name, create=True, capacity=1) as t:
        t.acquire("one", "A", 1)
        raised(shmlease.Full, t.acquire, "two", "A", 1)


def test_permission_denied_for_a_wider_mode(name):
    with shmlease.Table(name, create=True, capacity=4, mode=0o660):
        raised(shmlease.PermissionDenied, shmlease.Table, name, create=True, capacity=4,
               mode=0o600)


def test_corrupt(name):
    with open("/dev/shm/" + name, "wb") as f:
        f.write(b"not a table" * 1000)
    os.chmod("/dev/shm/" + name, 0o600)
    raised(shmlease.Corrupt, shmlease.Table, name)
    # Not a table: unlink refuses it and keeps it.
    raised(shmlease.Corrupt, shmlease.unlink, name)
    assert os.path.exists("/dev/shm/" + name)
    os.unlink("/dev/shm/" + name)


def test_removed(name, table):
    t = table
    tok = t.acquire("a", "A", 10)
    shmlease.unlink(name)
    raised(shmlease.Removed, t.renew, "a", "A", tok, 10)
    raised(shmlease.Removed, t.read, "a")
    raised(shmlease.Removed, t.acquire, "b", "A", 1)
    assert shmlease.LossReason.REMOVED == 4  # SHL_LOSS_REMOVED


def test_clock_backwards(manual):
    manual.clock_set(10)
    raised(shmlease.ClockBackwards, manual.clock_set, 9)


def test_fence_stale():
    m = mmap.mmap(-1, 4096)
    with shmlease.Fence(m) as f:
        f.admit(5)
        f.admit(5)  # the same holder again
        raised(shmlease.Stale, f.admit, 4)
        assert f.load() == 5
        raised(shmlease.InvalidArgument, f.admit, 0)
        f.reset()
        f.admit(1)
    with pytest.raises(shmlease.InvalidArgument):
        shmlease.Fence(m, offset=4)  # misaligned
    with pytest.raises(shmlease.InvalidArgument):
        shmlease.Fence(m, offset=4092)  # past the end
    with pytest.raises(BufferError):
        shmlease.Fence(b"read-only bytes")
    with pytest.raises(TypeError):
        shmlease.Fence("text")
    # The word is the buffer's: another view of it sees the admitted token.
    with shmlease.Fence(m, offset=8) as f:
        f.admit(7)
    assert int.from_bytes(m[8:16], "little") == 7
    m.close()  # possible once the fences let go of the buffer
