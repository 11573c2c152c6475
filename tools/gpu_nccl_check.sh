#!/usr/bin/env bash
# The NCCL backend of flambeau.distributed on a machine with one GPU (a world of one rank): rank_nccl.py
# through the launcher (every operation for real, DistributedDataParallel against plain training), then
# the pytest test that launches it (test_nccl.py's real-GPU test). Stage `nccl` of tools/gpu_session.sh,
# which sets PYTHONPATH (the packages' sources, cffi, the entry points) before it calls this script.
# The GPU machine has no MPI library: MPICH and mpi4py come as wheels in the ignored folder .whl/mpi/
# (pip download mpich==5.0.2 mpi4py==4.1.2 for CPython 3.12, manylinux x86-64), installed under a prefix
# whose bin/ holds mpiexec (the launcher finds it on PATH) and lib/ libmpi (mpi4py finds it on
# LD_LIBRARY_PATH).
set -u
PY=${PYTHON:-python3}
PREFIX=/tmp/mpich-prefix
$PY -m pip install -q --ignore-installed --no-index --no-deps --no-compile --no-cache-dir --prefix "$PREFIX" \
    .whl/mpi/*.whl || exit 1
SITE=$(ls -d "$PREFIX"/lib/python3*/site-packages)
export PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$PREFIX/lib:${LD_LIBRARY_PATH:-}" PYTHONPATH="$SITE:${PYTHONPATH:-}"
export NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1
$PY -c "import mpi4py, flambeau.distributed as d, flambeau.distributed._nccl as n
from mpi4py import MPI
print('mpi4py', mpi4py.__version__, MPI.Get_library_version().splitlines()[0])
print('nccl available:', d.is_nccl_available(), n.why_unavailable() or n.version())"
echo "--- rank_nccl.py through the launcher"
mkdir -p /tmp/nccl-out
(cd packages/distributed/tests && timeout "${RANK_LIMIT:-90}" $PY -m flambeau.distributed.run --nproc-per-node 1 \
    rank_nccl.py /tmp/nccl-out)
echo "exit $?"
cat /tmp/nccl-out/* 2>/dev/null | head -c 4000
echo
echo "--- pytest: the real-GPU test of test_nccl.py"
timeout "${PYTEST_LIMIT:-60}" $PY -m pytest -q -rs -p no:cacheprovider packages/distributed/tests/test_nccl.py \
    -k real_gpu
echo "exit $?"
