"""Messages that name the argument and the rule: the library's detail
(shl_last_error()) is the text of the exception, and a lease already held by
the same owner says so."""

import os

import pytest
import shmlease


def test_owner_too_long_names_owner_and_limit(table):
    with pytest.raises(shmlease.InvalidArgument) as e:
        table.acquire("ok", "o" * 5000, 1)
    msg = str(e.value)
    assert msg.startswith("owner: 5000 bytes, the limit is 63"), msg
    assert "invalid argument" in msg


def test_lease_with_a_space(table):
    with pytest.raises(shmlease.InvalidArgument, match=r"^lease: contains a space at byte 3"):
        table.acquire("job 1", "me", 1)


def test_mode_names_the_allowed_ones(name):
    with pytest.raises(shmlease.InvalidArgument, match=r"^mode: 0644 is not 0600 or 0660"):
        shmlease.Table(name, create=True, mode=0o644)


def test_capacity_names_the_limit(name):
    with pytest.raises(shmlease.InvalidArgument, match=r"^capacity: 0, it must be 1 to 16777216"):
        shmlease.Table(name, create=True, capacity=0)


def test_permission_names_owner_and_mode(name):
    shmlease.Table(name, create=True).close()
    os.chmod("/dev/shm/" + name, 0o644)
    with pytest.raises(shmlease.PermissionDenied) as e:
        shmlease.Table(name, create=False)
    assert "mode 0644; this process is uid %d" % os.geteuid() in str(e.value)
    os.chmod("/dev/shm/" + name, 0o600)


def test_detail_is_told_once(table):
    with pytest.raises(shmlease.InvalidArgument, match="owner: empty"):
        table.acquire("a", "", 1)
    tok = table.acquire("a", "me", 10)
    with pytest.raises(shmlease.Busy) as e:
        table.acquire("a", "other", 1)
    assert "owner: empty" not in str(e.value)
    table.release("a", "me", tok)


def test_busy_by_the_same_owner_is_already_held_by_you(table):
    tok = table.acquire("a", "me", 10)
    with pytest.raises(shmlease.Busy) as e:
        table.acquire("a", "me", 10)
    assert "a: already held by you (owner me, token %d" % tok in str(e.value)
    with pytest.raises(shmlease.Busy) as e:
        table.acquire("a", "you", 10)
    assert "already held by you" not in str(e.value)
    assert "held by me" in str(e.value)
    table.release("a", "me", tok)


def test_too_long_a_duration_names_the_limit(table):
    with pytest.raises(shmlease.InvalidArgument, match=r"ttl is too large: the limit is 2\*\*64 - 1 ns"):
        table.acquire("a", "me", 1e20)
