"""The Python examples of the project's README and of docs/GUIDE.md run as
written, each in a process of its own, on a table of the test's own (the
examples' table "jobs" is renamed)."""

import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _python_blocks(rel, after=None):
    text = open(os.path.join(ROOT, rel)).read()
    if after is not None:
        start = text.index("\n" + after) + 1
        level = len(after) - len(after.lstrip("#"))
        end = re.search(r"\n#{1,%d} " % level, text[start + 1:])
        text = text[start:start + 1 + end.start()] if end else text[start:]
    return re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)


def _run(code, name, cwd):
    renamed = code.replace('Table("jobs")', 'Table("%s")' % name)
    assert renamed != code, "the example opens no table \"jobs\":\n" + code
    return subprocess.run([sys.executable, "-c", renamed], capture_output=True, text=True,
                          timeout=60, cwd=cwd)  # not python/: the installed package


def test_readme_python_example_runs(name, tmp_path):
    blocks = _python_blocks("README.md", "### Python")
    assert len(blocks) == 1, blocks
    r = _run(blocks[0], name, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nightly runs with token 1" in r.stdout, r.stdout


def test_guide_python_examples_run(name, tmp_path):
    blocks = _python_blocks("docs/GUIDE.md")
    assert blocks, "no python block in docs/GUIDE.md"
    for code in blocks:
        r = _run(code, name, tmp_path)
        assert r.returncode == 0, code + r.stdout + r.stderr
        assert "working with token 1" in r.stdout, r.stdout
