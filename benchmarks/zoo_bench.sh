#!/bin/bash
# Time every zoo protocol in its zoo scenario at W = 2, 4 and 8 (docs/BENCHMARKS.md, issue 15).
# Runs from this repository's root, whatever the current directory; extra arguments go to
# benchmarks/zoo_bench.py (--worlds, --runs, --timeout, --names, --json). PYTHON picks the
# interpreter (default: python on PATH, e.g. an activated virtual environment).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m benchmarks.zoo_bench "$@"
