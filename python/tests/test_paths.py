"""Tables at a file path: shmlease.Table("/dir/name.shl") on a tmpfs
mounted for the test, shared with another process; and the refusal of a
directory that others may write without the sticky bit."""

import os
import subprocess
import tempfile

import pytest
import shmlease

from conftest import expect_line, spawn


@pytest.fixture
def tmpfs():
    """A fresh tmpfs (4 MiB, mode 0700) on a new directory, unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = tempfile.mkdtemp(prefix="shlpath-")
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", d],
                       check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        os.rmdir(d)
        pytest.skip("cannot mount a tmpfs: %s" % e)
    yield d
    subprocess.run(["umount", "-l", d], check=True)
    os.rmdir(d)


def test_table_at_a_path_is_shared_between_processes(tmpfs):
    path = os.path.join(tmpfs, "jobs.shl")
    with shmlease.Table(path, create=True, capacity=8, value_size=32) as t:
        assert os.path.isfile(path) and not os.path.islink(path)
        assert os.stat(path).st_mode & 0o7777 == 0o600
        tok = t.acquire("job", "parent", 30)
        assert tok == 1
        t.write("job", "parent", tok, b"at a path")
        child = spawn("""
            import sys, shmlease
            with shmlease.Table(sys.argv[1]) as t:
                try:
                    t.acquire("job", "child", 1)
                    print("acquired")
                except shmlease.Busy:
                    value, token = t.read("job")
                    print("busy", value.decode(), token)
            """, path)
        expect_line(child, "busy at a path 1")
        assert child.wait(10) == 0
        t.release("job", "parent", tok)
        assert t.acquire("job", "parent", 30) == 2
    shmlease.unlink(path)
    assert not os.path.exists(path)
    with pytest.raises(shmlease.NotFound):
        shmlease.Table(path, create=False)


def test_directory_others_may_write_is_refused(tmpfs):
    os.chmod(tmpfs, 0o777)
    path = os.path.join(tmpfs, "jobs.shl")
    with pytest.raises(shmlease.PermissionDenied):
        shmlease.Table(path, create=True, capacity=8)
    assert os.listdir(tmpfs) == []
    os.chmod(tmpfs, 0o1777)
    with shmlease.Table(path, create=True, capacity=8):
        pass
    shmlease.unlink(path)


@pytest.mark.parametrize("bad", ["/tmp/../x.shl", "/tmp//x.shl", "/tmp/.x.shl", "tmp/x.shl"])
def test_malformed_paths_are_invalid(bad):
    with pytest.raises(shmlease.InvalidArgument):
        shmlease.Table(bad, create=True, capacity=8)
