"""The CUDA kernels of the linear algebra family (``flambeau._kernels.cuda.linalg``) beyond the op samples.

Strided and transposed operands, the paths the samples do not reach (batch folding and merging,
the two-pass reduction, float16, integer products, empty products, the epilogue ignoring a NaN
input when ``beta == 0``), ``diagonal`` as a view, einsum's equation forms, errors raised before
any launch, backward on CUDA equal to CPU. Runs under numba's simulator (tiny shapes) and on a
GPU; the test marked ``gpu`` checks the cuBLAS path, which only a real GPU takes.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

RNG = np.random.default_rng(0)


def _pair(*shape, dtype=fl.float32, low=-3, high=3):
    if dtype.is_floating_point:
        h = RNG.uniform(low, high, shape).astype(dtype.np)
    else:
        h = RNG.integers(low, high, shape).astype(dtype.np)
    c = fl.tensor(h)
    return c, c.to("cuda")


def _check(got, want, rtol=1e-5, atol=1e-5):
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    g, w = got.cpu().numpy(), want.numpy()
    if want.dtype.is_floating_point:
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(g, w)


# --- products -------------------------------------------------------------------------------------
def test_products_of_transposed_and_sliced_operands():
    a, ac = _pair(4, 3)
    b, bc = _pair(2, 4)
    _check(ac.t() @ bc.t(), a.t() @ b.t())  # both transposed
    v, vc = _pair(6)
    _check(fl.mv(ac, vc[::2]), fl.mv(a, v[::2]))  # strided vector
    _check(fl.dot(vc[::2], vc[1::2]), fl.dot(v[::2], v[1::2]))
    _check(fl.mv(bc.t(), vc[:2]), fl.mv(b.t(), v[:2]))  # column-major matrix: a GEMM
    x, xc = _pair(2, 5, 3)
    y, yc = _pair(2, 4, 5)
    _check(fl.bmm(xc.transpose(1, 2), yc.transpose(1, 2)), fl.bmm(x.transpose(1, 2), y.transpose(1, 2)))
    _check(ac[1:3, ::2] @ bc.t()[::2], a[1:3, ::2] @ b.t()[::2])  # sliced rows and columns


@pytest.mark.parametrize("sa, sb", [((2, 3, 3, 4), (4, 2)),  # batch folded into rows
                                    ((2, 3, 3, 4), (2, 3, 4, 2)),  # batch dims merged
                                    ((2, 1, 3, 4), (1, 3, 4, 2)),  # both broadcast
                                    ((4,), (2, 4, 3)),  # vector @ batch of matrices
                                    ((2, 3, 4), (4,))])  # batch of matrices @ vector
def test_matmul_batch_layouts(sa, sb):
    a, ac = _pair(*sa)
    b, bc = _pair(*sb)
    _check(ac @ bc, a @ b)


@pytest.mark.parametrize("dtype", [fl.float16, fl.int32, fl.int8])
def test_matmul_other_dtypes(dtype):
    a, ac = _pair(3, 5, dtype=dtype)
    b, bc = _pair(5, 2, dtype=dtype)
    _check(ac @ bc, a @ b, rtol=2e-3, atol=2e-3)
    v, vc = _pair(5, dtype=dtype)
    _check(fl.mv(ac, vc), fl.mv(a, v), rtol=2e-3, atol=2e-3)


def test_long_reductions_take_two_passes():
    # under the simulator blocks have 8 threads and one pass takes at most 64 elements per output
    v, vc = _pair(150)
    w, wc = _pair(150)
    _check(fl.dot(vc, wc), fl.dot(v, w), rtol=1e-4)
    m, mc = _pair(2, 100)
    i, ic = _pair(2)
    _check(fl.addmv(ic, mc, wc[:100], beta=0.5, alpha=-2), fl.addmv(i, m, w[:100], beta=0.5, alpha=-2), rtol=1e-4)
    s, sc = _pair(70, 70, dtype=fl.int32)
    _check(fl.trace(sc), fl.trace(s))


def test_add_products_epilogue():
    x, xc = _pair(3, 1)
    a, ac = _pair(3, 4)
    b, bc = _pair(4, 2)
    _check(fl.addmm(xc, ac, bc, beta=0.25, alpha=3), fl.addmm(x, a, b, beta=0.25, alpha=3))
    nan = fl.full((3, 2), float("nan"))
    _check(fl.addmm(nan.cuda(), ac, bc, beta=0), fl.addmm(nan, a, b, beta=0))  # beta == 0 ignores the input
    e, ec = _pair(3, 0)
    f, fc = _pair(0, 2)
    _check(fl.addmm(xc, ec, fc, beta=2), fl.addmm(x, e, f, beta=2))  # empty product: beta * input
    p, pc = _pair(3, 4, 2)
    q, qc = _pair(3, 2, 5)
    y, yc = _pair(4, 5)
    _check(fl.addbmm(yc, pc, qc, beta=-1, alpha=0.5), fl.addbmm(y, p, q, beta=-1, alpha=0.5))
    _check(fl.baddbmm(yc, pc, qc), fl.baddbmm(y, p, q))
    _check(fl.addbmm(yc, pc[:0], qc[:0], beta=3), fl.addbmm(y, p[:0], q[:0], beta=3))


def test_outer_kron_inner():
    a, ac = _pair(3)
    b, bc = _pair(2, 2)
    i, ic = _pair(4, dtype=fl.int64)
    _check(fl.outer(ic, ac), fl.outer(i, a))  # promotion
    _check(fl.kron(ac, bc), fl.kron(a, b))  # different ndims
    _check(fl.kron(bc.t(), bc), fl.kron(b.t(), b))
    c, cc = _pair(2, 3, 2)
    _check(fl.inner(cc, bc), fl.inner(c, b))
    _check(fl.inner(cc, fl.tensor(2.0).cuda()), fl.inner(c, fl.tensor(2.0)))


# --- diagonals ------------------------------------------------------------------------------------
def test_diagonal_is_a_view():
    a, ac = _pair(3, 4)
    d = fl.diagonal(ac, 1)
    assert d._storage is ac._storage and d.storage_offset() == 1 and d.stride() == (5,)
    d.fill_(7.0)
    want = a.numpy().copy()
    want[[0, 1, 2], [1, 2, 3]] = 7
    np.testing.assert_array_equal(ac.cpu().numpy(), want)
    assert tuple(fl.diagonal(ac, 5).shape) == (0,)
    _check(fl.diag(ac, -5), fl.diag(a, -5))
    x, xc = _pair(2, 3, 4)
    _check(fl.diagonal(xc.transpose(0, 2), -1, 1, 0), fl.diagonal(x.transpose(0, 2), -1, 1, 0))
    _check(fl.diag_embed(xc, -2, 3, 1), fl.diag_embed(x, -2, 3, 1))


# --- einsum, tensordot ----------------------------------------------------------------------------
@pytest.mark.parametrize("eq, shapes", [("ij,jk", [(3, 4), (4, 2)]),
                                        ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
                                        ("bii->bi", [(2, 3, 3)]),
                                        ("i,i,i->", [(3,), (3,), (3,)]),
                                        ("ijk,kj->", [(2, 3, 4), (4, 3)]),
                                        ("ij,kj->ikj", [(2, 3), (1, 3)]),  # size-1 broadcast
                                        ("a b , b c -> c a", [(2, 3), (3, 2)])])
def test_einsum_forms(eq, shapes):
    pairs = [_pair(*s) for s in shapes]
    _check(fl.einsum(eq, *[p[1] for p in pairs]), fl.einsum(eq, *[p[0] for p in pairs]), rtol=1e-4)


def test_einsum_of_transposed_operands_and_tensordot():
    a, ac = _pair(4, 3)
    b, bc = _pair(2, 4)
    _check(fl.einsum("ji,kj->ik", ac, bc), fl.einsum("ji,kj->ik", a, b))
    x, xc = _pair(2, 3, 4)
    _check(fl.tensordot(xc.transpose(0, 2), ac, ([0], [0])), fl.tensordot(x.transpose(0, 2), a, ([0], [0])))
    _check(fl.tensordot(xc, xc, 3), fl.tensordot(x, x, 3), rtol=1e-4)
    p, q = fl.tensor([[True, False], [False, False]]), fl.tensor([[False, True], [True, True]])
    _check(fl.einsum("ij,jk", p.cuda(), q.cuda()), fl.einsum("ij,jk", p, q))  # bool: or of ands


# --- errors, before any launch --------------------------------------------------------------------
def test_errors():
    a, ac = _pair(3, 4)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        fl.mm(ac, ac)
    with pytest.raises(RuntimeError, match="device"):
        fl.mm(ac, a.t())
    with pytest.raises(RuntimeError, match="Bool"):
        fl.mm(ac.bool(), ac.t().bool())
    with pytest.raises(RuntimeError, match="einsum"):
        fl.einsum("ij,jk->iz", ac, ac.t())
    with pytest.raises(RuntimeError, match="einsum"):
        fl.einsum("ijk->i", ac)
    with pytest.raises(RuntimeError, match="einsum"):
        fl.einsum("ii->i", ac)


# --- autograd -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fn, shapes", [(lambda a, b: (a @ b).sum(), [(3, 4), (4, 2)]),
                                        (lambda x, a, b: fl.addmm(x, a, b, beta=0.5, alpha=2).sum(),
                                         [(2,), (3, 4), (4, 2)]),
                                        (lambda a, b: fl.einsum("ij,jk->ik", a, b).sum(), [(3, 4), (4, 2)]),
                                        (lambda a: (fl.diagonal(a, 1) * 2).sum() + fl.trace(a), [(3, 3)]),
                                        (lambda a, b: fl.kron(a, b).sum() + fl.dot(a[0], b[0]), [(2, 2), (2, 2)])])
def test_backward_matches_cpu(fn, shapes):
    cpu = [_pair(*s)[0].requires_grad_() for s in shapes]
    dev = [t.detach().to("cuda").requires_grad_() for t in cpu]
    fn(*cpu).backward()
    fn(*dev).backward()
    for c, d in zip(cpu, dev):
        _check(d.grad, c.grad, rtol=1e-4)


# --- the cuBLAS calls, against a numpy model of cuBLAS (simulator) ---------------------------------
class _FakeFFI:
    def new(self, ctype, value):
        return [value]

    def cast(self, ctype, value):
        return value


def _column_major(ptr, dtype, trans, rows, cols, ld, stride, batch):
    """The ``batch`` matrices op(X) (``rows x cols``) cuBLAS reads at device address ``ptr``."""
    import ctypes

    item = np.dtype(dtype).itemsize
    sr, sc = (rows, cols) if trans == 0 else (cols, rows)
    n = (batch - 1) * stride + (sc - 1) * ld + sr
    buf = np.ctypeslib.as_array((ctypes.c_char * (n * item)).from_address(ptr)).view(dtype)
    mats = [np.lib.stride_tricks.as_strided(buf[z * stride:], (sr, sc), (item, ld * item)) for z in range(batch)]
    return [m if trans == 0 else m.T for m in mats]


class _FakeCublas:
    """cublas[SD]gemmStridedBatched and cublasGemmStridedBatchedEx (float16) on host memory."""

    def __init__(self):
        self.calls = []
        self.streams_set = 0

    def cublasSetStream_v2(self, h, s):
        self.streams_set += 1
        return 0

    def _gemm(self, dtype, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch):
        self.calls.append((np.dtype(dtype).name, ta, tb, m, n, k, batch))
        a = _column_major(A, dtype, ta, m, k, lda, sA, batch)
        b = _column_major(B, dtype, tb, k, n, ldb, sB, batch)
        c = _column_major(C, dtype, 0, m, n, ldc, sC, batch)
        for z in range(batch):
            r = alpha[0] * (a[z].astype(np.float64) @ b[z].astype(np.float64))
            if beta[0] != 0:
                r += beta[0] * c[z]
            c[z][...] = r
        return 0

    def cublasSgemmStridedBatched(self, h, *args):
        return self._gemm(np.float32, *args)

    def cublasDgemmStridedBatched(self, h, *args):
        return self._gemm(np.float64, *args)

    def cublasGemmStridedBatchedEx(self, h, ta, tb, m, n, k, alpha, A, at, lda, sA, B, bt, ldb, sB, beta, C, ct,
                                   ldc, sC, batch, compute, algo):
        assert at == bt == ct == 2 and compute == 68  # CUDA_R_16F, CUBLAS_COMPUTE_32F
        return self._gemm(np.float16, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch)


@pytest.mark.cudasim  # the fake cuBLAS reads the operands' memory on the host (a real GPU: segfault)
def test_cublas_calls_against_a_model(monkeypatch):
    from flambeau._kernels.cuda import _cublas, linalg

    fake = _FakeCublas()
    monkeypatch.setattr(linalg, "sim", lambda: False)  # the path a GPU takes
    monkeypatch.setattr(_cublas, "available", lambda: True)
    monkeypatch.setattr(_cublas, "_lib", lambda: (_FakeFFI(), fake))
    monkeypatch.setattr(_cublas, "_handle", lambda i: 0)
    import threading

    monkeypatch.setattr(_cublas, "_tls", threading.local())
    for dtype, tol in ((fl.float32, 1e-5), (fl.float64, 1e-12), (fl.float16, 1e-2)):
        a, ac = _pair(2, 3, 4, 5, dtype=dtype)
        b, bc = _pair(3, 5, 2, dtype=dtype)
        w, wc = _pair(2, 3, 2, 4, dtype=dtype)
        x, xc = _pair(4, 1, dtype=dtype)
        y, yc = _pair(4, 2, dtype=dtype)
        cases = [(lambda a, b, w, x, y: a @ b), (lambda a, b, w, x, y: a @ b.transpose(-1, -2).contiguous().mT),
                 (lambda a, b, w, x, y: w @ a), (lambda a, b, w, x, y: a.mT @ w.mT),
                 (lambda a, b, w, x, y: fl.addmm(x, a[0, 0], b[0], beta=0.5, alpha=2)),
                 (lambda a, b, w, x, y: fl.baddbmm(y, a[0], b, beta=-1)),
                 (lambda a, b, w, x, y: fl.addbmm(y, a[1], b, beta=2, alpha=0.5))]
        for fn in cases:
            n = len(fake.calls)
            want = fn(*(t.double() for t in (a, b, w, x, y))).to(dtype)
            _check(fn(ac, bc, wc, xc, yc), want, rtol=tol, atol=tol)
            assert len(fake.calls) > n
    n = len(fake.calls)
    _check(ac[..., ::2] @ bc[:, ::2], a[..., ::2] @ b[:, ::2], rtol=1e-2, atol=1e-2)  # strided: numba kernel
    assert len(fake.calls) == n
    assert fake.streams_set == 1  # one stream all along: set once (cuBLAS resets its workspace on each set)


@pytest.mark.cudasim  # the fake cuBLAS reads the operands' memory on the host (a real GPU: segfault)
@pytest.mark.parametrize("layer", ["LSTM", "GRU", "RNN"])
def test_recurrent_step_gemms_through_cublas_against_the_cpu(monkeypatch, layer):
    """The recurrent layers' prepared step GEMMs (Note [Step GEMMs]: one ``_cublas.Gemm`` per layer call, one
    reused product buffer) run by the host-memory model of cuBLAS: outputs and every gradient equal the CPU's,
    both directions of a bidirectional layer, two layers."""
    from flambeau._kernels.cuda import _cublas, rnn

    fake = _FakeCublas()
    monkeypatch.setattr(rnn, "sim", lambda: False)  # the step GEMMs as on a GPU; other products stay numba's
    monkeypatch.setattr(rnn, "SEQ_MAX_HIDDEN", 0)  # LSTM's steps too, not its whole-sequence kernels
    monkeypatch.setattr(_cublas, "available", lambda: True)
    monkeypatch.setattr(_cublas, "_lib", lambda: (_FakeFFI(), fake))
    monkeypatch.setattr(_cublas, "_handle", lambda i: 0)
    import threading

    monkeypatch.setattr(_cublas, "_tls", threading.local())
    import flambeau.nn  # noqa: F401

    fl.manual_seed(0)
    make = getattr(fl.nn, layer)
    cpu = make(3, 4, num_layers=2, bidirectional=True).double()
    dev = make(3, 4, num_layers=2, bidirectional=True).double()
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to("cuda")
    x, xc = _pair(5, 2, 3, dtype=fl.float64)
    x.requires_grad_()
    xc.requires_grad_()
    out, outc = cpu(x)[0], dev(xc)[0]
    g, gc = _pair(*out.shape, dtype=fl.float64)
    (out * g).sum().backward()
    (outc * gc).sum().backward()
    _check(outc.detach(), out.detach(), rtol=1e-12, atol=1e-12)
    _check(xc.grad, x.grad, rtol=1e-10, atol=1e-12)
    for p, pc in zip(cpu.parameters(), dev.parameters()):
        _check(pc.grad, p.grad, rtol=1e-10, atol=1e-12)
    steps = 5 * 2 * 2 * 2  # time steps x layers x directions x (forward, backward)
    assert sum(1 for c in fake.calls if c[-1] == 1 and c[4] == 2) >= steps, fake.calls  # (n = batch 2)


# --- cuBLAS (tier 3) ------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cublas_products_match_cpu(monkeypatch):
    from flambeau._kernels.cuda import _cublas

    if not _cublas.available():
        pytest.skip(f"cuBLAS not loadable: {_cublas._state.get('why')} (pip install nvidia-cublas-cu12)")
    calls = []
    real = _cublas.gemm
    monkeypatch.setattr(_cublas, "gemm", lambda *a, **k: calls.append(a[3:5]) or real(*a, **k))
    for dtype, tol in ((fl.float32, 1e-4), (fl.float64, 1e-10), (fl.float16, 2e-2)):
        a, ac = _pair(2, 3, 33, 17, dtype=dtype)
        b, bc = _pair(3, 17, 20, dtype=dtype)
        _check(ac @ bc, (a.double() @ b.double()).to(dtype), rtol=tol, atol=tol)  # one call per outer batch index
        _check(ac[0] @ bc[0], (a[0].double() @ b[0].double()).to(dtype), rtol=tol, atol=tol)  # batch folded into rows
        _check(ac @ bc.transpose(-1, -2).contiguous().transpose(-1, -2), (a.double() @ b.double()).to(dtype),
               rtol=tol, atol=tol)  # transposed operand: no copy
        w, wc = _pair(2, 3, 20, 33, dtype=dtype)
        _check(wc @ ac, (w.double() @ a.double()).to(dtype), rtol=tol, atol=tol)  # batch dims merged: one call
        x, xc = _pair(33, 1, dtype=dtype)
        m, mc = _pair(33, 17, dtype=dtype)
        _check(fl.addmm(xc, mc, bc[0], beta=0.5, alpha=2),
               fl.addmm(x.double(), m.double(), b[0].double(), beta=0.5, alpha=2).to(dtype), rtol=tol, atol=tol)
        z, zc = _pair(3, 20, 17, dtype=dtype)
        _check(fl.baddbmm(zc, wc[0], ac[0], beta=-1),
               fl.baddbmm(z.double(), w[0].double(), a[0].double(), beta=-1).to(dtype), rtol=tol, atol=tol)
        y, yc = _pair(33, 20, dtype=dtype)
        _check(fl.addbmm(yc, ac[0], bc, beta=2, alpha=0.5),
               fl.addbmm(y.double(), a[0].double(), b.double(), beta=2, alpha=0.5).to(dtype), rtol=tol, atol=tol)
    assert calls, "cuBLAS was not called"
    big, bigc = _pair(300, 700)
    _check(bigc @ bigc.t(), big @ big.t(), rtol=1e-3, atol=1e-3)
    fl.cuda.synchronize()


def test_tiled_kernels_on_many_tiles(monkeypatch):
    # Under the simulator products beyond a few outputs take the per-element kernel (Note [GEMMs under the
    # simulator]); here the tiled kernels run a product spanning several tiles in every direction.
    from flambeau._kernels.cuda import linalg

    monkeypatch.setattr(linalg, "_SIM_TILED_OUT", 10**9)
    monkeypatch.setattr(linalg, "_SIM_TILED_K", 10**9)
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(s) for s in ((2, 9, 7), (2, 7, 6), (9, 6)))
    ga, gb, gc = (fl.tensor(v).to("cuda") for v in (a, b, c))
    np.testing.assert_allclose((ga @ gb).cpu().numpy(), a @ b, rtol=1e-12)
    np.testing.assert_allclose(fl.baddbmm(gc, ga, gb, beta=0.5, alpha=2.0).cpu().numpy(), 0.5 * c + 2.0 * (a @ b),
                               rtol=1e-12)


def test_bias_rows_fill_every_row_in_one_launch():
    """Note [Rows copied in one launch]: ``copy_rows`` writes a contiguous bias into every row of a contiguous
    output (what cuBLAS then adds the product to; only a GPU takes the cuBLAS path, so the kernel is checked here
    by itself), and declines, writing nothing, where the operands are otherwise."""
    from flambeau._backends import backend
    from flambeau._kernels.cuda.core import copy_rows as fill_rows

    be = backend("cuda")
    for dtype, shape in ((np.float32, (5, 7)), (np.float64, (2, 3, 4)), (np.float16, (1, 9))):
        bias = RNG.standard_normal(shape[-1]).astype(dtype)
        out = be.empty(shape, np.dtype(dtype))
        assert fill_rows(out, be.from_numpy(bias))
        np.testing.assert_array_equal(be.to_numpy(out), np.broadcast_to(bias, shape))
    out = be.from_numpy(np.zeros((3, 4), np.float32))
    declined = [be.from_numpy(np.ones(3, np.float32)),  # another length
                be.from_numpy(np.ones((1, 4), np.float32)),  # not 1-d
                be.from_numpy(np.ones(4, np.float64)),  # another dtype
                be.from_numpy(np.ones(8, np.float32))[::2]]  # strided
    for bias in declined:
        assert not fill_rows(out, bias)
    assert not fill_rows(be.from_numpy(np.zeros((4, 3), np.int64)), be.from_numpy(np.ones(3, np.int64)))
    np.testing.assert_array_equal(be.to_numpy(out), 0)  # nothing written
