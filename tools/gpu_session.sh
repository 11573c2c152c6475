#!/usr/bin/env bash
# The checks a session with a lent GPU runs, as one bounded script (the device machine gives about
# 15 minutes in all, its start included): a smoke test of what loads, the GPU benchmarks of the
# speed goals, the CUDA test tier on the real device, the rest of the benchmarks, Figure 1 on CUDA.
# Each stage has its own time limit, so a hang in one still leaves the others' results. Results go to
# $OUT (at most 8 files come back: each stage writes one, the paper stage a tarball of its pages).
# Run from the repository root:
#     bash tools/gpu_session.sh
# The machine has no registry access: flambeau runs from the source tree (PYTHONPATH; flambeau is a
# namespace package over packages/*/src). Dependencies the image lacks (cffi, pycparser; py-spy for the spy
# stage's samples) come as wheels in an ignored folder .whl/ carried along (see the device tool's README for
# the pip download line).
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=""
if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && SITE=/tmp/site:
fi
# Run from the source tree, flambeau's packages have no installed metadata: the entry points their
# pyproject.toml files declare (tensor-core finds the caching allocator through one) are written out
# as dist-info folders that importlib.metadata reads from PYTHONPATH.
$PY - <<'PYEOF'
import pathlib, tomllib
for pyproject in pathlib.Path("packages").glob("*/pyproject.toml"):
    project = tomllib.loads(pyproject.read_text())["project"]
    groups = project.get("entry-points", {})
    if groups:
        info = pathlib.Path("/tmp/eps") / f"{project['name'].replace('-', '_')}-0.0.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: 0.0\n")
        (info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) for group, points in groups.items()))
PYEOF
PYTHONPATH=$SITE/tmp/eps:$(ls -d "$PWD"/packages/*/src | paste -sd: -)
export PYTHONPATH PYTHONUNBUFFERED=1 NUMBA_DISABLE_PERFORMANCE_WARNINGS=1
# Without cffi flambeau finds neither cuBLAS nor cuDNN and every stage would time its numba fallbacks (a run was
# lost so): stop at once unless ALLOW_NO_CFFI is set.
if ! $PY -c "import cffi" 2>/dev/null && [ -z "${ALLOW_NO_CFFI:-}" ]; then
    echo "cffi is missing: carry .whl (cffi, pycparser) to the machine, or set ALLOW_NO_CFFI=1" | tee "$OUT/smoke.txt"
    exit 1
fi
WORKERS=${WORKERS:-14}
# STAGES picks stages by name (default: smoke spy bench scale tests table1, about 340 s on an H200): smoke kernels
# probe ktimes engines devtime profile host spy calls bench scale lstm tests rest table1 paper nccl models extra
# Each stage's start goes to $OUT/stages.txt, so a run says where its minutes went.
trap '[[ $BASH_COMMAND == timeout* ]] && echo "$(date +%s) ${BASH_COMMAND:0:90}" >> "$OUT/stages.txt"' DEBUG
STAGES=" ${STAGES:-smoke spy bench scale tests table1} "
want() { [[ "$STAGES" == *" $1 "* ]]; }

{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
    lscpu | grep -E "Model name|^CPU\(s\)"
    $PY -c "import sys, platform; print(sys.version); print(platform.platform())"
    for m in numpy numba numba_cuda ml_dtypes cffi torch xdist pytest_timeout; do
        $PY -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>&1 | tail -1
    done
} > "$OUT/smoke.txt" 2>&1

# 0. what loads and whether the basic paths agree with torch
want smoke && { timeout 60 $PY tools/gpu_smoke.py >> "$OUT/smoke.txt" 2>&1; echo "exit $?" >> "$OUT/smoke.txt"; }
# the large operators' device time against torch's (batch norm at ResNet-50's and VGG's sizes, ...)
want kernels && { timeout ${KERNELS_LIMIT:-150} $PY benchmarks/gpu_ops.py --quick > "$OUT/kernels.txt" 2>&1
    echo "exit $?" >> "$OUT/kernels.txt"; }
want probe && timeout 60 $PY tools/gpu_probe_linalg.py >> "$OUT/smoke.txt" 2>&1
# which kernels those operators run and how long each takes, flambeau's and torch's (CUPTI), and cuDNN's algorithms
want ktimes && { timeout ${KTIMES_LIMIT:-150} $PY tools/gpu_kernel_times.py ${KTIMES_ROWS:-} > "$OUT/ktimes.txt" 2>&1
    echo "exit $?" >> "$OUT/ktimes.txt"; }
# every engine cuDNN's graph API offers for ResNet-18's convolutions, its notes and time, and which flambeau and torch take
want engines && { timeout ${ENGINES_LIMIT:-90} $PY tools/gpu_cudnn_engines.py > "$OUT/engines.txt" 2>&1
    echo "exit $?" >> "$OUT/engines.txt"; }
# where the device's time goes in a ResNet-18 and a GPT step, flambeau's kernels against torch's
want devtime && { timeout ${DEVTIME_LIMIT:-120} $PY tools/gpu_profile.py devtime:resnet18 devtime:gpt > "$OUT/devtime.txt" 2>&1
    echo "exit $?" >> "$OUT/devtime.txt"; }
want profile && { timeout ${PROFILE_LIMIT:-180} $PY tools/gpu_profile.py ${PROFILE_SECTIONS:-} > "$OUT/profile.txt" 2>&1; echo "exit $?" >> "$OUT/profile.txt"; }
# the same host paths against the fake device, on this host's CPU: what the real driver and GPU add to them
# (HOST_RUNS: which runs of tools/host_overhead.py, separated by commas)
want host && { IFS=, read -ra runs <<< "${HOST_RUNS:-,--ffi,--model resnet18,--model gpt,--model lstm_lm,--paper resnet50}"
    for m in "${runs[@]}"; do echo "=== host_overhead.py $m"; timeout 40 $PY tools/host_overhead.py $m; done \
    > "$OUT/host.txt" 2>&1; echo "exit $?" >> "$OUT/host.txt"; }
# a real step's wall time against its threads' CPU time (flambeau's and torch's; flambeau's ResNet-18 again with the
# legacy cuDNN calls), then py-spy's samples of flambeau's steps (when a py-spy wheel came in .whl/), to spy.txt and spy_raw.txt
want spy && { timeout ${SPY_LIMIT:-100} $PY tools/gpu_spy.py ${SPY_MODELS:-resnet18 gpt} > "$OUT/spy.txt" 2>&1
    echo "exit $?" >> "$OUT/spy.txt"
    echo "=== the legacy cuDNN calls (FLAMBEAU_CUDNN_GRAPH=0)" >> "$OUT/spy.txt"
    timeout 60 env FLAMBEAU_CUDNN_GRAPH=0 $PY tools/gpu_spy.py resnet18 >> "$OUT/spy.txt" 2>&1
    echo "=== host µs per library call (--floors), then with the legacy cuDNN calls" >> "$OUT/spy.txt"
    timeout 60 $PY tools/gpu_spy.py --floors >> "$OUT/spy.txt" 2>&1
    timeout 60 env FLAMBEAU_CUDNN_GRAPH=0 $PY tools/gpu_spy.py --floors >> "$OUT/spy.txt" 2>&1
    # (SPY_RECORD: the runs of gpu_spy.py py-spy samples, separated by commas)
    IFS=, read -ra runs <<< "${SPY_RECORD:-resnet18,gpt}"
    if [ -x /tmp/site/bin/py-spy ]; then for m in "${runs[@]}"; do
        timeout 40 /tmp/site/bin/py-spy record --format raw --threads --idle -r 250 --nonblocking -o /tmp/spy.txt \
            -- $PY tools/gpu_spy.py $m --loop 8 >> "$OUT/spy.txt" 2>&1
        { echo "=== $m"; cat /tmp/spy.txt; } >> "$OUT/spy_raw.txt"; done; fi; }

# each native call of a real step (cuLaunchKernel, cuDNN's and cuBLAS's functions, numba's driver calls) timed by name:
# the step's host time less those is its Python (CALLS_MODELS: the models, and --gpu-size where wanted)
# (then ResNet-18 again with every library pinned to 2 threads, as benchmarks/gpu.py runs: its steps took 12.4 and
# 15.9 ms where this tool's took 22.3 and 19.4 on the same hosts, unpinned)
want calls && { timeout ${CALLS_LIMIT:-60} $PY tools/gpu_calls.py ${CALLS_MODELS:-resnet18 gpt} > "$OUT/calls.txt" 2>&1
    echo "exit $?" >> "$OUT/calls.txt"
    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2 NUMBA_NUM_THREADS=2 timeout ${CALLS_LIMIT:-60} \
        $PY tools/gpu_calls.py resnet18 >> "$OUT/calls.txt" 2>&1
    echo "exit $?" >> "$OUT/calls.txt"; }

# 1. the speed goals first, on a quiet GPU (ResNet and GPT >= 0.8x torch)
want bench && { timeout 100 $PY benchmarks/gpu.py --quick --only resnet18 --only gpt > "$OUT/gpu_bench.txt" 2>&1
    echo "exit $?" >> "$OUT/gpu_bench.txt"; }

# 1b. the seven models at their GPU sizes (train.GPU_MODELS), where the device's work counts, to the same file
# (the goals' models first: a stage cut short by its limit keeps what it measured)
want scale && { timeout ${SCALE_LIMIT:-150} $PY benchmarks/gpu.py --quick --size gpu --only resnet18 --only gpt \
    --only lstm_lm --only mobilenet_v2 --only mlp --only lenet --only ncf >> "$OUT/gpu_bench.txt" 2>&1
    echo "exit $?" >> "$OUT/gpu_bench.txt"; }

# 1c. the device time of the LSTM LM's step, kernel by kernel, both libraries (the whole-sequence LSTM kernels, not
# yet timed on a GPU, against cuDNN's RNN), to ktimes.txt
want lstm && { timeout ${LSTM_LIMIT:-60} $PY tools/gpu_kernel_times.py model:train:lstm_lm >> "$OUT/ktimes.txt" 2>&1
    echo "exit $?" >> "$OUT/ktimes.txt"; }

# 2. the CUDA tier on the device (tests marked gpu run only here), compiling in parallel workers
want tests && { timeout ${TEST_LIMIT:-180} $PY -m pytest -q -ra --tb=short -p no:cacheprovider -n "$WORKERS" \
    --timeout 120 packages/tensor-core/tests/cuda packages/nn/tests/cuda > "$OUT/cuda_tests.txt" 2>&1
    echo "exit $?" >> "$OUT/cuda_tests.txt"; }

# 3. the other models (the >= 0.6x goals)
want rest && { timeout 60 $PY benchmarks/gpu.py --quick --only mlp --only lenet --only mobilenet_v2 --only lstm_lm \
    --only ncf >> "$OUT/gpu_bench.txt" 2>&1; echo "exit $?" >> "$OUT/gpu_bench.txt"; }

# 4. Table 1 alone, every model at the paper's sizes (about 100 s), to $OUT/table1.md
# (TABLE1_ARGS: more arguments, e.g. "--only resnet50")
want table1 && { timeout ${TABLE1_LIMIT:-200} $PY benchmarks/paper/table1.py --device cuda --quick ${TABLE1_ARGS:-} \
    --out "$OUT/table1.md" > "$OUT/table1.txt" 2>&1; echo "exit $?" >> "$OUT/table1.txt"; }

# 5. the paper's evaluation on the GPU (issue 14): Figures 1 and 2, Table 1 at the paper's sizes, the ablations;
# pages under docs/paper/gpu, brought back as $OUT/paper_gpu.tgz (each script's output in $OUT/paper.txt)
want paper && {
    mkdir -p docs/paper/gpu
    for run in "${FIGURE_LIMIT:-60} figure1.py --device cuda --out docs/paper/gpu" \
               "${FIGURE_LIMIT:-60} figure2.py --device cuda --out docs/paper/gpu" \
               "${TABLE1_LIMIT:-200} table1.py --device cuda --quick --out docs/paper/gpu/table1.md" \
               "${ABLATIONS_LIMIT:-150} ablations.py --device cuda --quick --rounds 1 ${ABLATIONS_ONLY:-} --out docs/paper/gpu/ablations.md"; do
        set -- $run
        limit=$1; shift
        echo "=== $*"; timeout "$limit" $PY benchmarks/paper/"$@"; echo "exit $?"
    done > "$OUT/paper.txt" 2>&1
    tar -czf "$OUT/paper_gpu.tgz" docs/paper/gpu; }
# the NCCL backend of flambeau.distributed on this one GPU (issue 15; its own environment with MPICH)
want nccl && { timeout ${NCCL_LIMIT:-90} env PYTHON="$PY" bash tools/gpu_nccl_check.sh > "$OUT/nccl_run.txt" 2>&1; echo "exit $?" >> "$OUT/nccl_run.txt"; }
# the whole-model tests only (the seven models CPU against CUDA), a short check after a fix
want models && { timeout ${MODELS_LIMIT:-90} $PY -m pytest -q -ra --tb=short -p no:cacheprovider -n 7 \
    packages/nn/tests/cuda/test_models_sim.py > "$OUT/models.txt" 2>&1; echo "exit $?" >> "$OUT/models.txt"; }
# any other command in this environment (EXTRA, stage extra), e.g. a diagnostic script
want extra && { timeout ${EXTRA_LIMIT:-120} bash -c "$EXTRA" > "$OUT/extra.txt" 2>&1; echo "exit $?" >> "$OUT/extra.txt"; }
grep -sE "^(ok|FAIL)|geqrf|orgqr|svd" "$OUT/smoke.txt"
grep -sE "\| +[0-9.]+ *$|failed|exit|Error" "$OUT/gpu_bench.txt"
grep -sE "^(===|exit)|wrote|ratio" "$OUT/paper.txt" "$OUT/table1.txt"
tail -n 3 "$OUT/models.txt" "$OUT/nccl_run.txt" 2>/dev/null
tail -n 25 "$OUT/cuda_tests.txt" 2>/dev/null
