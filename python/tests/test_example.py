"""examples/python/job_runner.py: runs, fences its journal with its token, and
a late writer holding an older token is refused by the journal itself."""

import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import shmlease

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "examples", "python", "job_runner.py")


def runner_module():
    spec = importlib.util.spec_from_file_location("job_runner", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(*args, **kw):
    return subprocess.Popen([sys.executable, RUNNER] + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd="/", **kw)


def journal_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    return int.from_bytes(data[:8], "little"), data[8:].decode().splitlines()


def test_job_runner(tmp_path, name):
    journal = str(tmp_path / "journal")
    p = run(journal, "--table", name, "--steps", "3", "--step-time", "0")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "token 1" in out and "done" in out
    p = run(journal, "--table", name, "--steps", "2", "--step-time", "0")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    fence, lines = journal_lines(journal)
    assert fence == 2
    assert lines == ["1 step 0", "1 step 1", "1 step 2", "2 step 0", "2 step 1"]
    with shmlease.Table(name) as t:
        assert t.read("nightly") == (b"step 1", 2)
    # A writer that kept token 1 is refused by the journal; nothing appended.
    mod = runner_module()
    fd = mod.open_journal(journal)
    try:
        with pytest.raises(shmlease.Stale):
            mod.append(fd, 1, "late")
    finally:
        os.close(fd)
    assert journal_lines(journal) == (2, lines)


def test_job_runner_stopped_past_expiry(tmp_path, name):
    """A runner stopped past its expiry wakes up, learns it lost the lease,
    and stops with status 3; a second runner did the work meanwhile."""
    journal = str(tmp_path / "journal")
    first = run(journal, "--table", name, "--steps", "50", "--step-time", "0.1", "--ttl", "0.3")
    assert first.stdout.readline().startswith("runner %d: token 1" % first.pid)
    os.kill(first.pid, signal.SIGSTOP)
    # Should the stop land inside the journal's lock or the lease's critical
    # section, the second runner waits for it: resume the first in any case.
    safety = threading.Timer(3.0, os.kill, (first.pid, signal.SIGCONT))
    safety.start()
    try:
        time.sleep(0.6)
        second = run(journal, "--table", name, "--steps", "2", "--step-time", "0")
        out, err = second.communicate(timeout=30)
        assert second.returncode == 0, err
        assert "token 2" in out
    finally:
        safety.cancel()
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=30)
    assert first.returncode in (3, 4), err
    fence, lines = journal_lines(journal)
    assert fence == 2
    assert [l for l in lines if l.startswith("2 ")] == ["2 step 0", "2 step 1"]
    i = lines.index("2 step 0")
    assert all(l.startswith("1 ") for l in lines[:i])  # nothing of token 1 after token 2
    assert all(l.startswith("2 ") for l in lines[i:])
