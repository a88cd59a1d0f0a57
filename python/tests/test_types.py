"""The package's types under ``mypy --strict`` (Debian's mypy, which make
test installs): a sample written as users write it must pass with the types
they expect, and wrong uses must be rejected, each on its own line."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

mypy = pytest.importorskip("mypy", reason="mypy is not installed (apt-get install mypy)")

GOOD = """
import asyncio
import datetime
from typing import Optional, Tuple

from typing_extensions import assert_type

import shmlease


def idioms(name: str) -> None:
    with shmlease.Table(name, capacity=16) as t:
        assert_type(t, shmlease.Table)
        tok = t.acquire("job", "me", ttl=5)
        assert_type(tok, int)
        assert_type(t.acquire("job", "me", ttl_ns=5_000_000_000), int)
        assert_type(t.acquire("job", "me", datetime.timedelta(seconds=5)), int)
        assert_type(t.try_acquire("job", "me", 5), Optional[int])
        assert_type(t.acquire_wait("job", "me", 5, timeout=1.5), int)
        assert_type(t.acquire_shared("doc", "me", 5), Tuple[int, int])
        t.renew("job", "me", tok, ttl=5)
        t.write("job", "me", tok, b"bytes")
        t.write("job", "me", tok, bytearray(b"bytearray"))
        t.write("job", "me", tok, memoryview(b"view"))
        data, wtok = t.read("job")
        assert_type(data, bytes)
        assert_type(wtok, int)
        assert_type(t.stat("job"), shmlease.LeaseInfo)
        assert_type(t.stat("job").pid, Optional[int])
        t.release("job", "me", tok)
        with t.lease("job", ttl=30) as lease:
            assert_type(lease, shmlease.Lease)
            assert_type(lease.token, int)
            lease.write(b"step")
            assert_type(lease.read(), Tuple[bytes, int])
        with t.lease("job", "me", datetime.timedelta(seconds=30), timeout=2, blocking=True):
            pass
        with t.lease("job", ttl_ns=30_000_000_000, blocking=False) as lease2:
            assert_type(lease2.lost, bool)
    try:
        shmlease.Table(name, create=False)
    except shmlease.NotAcquired as e:
        assert_type(e, shmlease.NotAcquired)
    except shmlease.Busy as b:
        assert_type(b.owner, Optional[str])


def elections(t: shmlease.Table) -> None:
    e = t.election("leader", id="me")
    assert_type(e, shmlease.Election)
    with e.campaign(ttl=5, timeout=1, value=b"10.0.0.7:80") as term:
        assert_type(term, shmlease.Term)
        assert_type(term.token, int)
        assert_type(term + 0, int)
        e.proclaim(bytearray(b"10.0.0.8:80"))
        assert_type(e.lost(), Optional[shmlease.LossReason])
        assert_type(e.fileno(), int)
    assert_type(e.campaign(ttl_ns=5_000_000_000), shmlease.Term)
    assert_type(e.resign(), bool)
    leader = e.leader()
    assert_type(leader, Optional[shmlease.Leader])
    if leader is not None:
        assert_type(leader.id, str)
        assert_type(leader.value, Optional[bytes])
        assert_type(leader.pid, Optional[int])
    for seen in e.observe(after=3, timeout=0.5):
        assert_type(seen, shmlease.Leader)
    e.close()


async def waits(t: shmlease.Table) -> None:
    tok = await t.acquire_wait_async("job", "me", 5, timeout=1)
    assert_type(tok, int)
    async with t.lease("job", ttl=5) as lease:
        assert_type(lease, shmlease.Lease)
        assert_type(await lease.wait_lost(), shmlease.LossReason)
    e = t.election("leader")
    assert_type(await e.campaign_async(ttl=5, timeout=1), shmlease.Term)
    e.resign()
    async with e.campaign_async(ttl=5) as term:
        assert_type(term, shmlease.Term)
    async for seen in e.observe_async(timeout=0.1):
        assert_type(seen, shmlease.Leader)


asyncio.run(waits(shmlease.Table("x")))
"""

# Each line marked "# E" must get an error, and no other line.
BAD = """
import shmlease

t = shmlease.Table("x")
t.write("job", "me", 1, "text")  # E: a str value
t.acquire("job", "me")  # E: no ttl
t.acquire("job", "me", ttl="5s")  # E: ttl as a string
t.lease("job")  # E: no ttl
with shmlease.Table("x") as t2:
    t2.acquire("job", "me", ttl="5s")  # E
    t2.write("job", "me", 1, "text")  # E
    name: int = t2.read("job")  # E: a tuple
    with t2.lease("job", ttl=5) as lease:
        lease.write("text")  # E
        token: str = lease.token  # E
        lease.bogus()  # E
    t2.lease("job", ttl=5, timeout="1")  # E
    e = t2.election("leader")
    e.proclaim("text")  # E: a str value
    e.campaign(ttl="5s")  # E
    e.campaign(value="text")  # E
    leader_id: int = e.leader().id  # E: Optional, and a str
    e.observe(after="3")  # E
"""


def _mypy(tmp_path, text):
    src = tmp_path / "sample.py"
    src.write_text(textwrap.dedent(text))
    # From a directory of its own: the installed package, not python/shmlease.
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                        "--cache-dir", os.devnull, "--no-error-summary", "--show-error-codes",
                        str(src)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return r, src.read_text().splitlines()


def test_idioms_are_typed(tmp_path):
    r, _ = _mypy(tmp_path, GOOD)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


def test_wrong_uses_are_rejected(tmp_path):
    r, lines = _mypy(tmp_path, BAD)
    assert r.returncode == 1, r.stdout + r.stderr
    flagged = {int(m.group(1)) for m in re.finditer(r"^\S*sample\.py:(\d+): error:", r.stdout,
                                                    re.M)}
    wanted = {i + 1 for i, line in enumerate(lines) if "# E" in line}
    assert flagged == wanted, r.stdout


def test_package_itself_is_strict(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                        "--cache-dir", os.devnull, "-p", "shmlease"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
