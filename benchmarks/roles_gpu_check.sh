#!/bin/bash
# Issue 21 (one role layer for the four fused kernels), item 3: on nvidia-h200, the bench gate and
# the GPU tests on the new kernels; a compact table last. The coordinator runs it after merging:
#
#     OUT=/some/dir bash benchmarks/roles_gpu_check.sh        # OUT: raw outputs (default ./roles-gpu-out)
#
# 1. `syncverify bench` with the sweep the baseline was recorded with (its "command":
#    --sweep benchmarks/sweeps/seeds-2gpu.toml --virtual-ranks), gated by --check against
#    benchmarks/baselines/nvidia-h200.json (exit 1: a row under 0.8x its recorded TFLOP/s, or a
#    wrong result); all-reduce and all-scatter, protocols none / barrier-fenced-release-acquire /
#    epoch-flag.
# 2. the two newer kernels (no baseline rows): one bench run each, fused vs the GEMM part, so a
#    slowdown of the role layer shows there too (exit 1 only on a wrong result).
# 3. python -m pytest -q tests/gpu (every GPU test: stress, new scenarios, warp barriers, ranks).
# 4. the PTX comparison needs no GPU (docs/kernels-roles.md); it is not repeated here.
#
# Runs from this repository's root, whatever the current directory. PYTHON picks the interpreter;
# STEPS picks steps (default "bench new tests"; e.g. STEPS=tests when one call may run 10 minutes).
# Every step runs even when an earlier one fails; the exit code is the first failure's (0: all passed).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/roles-gpu-out}"
PY="${PYTHON:-python}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # PLATFORM.md
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || true

status=0
declare -a rows
step() {  # step NAME LOGFILE COMMAND...: run, keep the log, remember the exit code and seconds
  local name=$1 log=$2; shift 2
  local t0=$SECONDS
  echo "== $name: $*" | tee -a "$OUT/commands.txt"
  "$@" > "$OUT/$log" 2>&1
  local rc=$?
  rows+=("$name|$rc|$((SECONDS - t0))|$log")
  if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
  tail -n 3 "$OUT/$log"
}

STEPS="${STEPS:-bench new tests}"
want() { [[ " $STEPS " == *" $1 "* ]]; }

want bench && step "bench --check (seeds sweep)" bench-check.log \
  "$PY" -m syncverify bench --sweep benchmarks/sweeps/seeds-2gpu.toml --virtual-ranks \
  --check benchmarks/baselines/nvidia-h200.json --out "$OUT/bench"
want new && for kernel in all-gather-gemm gemm-reduce-scatter; do
  step "bench $kernel 8192x4608x8192" "bench-$kernel.log" \
    "$PY" -m syncverify bench --kernel "$kernel" --virtual-ranks --world-size 2 --m 8192 --n 4608 --k 8192 \
    --protocol epoch-flag --out "$OUT/bench-$kernel"  # 'none' is always added
done
want tests && step "pytest tests/gpu" pytest-gpu.log "$PY" -m pytest -q tests/gpu -p no:cacheprovider

# ----- compact table: each step, then the gate's verdict and the slowest rows against the baseline
echo
echo "| step | exit | seconds | log |"
echo "| --- | --- | --- | --- |"
for row in "${rows[@]}"; do
  IFS='|' read -r name rc secs log <<< "$row"
  echo "| $name | $rc | $secs | $OUT/$log |"
done
echo
grep -hE "^(REGRESSION|gate:|TOO SLOW|syncverify: wrong result)|[0-9]+ (passed|failed|skipped)" \
  "$OUT/bench-check.log" "$OUT/pytest-gpu.log" 2>/dev/null | tail -n 12
"$PY" - "$OUT/bench/bench.json" benchmarks/baselines/nvidia-h200.json <<'EOF' || true
# The fused and gemm-part rows of this run against the baseline, lowest ratio first (8 rows).
import json, sys
try:
    run = json.load(open(sys.argv[1]))
    base = json.load(open(sys.argv[2]))["tflops"]
except (OSError, ValueError, KeyError) as error:
    sys.exit(f"(no bench table: {error})")
rows = run.get("rows", [])
pairs = []
for r in rows:
    key = r.get("key")
    if key in base and r.get("tflops"):
        pairs.append((r["tflops"] / base[key], key, r["tflops"], base[key]))
print(f"\n{len(pairs)} rows against the baseline; lowest ratios:")
print("| ratio | TFLOP/s now | baseline | row |")
print("| --- | --- | --- | --- |")
for ratio, key, now, then in sorted(pairs)[:8]:
    print(f"| {ratio:.2f} | {now:.1f} | {then:.1f} | {key.replace('|', '/')} |")
EOF
echo
echo "roles_gpu_check: exit $status (raw outputs in $OUT)"
exit "$status"
