#!/usr/bin/env bash
# Device calls 1 and 2 of the memory calibration (bench/memory/README.md), run from a checkout root that has
# .whl/ (the LLaMA-Factory 0.9.5 wheels) and .gpu/wt16/ (cfgopt/, bench/memory/harness.py, assets/).
# Call 1: BUDGET=440 bash device_call.sh; call 2: CFGOPT_MEMORY_DS_ONLY=1 BUDGET=210 WAIT=30 bash device_call.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/.gpu/wt16 DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
R=/tmp/memres; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $R/gpu.txt
nvidia-smi --query-gpu=memory.used --format=csv,noheader -l 3 > $R/smi.csv 2>&1 &
SMI=$!
python3 .gpu/wt16/bench/memory/harness.py lanes --out $R --work /tmp/memwork --assets .gpu/wt16/assets --budget ${BUDGET:-450} --wait-max ${WAIT:-90}
kill $SMI
sort -n $R/smi.csv | tail -1
tar -czf $OUT/memres.tar.gz -C /tmp memres
cat $R/*.jsonl | python3 -c "import sys,json; [print(r['family'], r['variant'], round(r.get('peak_allocated_gib',-1),2), r.get('max_shape'), (r.get('error') or '')[:200]) for r in map(json.loads, sys.stdin)]"
