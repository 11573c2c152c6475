"""DistributedDataParallel and SyncBatchNorm (flambeau/distributed/_ddp.py, _sync_batchnorm.py) on 2 ranks.

After a few SGD steps every rank's parameters (and gradients, and batch-norm statistics) must
equal those of one process trained on what the ranks saw together (ddp_cases.reference), in
float64 to 1e-10; rank_ddp.py trains every case in one launcher run.
"""

from __future__ import annotations

import ddp_cases
import numpy as np
import pytest
from conftest import launch

CASES = ["basic", "buckets_view", "no_sync", "unused", "sampler", "syncbn"]


@pytest.fixture(scope="module")
def trained(mpi_available, tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    run = launch("rank_ddp.py", str(out), *CASES, nproc=ddp_cases.WORLD)
    assert run.returncode == 0, run
    return {case: [dict(np.load(out / f"{case}_rank{r}.npz")) for r in range(ddp_cases.WORLD)] for case in CASES}


@pytest.mark.parametrize("case", CASES)
def test_ranks_match_one_process_on_the_concatenated_batch(trained, case):
    ranks = trained[case]
    want = ddp_cases.state(ddp_cases.reference(case))
    for r, got in enumerate(ranks):
        for name, value in want.items():
            if case == "syncbn" and name.startswith("grad:"):
                continue  # after the last step: compared through the parameters
            assert name in got, f"rank {r} lacks {name}"
            np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-12, err_msg=f"{case}, rank {r}, {name}")
    for name in ranks[0]:
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name], err_msg=f"{case}: ranks differ in {name}")


def test_unused_parameters_keep_no_gradient(trained):
    for got in trained["unused"]:
        assert "grad:never.weight" not in got and "grad:never.bias" not in got
        assert "grad:extra.weight" in got  # used on rank 0 only: averaged with rank 1's zeros


def test_no_sync_averaged_once_per_step(trained):
    for got in trained["no_sync"]:
        assert int(got["stats:backward_syncs"]) == ddp_cases.STEPS


def test_sync_batchnorm_running_statistics_are_the_whole_batch(trained):
    want = ddp_cases.state(ddp_cases.reference("syncbn"))
    for got in trained["syncbn"]:
        for name in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sizes, caps", [
    ([10, 300_000, 5, 70_000, 262_144, 3], [1 << 20, 2 << 20]),
    ([1000] * 50, [4096]),
    ([5_000_000, 1, 2_000_000, 7], [1 << 20, 25 << 20]),
])
def test_buckets_follow_torch_in_gradient_ready_order(sizes, caps):
    """Buckets are torch's assignment by size over the parameters in reverse order (the order of torch's
    rebuilt buckets when gradients arrive last-layer first)."""
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist

    import flambeau as fl
    from flambeau.distributed._ddp import _assign_buckets

    if not tdist.is_available():
        pytest.skip("torch.distributed is not built")
    order = list(reversed(range(len(sizes))))
    want, _ = tdist._compute_bucket_assignment_by_size([torch.zeros(sizes[i]) for i in order], caps,
                                                       [False] * len(sizes), order)
    assert _assign_buckets([fl.zeros(n, dtype=fl.float32) for n in sizes], caps) == [list(b) for b in want]
