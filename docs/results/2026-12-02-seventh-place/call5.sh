#!/usr/bin/env bash
# Seventh session, call 5: the two fixed all-scatter examples' clean rows that call 4's budget cut: 10^5
# iterations each under random delays (<= 50 us) at the harness's STRESS_SIZES, then the positive control.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
timeout 520 python3 benchmarks/user_stress_gpu.py --out "$OUT/r" --budget 400 --only fix_with_barriers,reset_between_barriers \
  --skip throughput,buggy,watchdog --clean-iterations 100000 --control-iterations 20000 > "$OUT/r/gpu-log.txt" 2>&1
echo "user_stress_gpu: rc $?"
sed -n '/^NVIDIA/,$p' "$OUT/r/gpu-log.txt" | tail -12
tar czf "$OUT/call5.tgz" -C "$OUT" r && rm -rf "$OUT/r"
