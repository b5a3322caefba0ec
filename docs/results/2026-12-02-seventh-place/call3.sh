#!/usr/bin/env bash
# Seventh session, call 3: at 64/64/16, the fixed one-shot example 10^5 iterations under random delays
# (the user's command, its positive control after), and under the buggy examples' planned actions
# (producers 2 ms late, local_C placed) 20,000 iterations; which size makes the witness show (rows of 300).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
H=examples/one_shot_all_reduce/harness.py
D="--define SIZE=1024 --define BLOCK=64 --define BLOCK_K=64 --define PROGRAMS=16"
mkdir -p "$OUT/r"
t=$(date +%s)
timeout 240 python3 -m syncverify stress $H::fix_with_barrier --delays random --iterations 100000 $D \
  > "$OUT/r/cli-fix_with_barrier-1e5.txt" 2>&1
echo "cli fix_with_barrier 1e5: rc $? in $(( $(date +%s) - t )) s" | tee -a "$OUT/r/summary.txt"
grep -E "iterations in|first failure at|control|DELAYS" "$OUT/r/cli-fix_with_barrier-1e5.txt" | tee -a "$OUT/r/summary.txt"
O=one_shot_all_reduce; R="$O::fix_with_barrier<-$O::original:start+place:64/64/16:20000;"
for s in 64/32/16 64/64/32 128/64/16 128/32/32 32/32/16; do R="$R$O::original:start+place+graphs+all:$s:300;"; done
python3 benchmarks/user_stress_fast_gpu.py --out "$OUT/r/fast" --sections actions --budget 200 --action-rows "$R" \
  > "$OUT/r/fast-log.txt" 2>&1
python3 - "$OUT/r" <<'PY' | tee -a "$OUT/r/summary.txt"
import json, sys, pathlib
for r in json.loads((pathlib.Path(sys.argv[1]) / "fast" / "user_stress_fast.json").read_text())["rows"]:
    label = r["label"].split(" under ")[0].split("::")[1] + " " + r["label"].split()[-1]
    if "error" in r or "bad" not in r:
        print(label, r.get("error", r.get("skipped"))); continue
    p = r["pattern"] or "." * r["iterations"]
    print(f"{label:34s} {r['bad']:5d}/{r['iterations']} first {r['first']} per 100: "
          + " ".join(str(p[i:i + 100].count("x")) for i in range(0, len(p), 100))[:200])
PY
tar czf "$OUT/call3.tgz" -C "$OUT" r && rm -rf "$OUT/r"
