"""``use_deterministic_algorithms`` / ``backends.cudnn.deterministic`` on the CUDA kernels (Note [What the
flags change] in flambeau/_determinism.py): scatter-adds pull instead of using atomics, ops with only an
atomic path raise (or warn with ``warn_only``), and ``backends.cudnn.enabled`` is what cuDNN's switch reads."""

import numpy as np
import pytest

import flambeau as fl


@pytest.fixture
def deterministic():
    fl.use_deterministic_algorithms(True)
    yield
    fl.use_deterministic_algorithms(False)


def _scatter_case():
    rng = np.random.default_rng(0)
    index = rng.integers(0, 20, size=(30,))
    src = rng.standard_normal(30).astype(np.float32)
    expected = np.zeros(20, np.float32)
    np.add.at(expected, index, src)
    return fl.tensor(index), fl.tensor(src), expected


def test_scatter_add_takes_the_pull_path_and_is_right(deterministic, monkeypatch):
    from flambeau._kernels.cuda import indexing

    def no_atomics(*args, **kwargs):
        raise AssertionError("the atomic path ran under use_deterministic_algorithms(True)")

    monkeypatch.setattr(indexing, "_accumulating", no_atomics)
    index, src, expected = _scatter_case()
    out = fl.zeros(20, device="cuda").scatter_add(0, index.to("cuda"), src.to("cuda"))
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-6, atol=1e-6)
    out = fl.zeros(20, device="cuda").scatter(0, index.to("cuda"), src.to("cuda"), reduce="add")
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-6, atol=1e-6)


def test_ops_with_only_atomics_raise_or_warn(deterministic):
    index, src, _ = _scatter_case()
    out = fl.zeros(20, device="cuda")
    with pytest.raises(RuntimeError, match="index_add_cuda_ does not have a deterministic implementation"):
        out.index_add_(0, index.to("cuda"), src.to("cuda"))
    fl.use_deterministic_algorithms(True, warn_only=True)
    with pytest.warns(UserWarning, match="index_add_cuda_ does not have a deterministic implementation"):
        out.index_add_(0, index.to("cuda"), src.to("cuda"))


def test_cudnn_switch_is_the_backends_flag():
    from flambeau._kernels.cuda import _cudnn

    saved = fl.backends.cudnn.enabled
    try:
        fl.backends.cudnn.enabled = False
        assert not _cudnn.available()
    finally:
        fl.backends.cudnn.enabled = saved
