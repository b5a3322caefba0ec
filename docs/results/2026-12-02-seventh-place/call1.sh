#!/usr/bin/env bash
# Seventh session, call 1: rows of 600 iterations, each a fresh placement and graph, to see whether a
# run's rate of bad iterations is set per run (placement, graph) or drifts within one.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=one_shot_all_reduce; R=""
rows() { for i in $(seq "$1"); do R="$R$O::$2:start+place+graphs+all:$3:600;"; done; }
rows 4 original 128/32/16; rows 3 barrier_without_fence 128/32/16
rows 3 original 64/64/16; rows 3 barrier_without_fence 64/64/16
python3 benchmarks/user_stress_fast_gpu.py --out "$OUT/a" --sections actions --budget 240 --action-rows "$R" > "$OUT/a-log.txt" 2>&1
R=""; rows 2 original 128/32/16; rows 2 barrier_without_fence 128/32/16
CUDA_DEVICE_MAX_CONNECTIONS=32 python3 benchmarks/user_stress_fast_gpu.py --out "$OUT/b" --sections actions --budget 120 --action-rows "$R" > "$OUT/b-log.txt" 2>&1
python3 - "$OUT" <<'PY'
import json, sys, pathlib
for part in "ab":
    f = pathlib.Path(sys.argv[1]) / part / "user_stress_fast.json"
    if not f.exists():
        print(part, "no output"); continue
    for r in json.loads(f.read_text())["rows"]:
        label = r["label"].split(" under ")[0].split("::")[1] + " " + r["label"].split()[-1]
        if "error" in r or "bad" not in r:
            print(part, label, r.get("error", r.get("skipped"))); continue
        p = r["pattern"] or "." * r["iterations"]
        print(f"{part} {label:34s} {r['bad']:4d}/{r['iterations']} first {r['first']}")
        print("   ", " ".join(str(p[i:i + 100].count("x")) for i in range(0, len(p), 100)))
PY
