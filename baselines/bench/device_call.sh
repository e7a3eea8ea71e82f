#!/usr/bin/env bash
# One call on a lent GPU machine (it lacks gymnasium, pydantic, ...): install the carried wheels (.whl from
# ../shared/device/fetch-wheels.sh plus kerneldojo's own, built here with `pip wheel --no-deps -w .whl .`), then
# run each argument as a shell command with its output teed to $OUT/<n>.log. The previous main, for side-by-side
# figures, goes in .whl-old and is installed to /tmp/site_old (put it first on PYTHONPATH to use it).
#   bash baselines/bench/device_call.sh 'pytest -m gpu tests/adversarial' 'python baselines/bench/...'
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
if compgen -G ".whl-old/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site_old .whl-old/*.whl
fi
export PYTHONPATH=/tmp/site CUTLASS_INCLUDE=/tmp/site/cutlass_library/source/include PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
n=0
for cmd in "$@"; do
    n=$((n + 1))
    echo "===== [$n] $cmd ($(date -u +%T))"
    bash -c "$cmd" > "$OUT/$n.log" 2>&1
    echo "===== [$n] exit $? ($(date -u +%T))"
    tail -n 25 "$OUT/$n.log"
done
