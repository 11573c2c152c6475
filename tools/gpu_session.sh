#!/usr/bin/env bash
# The checks a session with a lent GPU runs, as one bounded script (the device machine gives about
# 15 minutes in all): the CUDA test tier on the real device, the GPU benchmarks, the paper's GPU
# figures. Results go to $OUT (at most 8 files come back): run from the repository root,
#     bash tools/gpu_session.sh
# The machine has no registry access: flambeau runs from the source tree (PYTHONPATH; flambeau is a
# namespace package over packages/*/src), and its dependencies must already be there, or come as
# wheels in an ignored folder named wheels/ carried along (pip install --no-index --find-links wheels).
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
PYTHONPATH=$(ls -d "$PWD"/packages/*/src | paste -sd: -)
export PYTHONPATH
PY=${PYTHON:-python}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    $PY -c "import sys, platform; print(sys.version); print(platform.platform())"
    if [ -d wheels ]; then $PY -m pip install -q --no-index --find-links wheels ml_dtypes cffi safetensors; fi
    for m in numpy numba numba_cuda ml_dtypes cffi torch; do
        $PY -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>&1 | tail -1
    done
    $PY -c "import flambeau as fl; print('device', fl.cuda.get_device_name(), fl.cuda.get_device_capability())"
} > "$OUT/machine.txt" 2>&1

# 1. the CUDA tier on the device (tests marked gpu run only here): about 4 minutes
timeout 300 $PY -m pytest -q -ra -p no:cacheprovider packages/tensor-core/tests/cuda packages/nn/tests/cuda \
    > "$OUT/cuda_tests.txt" 2>&1
echo "exit $?" >> "$OUT/cuda_tests.txt"

# 2. the GPU benchmarks against torch, quick sizes
timeout 150 $PY benchmarks/gpu.py --quick > "$OUT/gpu_bench.txt" 2>&1
echo "exit $?" >> "$OUT/gpu_bench.txt"

# 3. the paper's GPU figures (Figure 1's timeline, Figure 2's allocator) where time is left
timeout 90 $PY benchmarks/paper/figure1.py --device cuda --out "$OUT" > "$OUT/figure1.txt" 2>&1
echo "exit $?" >> "$OUT/figure1.txt"
tail -n 3 "$OUT"/*.txt
