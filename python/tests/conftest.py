"""Fixtures for the shmlease Python tests: real tables in /dev/shm, real
processes. Every table gets a name unique to this run and is removed after
its test."""

import faulthandler
import itertools
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
import shmlease

_seq = itertools.count()
HANG_SECONDS = 120


@pytest.fixture(autouse=True)
def hang_guard():
    """A test that hangs ends the run with every thread's traceback."""
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def unique_name(tag: str) -> str:
    # make test's run mark (SHL_TEST_RUN): its final check finds what a test left
    mark = os.environ.get("SHL_TEST_RUN", "")
    return "py-%s%s-%d-%d-%d" % (mark + "-" if mark else "", tag, os.getpid(),
                                 time.monotonic_ns() % 10**9, next(_seq))


@pytest.fixture
def name(request):
    """A fresh table name, unlinked after the test."""
    n = unique_name(re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name[:40]))
    yield n
    try:
        shmlease.unlink(n)
    except shmlease.NotFound:
        pass


@pytest.fixture
def table(name):
    """A new monotonic-clock table (capacity 16, 256-byte values) that does
    not reclaim orphans, whatever the library's default."""
    with shmlease.Table(name, create=True, capacity=16, value_size=256,
                        reclaim_orphans=False) as t:
        yield t


@pytest.fixture
def manual(name):
    """A new manual-clock table."""
    with shmlease.Table(name, create=True, capacity=16, value_size=256, manual_clock=True) as t:
        yield t


def spawn(code: str, *args: str) -> subprocess.Popen:
    """A separate Python process (this interpreter, the same shmlease)
    running `code`, with pipes on stdin and stdout (line-buffered text)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)] + list(args),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                            cwd="/")  # not python/: the installed package, not the source


def expect_line(p: subprocess.Popen, want: str, timeout: float = 10.0) -> str:
    """The child's next line, which must start with `want`."""
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        p.kill()
        pytest.fail("no line from the child within %.0f s (wanted %r)" % (timeout, want))
    line = p.stdout.readline().strip()
    assert line.startswith(want), "child said %r, wanted %r" % (line, want)
    return line
