#!/usr/bin/env bash
# Seventh session, call 2: the user's command at 64/64/16 (call 1: every row there failed from iteration 1),
# three fresh processes per buggy one-shot example, one of them with random delays beside; the fixed example
# with its positive control, under random delays (the model calls it safe: no guided schedule).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
H=examples/one_shot_all_reduce/harness.py
D="--define SIZE=1024 --define BLOCK=64 --define BLOCK_K=64 --define PROGRAMS=16"
for name in original barrier_without_fence seed_fix; do
  for i in 1 2 3; do
    extra="--no-random"; [ "$i" = 3 ] && extra=""
    t=$(date +%s)
    timeout 150 python3 -m syncverify stress $H::$name --guided --iterations 100 $D $extra \
      --output "$OUT/cli-$name-$i.jsonl" > "$OUT/cli-$name-$i.txt" 2>&1
    echo "cli $name run $i: rc $? in $(( $(date +%s) - t )) s" | tee -a "$OUT/summary.txt"
    grep -E "iterations in|first failure at|^random|reproduced|DELAYS|rror" "$OUT/cli-$name-$i.txt" | head -6 | tee -a "$OUT/summary.txt"
  done
done
t=$(date +%s)
timeout 200 python3 -m syncverify stress $H::fix_with_barrier --delays random --iterations 5000 $D \
  --output "$OUT/cli-fix_with_barrier.jsonl" > "$OUT/cli-fix_with_barrier.txt" 2>&1
echo "cli fix_with_barrier: rc $? in $(( $(date +%s) - t )) s" | tee -a "$OUT/summary.txt"
grep -E "iterations in|first failure at|control|clean|DELAYS" "$OUT/cli-fix_with_barrier.txt" | head -8 | tee -a "$OUT/summary.txt"
gzip -f "$OUT"/*.jsonl
