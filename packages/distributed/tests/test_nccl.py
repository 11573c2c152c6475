"""The ``"nccl"`` backend (flambeau/distributed/_nccl.py, _nccl_collectives.py, the routing in _collectives.py).

Without a GPU: backend names and library loading in this process, and every operation's NCCL calls on
2 ranks against a fake libnccl (fake_nccl.py) with CUDA tensors on numba's simulator (rank_nccl_fake.py).
With a GPU and libnccl: rank_nccl.py runs every operation for real on one rank and trains a model
with DistributedDataParallel, compared with numpy and with plain training.
"""

from __future__ import annotations

import pytest
from conftest import launch, read_checks

from flambeau.distributed import _nccl
from flambeau.distributed._process_group import _parse_backend


@pytest.mark.parametrize("given, want", [
    (None, "mpi"), ("mpi", "mpi"), ("MPI", "mpi"), ("nccl", "nccl"), ("NCCL", "nccl"), ("cuda:nccl", "nccl"),
    ("cpu:mpi,cuda:nccl", "cpu:mpi,cuda:nccl"), ("cuda:nccl, cpu:mpi", "cpu:mpi,cuda:nccl"), ("cpu:mpi", "mpi"),
])
def test_backend_names(given, want):
    assert _parse_backend(given) == want


@pytest.mark.parametrize("given", ["gloo", "cpu:gloo,cuda:nccl", "cpu:mpi,cuda:gloo", "ucc", "cpu:mpi,"])
def test_unknown_backends_raise(given):
    with pytest.raises(ValueError, match="backend must be 'mpi', 'nccl' or 'cpu:mpi,cuda:nccl'"):
        _parse_backend(given)


def test_a_gpu_is_known_by_its_uuid_not_its_index(monkeypatch):
    # ranks that each see one GPU through CUDA_VISIBLE_DEVICES all call it cuda:0: the UUID tells them apart
    import types

    import flambeau as fl

    uuids = {"a": "GPU-aaaa", "b": "GPU-bbbb"}
    seen = []
    for who in ("a", "b"):
        properties = types.SimpleNamespace(uuid=uuids[who])
        monkeypatch.setattr(fl.cuda, "get_device_properties", lambda device, p=properties: p)
        seen.append(_nccl._gpu_identity(0))
    assert seen[0] != seen[1]
    monkeypatch.setattr(fl.cuda, "get_device_properties", lambda device: types.SimpleNamespace(uuid="GPU-aaaa"))
    assert _nccl._gpu_identity(3) == seen[0]  # one GPU under two indices is still one GPU


def test_nccl_is_unavailable_without_the_library(monkeypatch):
    monkeypatch.setattr(_nccl, "_state", {})
    monkeypatch.setattr(_nccl, "find_library", lambda: None)
    import flambeau.distributed as dist

    assert not dist.is_nccl_available()
    assert "libnccl.so.2 not found" in _nccl.why_unavailable()
    with pytest.raises(_nccl.NcclError, match="libnccl.so.2 not found"):
        _nccl.version()


def test_nccl_is_unavailable_when_the_library_does_not_load(monkeypatch, tmp_path):
    bogus = tmp_path / "libnccl.so.2"
    bogus.write_bytes(b"not a shared library")
    monkeypatch.setattr(_nccl, "_state", {})
    monkeypatch.setattr(_nccl, "find_library", lambda: str(bogus))
    assert not _nccl.available() and "OSError" in _nccl.why_unavailable()


def test_version_codes():
    import fake_nccl

    saved = dict(_nccl._state)
    try:
        fake_nccl.install()
        assert _nccl.version() == (2, 23, 4)
    finally:
        _nccl._state.clear()
        _nccl._state.update(saved)


NAMES = ["backend_and_bootstrap", "all_reduce_calls", "side_stream_async_work_and_no_host_sync",
         "unsupported_ops_and_dtypes_raise_before_enqueueing", "validation_errors_name_the_argument",
         "reduce_broadcast_calls", "all_gather_calls", "reduce_scatter_calls", "gather_scatter_are_grouped_send_recv",
         "all_to_all_calls", "send_recv_use_the_group_communicator_once_it_exists",
         "send_recv_before_any_collective_use_a_pair_communicator", "barrier_is_a_one_element_all_reduce",
         "objects_go_through_mpi", "new_group_has_its_own_communicator", "two_ranks_on_one_gpu_are_refused",
         "async_error_and_timeout_abort_the_communicator", "a_failed_call_aborts_the_group",
         "ddp_averages_buckets_with_nccl", "a_failing_destroy_still_frees_the_group",
         "destroy_and_composite_backend"]


@pytest.fixture(scope="module")
def fake_checks(mpi_available, tmp_path_factory) -> list[dict]:
    pytest.importorskip("numba_cuda", reason="needs numba-cuda for the CUDA simulator")
    pytest.importorskip("cffi")
    out = tmp_path_factory.mktemp("nccl_fake")
    run = launch("rank_nccl_fake.py", str(out), nproc=2, env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert run.returncode == 0, run
    return read_checks(out, 2)


@pytest.mark.parametrize("name", NAMES)
def test_nccl_calls_against_a_fake_library(fake_checks, name):
    failed = {f"rank {r}": c.get(name, "missing") for r, c in enumerate(fake_checks) if c.get(name) != "ok"}
    assert not failed, "\n".join(f"{k}\n{v}" for k, v in failed.items())


def _real_gpu_reason() -> str | None:
    try:
        import numba

        if numba.config.ENABLE_CUDASIM:
            return "NUMBA_ENABLE_CUDASIM is set"
        import flambeau as fl

        if not fl.cuda.is_available():
            return "no CUDA device"
    except Exception as error:  # noqa: BLE001 - numba-cuda missing
        return f"no CUDA: {error}"
    if not _nccl.available():
        return f"no NCCL: {_nccl.why_unavailable()}"
    return None


@pytest.mark.skipif(_real_gpu_reason() is not None, reason=f"needs a real GPU and libnccl ({_real_gpu_reason()})")
def test_every_operation_on_a_real_gpu(mpi_available, tmp_path):
    run = launch("rank_nccl.py", str(tmp_path), nproc=1, env={"NUMBA_ENABLE_CUDASIM": "0"}, timeout=300)
    assert run.returncode == 0, run
    (checks,) = read_checks(tmp_path, 1)
    failed = {name: trace for name, trace in checks.items() if trace != "ok" and not trace.startswith("skipped")}
    assert not failed, "\n".join(f"{k}\n{v}" for k, v in failed.items())
    assert len(checks) >= 10, checks
