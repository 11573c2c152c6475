"""Every collective and point-to-point operation (flambeau/distributed/_collectives.py, _objects.py)
on 2 ranks against numpy, plus argument validation; one launcher run (rank_collectives.py) for all."""

from __future__ import annotations

import pytest
from conftest import launch, read_checks

NPROC = 2


@pytest.fixture(scope="module")
def checks(mpi_available, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("collectives")
    run = launch("rank_collectives.py", str(out), nproc=NPROC)
    assert run.returncode == 0, run
    return read_checks(out, NPROC)


def assert_ok(checks: list[dict], prefix: str) -> None:
    names = [n for n in checks[0] if n == prefix or n.startswith(prefix + "[")]
    assert names, f"no check named {prefix}"
    failed = {f"rank {r}: {n}": c[n] for r, c in enumerate(checks) for n in names if c.get(n) != "ok"}
    assert not failed, "\n".join(f"{k}\n{v}" for k, v in failed.items())


@pytest.mark.parametrize("name", [
    "environment", "all_reduce", "all_reduce_2d_async", "all_reduce_many_in_flight", "reduce", "broadcast",
    "all_gather", "all_gather_into_tensor", "all_gather_into_tensor_in_place", "reduce_scatter",
    "reduce_scatter_tensor", "gather", "scatter", "all_to_all_uneven", "all_to_all_single",
    "all_to_all_single_splits", "send_recv", "isend_irecv", "barrier", "new_group", "broadcast_object_list",
    "all_gather_object", "argument_errors", "debug_detail_names_the_rank_that_differs",
])
def test_collective_matches_numpy(checks, name):
    assert_ok(checks, name)


def test_every_dtype_and_reduce_op_was_checked(checks):
    names = {n for n in checks[0] if n.startswith("all_reduce[")}
    for dtype in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"):
        assert f"all_reduce[{dtype}-SUM]" in names and f"all_reduce[{dtype}-MAX]" in names
    assert "all_reduce[float32-AVG]" in names and "all_reduce[int64-BXOR]" in names


def test_cuda_tensors_move_through_host_memory(mpi_available, tmp_path):
    pytest.importorskip("numba_cuda", reason="needs numba-cuda for the CUDA simulator")
    run = launch("rank_cuda.py", str(tmp_path), nproc=NPROC, env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert run.returncode == 0, run
    checks = read_checks(tmp_path, NPROC)
    if checks[0]["cuda_all_reduce_broadcast_gather"].startswith("skipped"):
        pytest.skip(checks[0]["cuda_all_reduce_broadcast_gather"])
    assert_ok(checks, "cuda_all_reduce_broadcast_gather")
