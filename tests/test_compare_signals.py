"""Issue 23, item 5: ``kill -INT`` stops ``compare`` at once, and its worker processes die with
it, even when it is SIGKILLed (a check left running holds its pipes up to its timeout)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc for the workers")

# A pair that runs long (all-scatter at W = 8 with from = "each": minutes), two so there is a pool.
SLOW = ["compare", "done-flag", "--scenario", "all-scatter", "--world-size", "8", "--world-size", "7",
        "--no-gpu", "--jobs", "2", "--timeout", "120"]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _start_with_workers() -> tuple[subprocess.Popen, set[int]]:
    """The slow comparison, once its two checks run (forkserver, then two workers under it)."""
    proc = subprocess.Popen([sys.executable, "-m", "syncverify", *SLOW], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        below = _descendants(proc.pid)
        if len(below) >= 4:  # the resource tracker, the forkserver and its two workers
            time.sleep(1.0)
            return proc, _descendants(proc.pid)
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the comparison never started its workers")


def _gone_within(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(pids)


@pytest.mark.timeout(120)
def test_kill_int_stops_compare_and_its_workers():
    proc, below = _start_with_workers()
    proc.send_signal(signal.SIGINT)
    try:
        _out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert _gone_within(below, 5) == set()


@pytest.mark.timeout(120)
def test_workers_die_with_a_killed_compare():
    proc, below = _start_with_workers()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=15)
    assert _gone_within(below, 10) == set()  # before the fix: running to their 120 s timeout
    proc.communicate(timeout=15)  # and nothing holds the pipes any more
