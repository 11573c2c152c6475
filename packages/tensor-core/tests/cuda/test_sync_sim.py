"""Host synchronisations are counted, and kernels' device-side errors surface at the next one.

Note [Counting host synchronisations] and Note [Device-side errors] in flambeau.cuda._sync.
"""

from __future__ import annotations

import warnings

import pytest

import flambeau as fl
from flambeau._kernels.cuda._launch import ERR_INDEX, error_flag


@pytest.fixture(autouse=True)
def _default_mode():
    yield
    fl.cuda.set_sync_debug_mode("default")


def test_reading_a_value_counts_one_sync_and_queued_work_none():
    x = fl.ones(4, device="cuda")
    before = fl.cuda.host_sync_count()
    y = (x * 2 + 1).exp().sum()
    assert fl.cuda.host_sync_count() == before
    y.item()
    assert fl.cuda.host_sync_count() == before + 1
    x.cpu()
    fl.cuda.synchronize()
    assert fl.cuda.host_sync_count() == before + 3


def test_sync_debug_mode_warns_or_raises_but_not_on_explicit_synchronize():
    x = fl.ones(3, device="cuda")
    fl.cuda.set_sync_debug_mode("warn")
    assert fl.cuda.get_sync_debug_mode() == 1
    with pytest.warns(UserWarning, match="synchronizing CUDA operation"):
        x.sum().item()
    fl.cuda.set_sync_debug_mode(2)
    with pytest.raises(RuntimeError, match="synchronizing CUDA operation"):
        x.cpu()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fl.cuda.synchronize()
    with pytest.raises(ValueError, match="debug_mode"):
        fl.cuda.set_sync_debug_mode("loud")


def test_a_recorded_device_error_raises_once_at_the_next_sync():
    x = fl.ones(3, device="cuda")
    flag = error_flag()
    flag[0], flag[1], flag[2] = ERR_INDEX, 9, 3
    with pytest.raises(RuntimeError, match="index 9 is out of bounds for dimension with size 3"):
        x.sum().item()
    assert x.sum().item() == 3.0
