#!/usr/bin/env bash
# Seventh session, call 4: the committed tree at the harnesses' STRESS_SIZES. The user's command with no
# --define (the file's sizes), then the whole table: throughput, every buggy example guided (and where
# random delays first catch it), every fixed one 10^5 iterations under random delays with its positive control.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
timeout 90 python3 -m syncverify stress examples/one_shot_all_reduce/harness.py::original --guided --iterations 100 \
  > "$OUT/r/cli-original.txt" 2>&1
echo "cli original (no --define): rc $?"
grep -E "^sizes|iterations in|first failure at|^random|reproduced" "$OUT/r/cli-original.txt"
timeout 500 python3 benchmarks/user_stress_gpu.py --out "$OUT/r" --budget 440 --rate-rows graph-none,graph-random4 \
  --random-iterations 2000 --clean-iterations 100000 --control-iterations 20000 > "$OUT/r/gpu-log.txt" 2>&1
echo "user_stress_gpu: rc $?"
sed -n '/^NVIDIA\|^interpreter/,$p' "$OUT/r/gpu-log.txt" | tail -40
tar czf "$OUT/call4.tgz" -C "$OUT" r && rm -rf "$OUT/r"
