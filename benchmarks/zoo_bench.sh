#!/bin/bash
cd /work/wt-vocab15 && . /work/main/.venv/bin/activate && export PYTHONPATH=$PWD
for name in $(python -c "from syncverify.protocols.registry import zoo_names; print(' '.join(zoo_names()))"); do
  read sc ep la <<<$(python -c "from syncverify.protocols import load_protocol as l; z=l('$name').zoo; print(z.scenario, z.epochs, z.launches)")
  for W in 2 4 8; do
    out=/tmp/zb-$name-$W.txt; rm -f $out
    echo "### $name W=$W ($sc, $ep epochs, $la)"
    farm-bench -n 3 --warmup 0 --timeout 250 -- sh -c "exec python -m syncverify check $name --scenario $sc --world-size $W --epochs $ep --launches $la --timeout 60 >>$out 2>&1" 2>&1 | tail -4
    grep -E "SAFE|UNSAFE|UNKNOWN|consistent execution" $out | head -2
  done
done
