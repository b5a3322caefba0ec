"""Run code that compiles Triton kernels for a GPU, in a fresh Python process.

The default suite runs with ``TRITON_INTERPRET=1``; a kernel imported under it becomes an
interpreter function that cannot be compiled, so a compile-for-sm_90 check runs in a child
process without that variable (no GPU is needed to compile)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_compiled(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -c code`` from the repository root with ``TRITON_INTERPRET`` unset (``tests`` on the
    path); asserts it exited 0, showing the tail of its output if not."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); " + code], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done
