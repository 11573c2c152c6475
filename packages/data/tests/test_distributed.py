"""DistributedSampler (flambeau/data/distributed.py) against torch.utils.data.DistributedSampler's semantics."""

from __future__ import annotations

import math

import pytest

from flambeau.data import DataLoader, DistributedSampler

try:
    import torch.utils.data as tdata
except ImportError:  # the torch comparisons are skipped; the rest runs
    tdata = None

needs_torch = pytest.mark.skipif(tdata is None, reason="torch is not installed")


@needs_torch
@pytest.mark.parametrize("n, replicas, drop", [(10, 3, False), (10, 3, True), (12, 4, False), (2, 5, False),
                                               (11, 2, True), (11, 2, False), (1, 3, False), (7, 7, True)])
def test_without_shuffle_matches_torch(n, replicas, drop):
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop)
        theirs = tdata.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
        assert (ours.num_samples, ours.total_size) == (theirs.num_samples, theirs.total_size)


@pytest.mark.parametrize("n, replicas", [(23, 3), (11, 2), (3, 5), (40, 4)])
@pytest.mark.parametrize("drop", [False, True])
def test_shuffled_shares_partition_the_dataset(n, replicas, drop):
    shares = [list(DistributedSampler(range(n), replicas, r, seed=7, drop_last=drop)) for r in range(replicas)]
    per_rank = (n // replicas) if drop else math.ceil(n / replicas)
    assert all(len(s) == per_rank for s in shares)
    flat = sum(shares, [])
    if drop:  # a cut tail: every key at most once
        assert len(set(flat)) == len(flat) == per_rank * replicas
    else:  # padded by repeating the head of the order: every key at least once
        assert set(flat) == set(range(n)) and len(flat) == per_rank * replicas


def test_padding_repeats_the_head_of_the_order():
    # 3 keys on 5 replicas: the order is repeated until 5 keys, one per replica.
    shares = [list(DistributedSampler(range(3), 5, r, shuffle=False)) for r in range(5)]
    assert shares == [[0], [1], [2], [0], [1]]


def test_set_epoch_changes_the_shuffle_the_same_way_on_every_replica():
    n, replicas = 50, 2
    samplers = [DistributedSampler(range(n), replicas, r, seed=3) for r in range(replicas)]
    first = [list(s) for s in samplers]
    assert first == [list(s) for s in samplers]  # iterating again without set_epoch: the same order
    for s in samplers:
        s.set_epoch(1)
    second = [list(s) for s in samplers]
    assert second != first
    assert sorted(sum(second, [])) == list(range(n))  # still a partition
    again = [DistributedSampler(range(n), replicas, r, seed=3) for r in range(replicas)]
    for s in again:
        s.set_epoch(1)
    assert [list(s) for s in again] == second  # depends only on seed + epoch
    other_seed = DistributedSampler(range(n), replicas, 0, seed=4)
    other_seed.set_epoch(1)
    assert list(other_seed) != second[0]


def test_every_replica_gets_the_same_number_of_batches_and_last_batch_size():
    # What DistributedDataParallel needs: every step runs on every replica, with equal batch sizes.
    loaders = [DataLoader(range(11), batch_size=4, sampler=DistributedSampler(range(11), 2, r)) for r in range(2)]
    sizes = [[len(batch) for batch in loader] for loader in loaders]
    assert sizes == [[4, 2], [4, 2]]


def test_errors():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        DistributedSampler(range(4), 3, 3)
    with pytest.raises(ValueError, match="num_replicas must be a positive int, got 0"):
        DistributedSampler(range(4), 0, 0)


def test_replicas_default_to_the_process_group():
    try:
        import flambeau.distributed as dist
    except ImportError:
        dist = None
    if dist is not None and dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    # Without an initialised group (or without flambeau-distributed) the error says what to do.
    with pytest.raises(RuntimeError, match="pass num_replicas and rank"):
        DistributedSampler(range(4))
    with pytest.raises(RuntimeError, match="pass num_replicas and rank"):
        DistributedSampler(range(4), num_replicas=2)
