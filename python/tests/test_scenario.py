"""The reference article's LeaseStore scenario (shared/reference/
leases-and-fencing.txt), step for step, on a manual-clock table through the
Python API. One model time unit is one second of the table's clock."""

import pytest
import shmlease

SEC = 1_000_000_000
L = "store"


class Store:
    """The model's calls, each setting the table's clock to `now` first (the
    model's observe()), then calling the binding as a user would."""

    def __init__(self, t):
        self.t = t

    def observe(self, now):
        self.t.clock_set(now * SEC)

    def acquire(self, owner, ttl, now):
        self.observe(now)
        return self.t.try_acquire(L, owner, ttl)

    def renew(self, owner, token, ttl, now):
        self.observe(now)
        try:
            self.t.renew(L, owner, token, ttl)
            return True
        except shmlease.Lost:
            return False

    def release(self, owner, token, now):
        self.observe(now)
        try:
            self.t.release(L, owner, token)
            return True
        except shmlease.Lost:
            return False

    def write(self, owner, token, value, now):
        self.observe(now)
        self.t.write(L, owner, token, value)

    @property
    def data(self):
        return self.t.read(L)[0]

    @property
    def expiry(self):
        return self.t.stat(L).expiry_ns / SEC


def rejected(store, owner, token, now):
    before = store.data
    with pytest.raises(shmlease.Lost) as e:
        store.write(owner, token, b"forbidden", now)
    assert e.value.code == shmlease.Lost.code
    assert store.data == before


def test_reference_scenario(manual):
    store = Store(manual)
    a = store.acquire("A", 5, 0)
    assert a == 1
    store.write("A", a, b"a-1", 2)
    assert store.renew("A", a, 5, 4) and store.expiry == 9
    store.write("A", a, b"a-2", 8)
    rejected(store, "A", a, 9)  # Equality is expired.
    assert not store.renew("A", a, 5, 9)
    b = store.acquire("B", 5, 10)
    assert b == 2
    store.write("B", b, b"b-1", 11)
    rejected(store, "B", a, 12)
    rejected(store, "A", a, 12)
    assert store.acquire("C", 5, 12) is None
    assert not store.release("A", a, 12)
    assert store.release("B", b, 12)
    new_b = store.acquire("B", 5, 13)
    assert new_b == 3
    assert not store.release("B", b, 13)
    assert not store.renew("B", b, 5, 13)
    store.write("B", new_b, b"new-b", 14)
    assert store.release("B", new_b, 14)
    c = store.acquire("C", 5, 14)
    assert c == 4
    # The value is the last accepted write, with the token that wrote it.
    assert manual.read(L) == (b"new-b", 3)


def test_model_value_errors(manual):
    """The model raises ValueError for a non-positive ttl and for time moving
    backwards; so does the binding (InvalidArgument, ClockBackwards), and
    nothing changes."""
    manual.clock_set(5 * SEC)
    for ttl in (0, -1, 0.0, -0.5):
        with pytest.raises(ValueError) as e:
            manual.acquire(L, "A", ttl)
        assert isinstance(e.value, shmlease.InvalidArgument)
    with pytest.raises(shmlease.InvalidArgument):
        manual.acquire(L, "A", ttl_ns=0)
    tok = manual.acquire(L, "A", 5)
    assert tok == 1  # the refused calls consumed no token
    with pytest.raises(ValueError):
        manual.renew(L, "A", tok, 0)
    with pytest.raises(ValueError) as e:
        manual.clock_set(4 * SEC)
    assert isinstance(e.value, shmlease.ClockBackwards)
    assert e.value.name == "SHL_ECLOCK"
    assert manual.now_ns() == 5 * SEC
    manual.clock_set(5 * SEC)  # equal is accepted
    info = manual.stat(L)
    assert (info.owner, info.token, info.expiry_ns) == ("A", 1, 10 * SEC)
    assert info.state is shmlease.State.HELD and info.remaining == 5.0


def test_busy_tells_the_holder(manual):
    manual.clock_set(100)
    tok = manual.acquire(L, "A", ttl_ns=1000)
    manual.clock_set(400)
    with pytest.raises(shmlease.Busy) as e:
        manual.acquire(L, "B", ttl_ns=10)
    assert (e.value.owner, e.value.token, e.value.holder.remaining_ns) == ("A", tok, 700)
    assert e.value.remaining == pytest.approx(700e-9)
    assert e.value.holder.expiry_ns == 1100
    manual.clock_set(1100)
    assert manual.acquire(L, "B", ttl_ns=10) == tok + 1  # equality is expired


def test_seconds_and_nanoseconds(manual):
    manual.clock_set(0)
    manual.acquire("f", "A", 0.25)
    assert manual.stat("f").expiry_ns == 250_000_000
    manual.acquire("i", "A", ttl_ns=7)
    assert manual.stat("i").expiry_ns == 7
    manual.acquire("tiny", "A", 1e-12)  # rounded up: a positive ttl never becomes 0
    assert manual.stat("tiny").expiry_ns == 1
    t = manual.acquire("r", "A", 1)
    manual.renew("r", "A", t, ttl_ns=3)
    assert manual.stat("r").expiry_ns == 3
