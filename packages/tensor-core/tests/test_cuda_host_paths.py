"""The CUDA operators' host paths on a fake device (``tools/host_overhead.py``: a driver, allocator, cuBLAS
and cuDNN that do nothing), checked without a GPU against what they must compute:

- views made by address (``view_from``) have the geometry and storage offset of the same views on the CPU,
  and hang on the memory's owner, never on a chain of views;
- elementwise launches of C-contiguous operands (Note [Contiguous launches]) pack the same kernel
  parameters as the strided path would;
- cuBLAS's batched GEMMs cover every batch element exactly once with the right addresses, whichever batch
  dim cuBLAS batches over.

Each check runs in a fresh interpreter: the fake device replaces process-wide state. The simulator tier
and the GPU tier run the same operators with data.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import pytest

numba = pytest.importorskip("numba")
pytest.importorskip("cffi")

TOOLS = pathlib.Path(__file__).resolve().parents[3] / "tools"
pytestmark = [
    pytest.mark.skipif(bool(numba.config.ENABLE_CUDASIM), reason="the fake device stands in for a real one"),
    pytest.mark.skipif(not (TOOLS / "host_overhead.py").exists(), reason="needs the repository's tools/"),
]


def _run(body: str, caching_allocator: bool = False) -> None:
    """Run ``body`` in a fresh interpreter on the fake device (``caching_allocator``: allocations through
    flambeau-cuda-alloc's caching allocator over a simulated device, not a counter)."""
    script = (f"import sys\nsys.path.insert(0, {str(TOOLS)!r})\nimport host_overhead\n"
              f"fl = host_overhead.fake_device(caching_allocator={caching_allocator})\n")
    script += textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NUMBA_ENABLE_CUDASIM": "0"})
    assert done.returncode == 0, done.stdout + done.stderr


# cuDNN descriptors numbered from 1 for the graph-API tests (the fake library leaves them NULL): ``live`` holds the
# addresses not yet destroyed, ``kinds`` each one's descriptor type; destroying one twice, or one never made, fails
_NUMBERED_DESCRIPTORS = textwrap.dedent("""
    from flambeau._kernels.cuda import _cudnn, _cudnn_graph as graph
    ffi, lib = _cudnn._state["ffi"], _cudnn._state["lib"]
    live, kinds = set(), {}

    def address(d):
        return int(ffi.cast("uintptr_t", d))

    def create(kind, p):
        kinds[len(kinds) + 1] = kind
        p[0] = ffi.cast("void *", len(kinds))
        live.add(len(kinds))
        return 0

    def destroy(d):
        assert address(d) in live, f"descriptor {address(d)} destroyed twice or never made"
        live.remove(address(d))
        return 0

    lib.cudnnBackendCreateDescriptor, lib.cudnnBackendDestroyDescriptor = create, destroy
""")

# Heuristics (with _NUMBERED_DESCRIPTORS) that list ``listed`` engine configurations, the engine of the ``i``-th
# with numerical note ``note_of(i)`` (None: no note): ``list_engines(listed, note_of)``; ``order`` maps a
# configuration to its place in its list, ``engine_of`` an engine to its configuration's
_LISTED_ENGINES = textwrap.dedent("""
    order, engine_of = {}, {}

    def list_engines(listed, note_of):
        real_get = lib.cudnnBackendGetAttribute

        def get(d, name, kind, requested, count, array):
            if name == graph.HEUR_RESULTS:
                count[0] = listed
                for i in range(min(requested, listed)):
                    order[address(array[i])] = i
                return 0
            if name == graph.ENGINECFG_ENGINE:
                engine_of[address(array[0])] = order[address(d)]
                count[0] = 1
                return 0
            if name == graph.ENGINE_NUMERICAL_NOTE:
                note = note_of(engine_of[address(d)])
                count[0] = int(note is not None)
                if note is not None and requested:
                    array[0] = note
                return 0
            return real_get(d, name, kind, requested, count, array)

        lib.cudnnBackendGetAttribute = get
""")


def test_views_by_address_match_the_cpu():
    _run("""
        from flambeau._backends import backend
        be = backend("cuda")

        def geometry(t):
            if t.device.type == "cpu":
                return tuple(t.shape), t.stride(), t.storage_offset()
            d = t._data
            owner = d.__dict__.get("_fl_owner")
            if owner is not None:  # a view hangs on the memory's owner, at its own address
                assert "_fl_start" not in owner.__dict__, "a view of a view"
                assert d._fl_ptr == owner._fl_ptr + d._fl_start or not d.size
            return tuple(t.shape), t.stride(), t.storage_offset()

        ops = {
            "t": lambda x: x[1].t(), "transpose": lambda x: x.transpose(0, 2), "permute": lambda x: x.permute(2, 0, 1),
            "view": lambda x: x.view(6, 10), "reshape": lambda x: x.reshape(-1), "slice": lambda x: x[1:, ::2, 3:],
            "select": lambda x: x[:, 2], "narrow": lambda x: x.narrow(2, 1, 3), "unsqueeze": lambda x: x.unsqueeze(1),
            "squeeze": lambda x: x[:, :1].squeeze(1), "expand": lambda x: x[:, :1].expand(3, 4, 5),
            "split": lambda x: x.split(2, dim=2)[1], "unbind": lambda x: x.unbind(1)[3],
            "chained": lambda x: x[1:].transpose(1, 2)[:, 1:].reshape(2, 4, 4)[1].t()[2:],
            "view of a sliced view": lambda x: x[2:][0][1:].view(3, 5),
        }
        for name, op in ops.items():
            cpu = fl.arange(60.0).reshape(3, 4, 5)
            dev = fl.empty(3, 4, 5, device="cuda")
            got, want = geometry(op(dev)), geometry(op(cpu))
            assert got == want, (name, got, want)
        # a view op in a loop does not chain its views
        x = fl.empty(8, 8, device="cuda")
        for _ in range(2000):
            x = x.t().unsqueeze(0)[0][1:] if min(x.shape) > 2 else x.t()
        geometry(x)
        x._data.gpu_data  # numba's pointer of the last view: one level down, not 6000
    """)


def test_contiguous_launches_pack_what_the_strided_path_packs():
    _run("""
        import numpy as np
        from flambeau._backends import backend
        from flambeau._kernels.cuda import _direct

        be = backend("cuda")
        packed = []
        real_launch = _direct.Kernel.launch

        def launch(self, config, plan, args):
            buf, _ = plan.slot()
            plan.pack(buf, *args)
            packed.append(bytes(buf))
            return real_launch(self, config, plan, args)

        _direct.Kernel.launch = launch
        x = fl.empty(4, 5, 6, device="cuda")
        y = fl.empty(4, 5, 6, device="cuda")
        b = fl.empty(4, 5, 6, dtype=fl.bool, device="cuda")
        cases = [lambda: x + y, lambda: x * 2.5, lambda: 3 - x, lambda: x.relu(), lambda: x.exp(), lambda: x < y,
                 lambda: x.clamp(0, 1), lambda: fl.where(b, x, y), lambda: fl.lerp(x, y, 0.3), lambda: x.clone(),
                 lambda: fl.addcmul(x, x, y, value=2.0)]
        fast = []
        for case in cases:
            packed.clear()
            case()
            fast.append(list(packed))
        real_flat = be.contiguous_flat
        be.contiguous_flat = lambda arr: None  # every launch through the strided set-up
        for case, want in zip(cases, fast):
            packed.clear()
            case()
            # the output is a fresh allocation on each call: compare all but its address
            assert len(packed) == len(want), (len(packed), len(want))
            for got, exp in zip(packed, want):
                assert len(got) == len(exp)
                assert got[:32] == exp[:32] and got[40:] == exp[40:] or got == exp, "parameters differ"
        be.contiguous_flat = real_flat
    """)


def test_flat_args_pack_as_the_flat_views_they_stand_for():
    """A ``FlatArg`` (the launchers' flat view without a device-array object) packs the bytes the view would:
    of C-contiguous, transposed, sliced and empty arrays; numba's dispatcher gets the view itself."""
    _run("""
        import numpy as np
        from flambeau._backends import backend
        from flambeau._kernels.cuda import _direct

        be = backend("cuda")
        base = fl.empty(4, 5, 6, device="cuda")
        arrays = [base, base.transpose(0, 2), base[1:3, ::2], base[:, :0], fl.empty(7, dtype=fl.float64, device="cuda")]
        for t in arrays:
            a = t._data
            view, arg = be.flat_view(a), be.flat_arg(a)
            assert _direct.arg_key(arg) == _direct.arg_key(view) == (a.dtype, 1, "C")
            plan = _direct.Plan(1, (_direct.numba_type(_direct.arg_key(view)),), "probe")
            bufs = []
            for x in (view, arg):
                buf, _ = plan.slot()
                plan.pack(buf, x)
                bufs.append(bytes(buf))
            assert bufs[0] == bufs[1], (t.shape, t.stride())
            if type(arg) is _direct.FlatArg:
                v = arg.view()
                assert (v.shape, v.strides) == (view.shape, view.strides)
                assert _direct.device_ptr(v) == _direct.device_ptr(view)
        assert type(be.contiguous_flat(base._data)) is _direct.FlatArg
        assert be.contiguous_flat(base.transpose(0, 2)._data) is None
    """)


def test_flat_parts_pack_as_views_at_their_offsets():
    """``flat_parts`` (one allocation for a launch's partial arrays) gives ``FlatArg``s that pack the bytes of
    the views they stand for: each part's own address, size and stride, and that view for numba's dispatcher."""
    _run("""
        import numpy as np
        from flambeau._backends import backend
        from flambeau._kernels.cuda import _direct

        be = backend("cuda")
        for dtype, parts in ((np.float32, 3), (np.float64, 2)):
            arr = be.empty((5 * parts,), dtype)
            plan = _direct.Plan(1, (_direct.numba_type((np.dtype(dtype), 1, "C")),), "probe")
            for i, arg in enumerate(be.flat_parts(arr, parts)):
                view = be.as_strided(arr, (5,), (1,), 5 * i)
                assert _direct.device_ptr(arg) == _direct.device_ptr(arr) + 5 * i * arr.dtype.itemsize
                bufs = []
                for x in (view, arg):
                    buf, _ = plan.slot()
                    plan.pack(buf, x)
                    bufs.append(bytes(buf))
                assert bufs[0] == bufs[1], (dtype, i)
                v = arg.view()
                assert (v.shape, v.strides, _direct.device_ptr(v)) == (view.shape, view.strides,
                                                                        _direct.device_ptr(view))
    """)


def test_batched_gemms_cover_every_batch_element_once():
    _run("""
        import itertools
        import numpy as np
        from flambeau._kernels.cuda import _cublas

        calls = []
        lib = _cublas._state["lib"]

        def sgemm(h, opb, opa, n, m, k, alpha, pb, ldb, sb, pa, lda, sa, beta, pc, ldc, sc, count):
            ffi = _cublas._state["ffi"]
            calls.append((int(ffi.cast("uintptr_t", pa)), sa, int(ffi.cast("uintptr_t", pb)), sb,
                          int(ffi.cast("uintptr_t", pc)), sc, count))
            return 0

        type(lib).cublasSgemmStridedBatched = staticmethod(sgemm)
        B, H, T, D = 3, 5, 4, 2
        qkv = fl.empty(B, T, 3 * H * D, device="cuda")
        q, k, _ = qkv.split(H * D, dim=2)
        q, k = (z.view(B, T, H, D).transpose(1, 2) for z in (q, k))  # (B, H, T, D) views of one buffer
        w = fl.empty(7, D, T, device="cuda")
        cases = ((q, k.transpose(-2, -1)), (q[:, :1], k.transpose(-2, -1)), (w[:, None], w[None, :2].mT))
        for case, (a, b) in enumerate(cases):
            calls.clear()
            out = a @ b
            item = 4
            seen = []
            for pa, sa, pb, sb, pc, sc, count in calls:
                seen += [(pa + z * sa * item, pb + z * sb * item, pc + z * sc * item) for z in range(count)]
            batch = tuple(out.shape[:-2])
            want = []
            for idx in itertools.product(*map(range, batch)):
                ai = tuple(i if n > 1 else 0 for i, n in zip(idx[-(a.ndim - 2):], a.shape[:-2]))
                bi = tuple(i if n > 1 else 0 for i, n in zip(idx[-(b.ndim - 2):], b.shape[:-2]))
                want.append((a[ai].data_ptr(), b[bi].data_ptr(), out[idx].data_ptr()))
            assert sorted(seen) == sorted(want), (batch, len(calls))
            if case == 0:  # (batch, heads) views that merge into no one dim: cuBLAS batches over the longer
                assert [c[-1] for c in calls] == [H] * B, calls
    """)


_RECORD_SGEMM = textwrap.dedent("""
    from flambeau._kernels.cuda import _cublas
    calls = []
    lib, ffi = _cublas._state["lib"], _cublas._state["ffi"]

    def sgemm(h, opb, opa, n, m, k, alpha, pb, ldb, sb, pa, lda, sa, beta, pc, ldc, sc, count):
        ptr = lambda p: int(ffi.cast("uintptr_t", p))
        calls.append(dict(ops=(opb, opa), n=n, m=m, k=k, scalars=(ffi.cast("float *", alpha)[0],
                          ffi.cast("float *", beta)[0]), pb=ptr(pb), ldb=ldb, sb=sb, pa=ptr(pa), lda=lda, sa=sa,
                          pc=ptr(pc), ldc=ldc, sc=sc, count=count))
        return 0

    type(lib).cublasSgemmStridedBatched = staticmethod(sgemm)
""")  # (cuBLAS's float32 GEMMs, recorded)


def test_prepared_gemms_call_cublas_as_gemm_does():
    """A prepared GEMM (``_cublas.prepare``, the recurrent layers' step products) passes cuBLAS what
    ``_cublas.gemm`` passes for the same operands, whichever of them is transposed."""
    _run(_RECORD_SGEMM + textwrap.dedent("""
        from flambeau._backends import backend
        from flambeau._kernels.cuda._launch import elem_strides, stream
        be = backend("cuda")
        M, K, N = 3, 5, 7
        a_rows, b_rows = be.empty((M, K), "float32"), be.empty((K, N), "float32")
        a_cols, b_cols = be.empty((K, M), "float32"), be.empty((N, K), "float32")
        t = lambda x: be.as_strided(be.flat_view(x), x.shape[::-1], elem_strides(x)[::-1], 0)
        for a in (a_rows, t(a_cols)):
            for b in (b_rows, t(b_cols)):
                out = be.empty((M, N), "float32")
                calls.clear()
                A, B = elem_strides(a), elem_strides(b)
                assert _cublas.gemm(out, a, b, ((), *A, 0), ((), *B, 0), (), M, N, K, 1.0, 0.0, be, stream())
                _cublas.prepare("float32", A, B, M, N, K, stream())(be.data_ptr(a), be.data_ptr(b), be.data_ptr(out))
                assert len(calls) == 2 and calls[0] == calls[1], calls
        assert _cublas.prepare("float16", (K, 1), (N, 1), M, N, K, stream()) is None  # as gemm: not this way
        assert _cublas.prepare("float32", (2, 2), (N, 1), M, N, K, stream()) is None  # a layout cuBLAS cannot read
    """))


def test_recurrent_step_gemms_read_every_step_once_in_order():
    """Each time step's GEMM of an LSTM, GRU and Elman layer (Note [Step GEMMs] in the CUDA rnn kernels)
    reads that step's rows, in the direction's order, forward and backward, and the recurrent weight (LSTM's
    step loop: its hidden sizes above Note [Whole-sequence LSTM kernels]'s limit)."""
    _run(_RECORD_SGEMM + textwrap.dedent("""
        import flambeau.nn  # noqa: F401
        from flambeau._kernels.cuda import rnn
        rnn.SEQ_MAX_HIDDEN = 0
        T, B, I, H = 4, 3, 7, 5
        x = fl.empty(T, B, I, device="cuda", requires_grad=True)
        for make, gates in ((fl.nn.LSTM, 4), (fl.nn.GRU, 3), (fl.nn.RNN, 1)):
            for bidirectional in (False, True):
                layer = make(I, H, bidirectional=bidirectional).to("cuda")
                h0 = fl.empty(1 + bidirectional, B, H, device="cuda")
                calls.clear()
                out = layer(x, h0 if make is not fl.nn.LSTM else (h0, fl.empty_like(h0)))[0]
                forward = [c for c in calls if c["m"] == B and c["count"] == 1]
                calls.clear()
                out.sum().backward()
                backward = [c for c in calls if c["m"] == B and c["count"] == 1]
                for d in range(1 + bidirectional):
                    w_hh = getattr(layer, "weight_hh_l0" + ("_reverse" if d else ""))
                    steps = [c for c in forward if c["pb"] == w_hh.data_ptr()]
                    assert len(steps) == T and all(c["k"] == H and c["n"] == gates * H for c in steps), steps
                    rows = [c["pa"] for c in steps]
                    assert rows[0] == h0[d].data_ptr()  # then the direction's previous outputs, step by step
                    order = range(T - 1) if not d else range(T - 1, 0, -1)
                    assert rows[1:] == [out[t, :, d * H:].data_ptr() for t in order] or bidirectional, rows
                    assert len({c["pc"] for c in steps}) == 1  # one reused buffer
                    back = [c for c in backward if c["pb"] == w_hh.data_ptr()]
                    assert len(back) == T and all(c["k"] == gates * H and c["n"] == H for c in back), back
                    step = -1 if not d else 1  # the gradients of the pre-activations, from the last step back
                    gaps = {q["pa"] - p["pa"] for p, q in zip(back, back[1:])}
                    assert gaps == {step * B * gates * H * 4}, gaps
    """))


def test_recurrent_step_launchers_check_the_arrays_their_keys_rest_on():
    """A layer's step launcher works its launch key out once (Note [Step GEMMs]): it checks first that every array
    its loop passes has the layer's dtype, and refuses otherwise."""
    _run("""
        import types

        import numpy as np
        import pytest
        from flambeau._backends import backend
        from flambeau._kernels.cuda import rnn

        be = backend("cuda")
        f32, f64 = be.empty((6,), np.float32), be.empty((6,), np.float64)
        prepared = types.SimpleNamespace(flat_out=f32)  # a step GEMM writing one product buffer
        rnn._stepper("rnn_fwd", np.dtype(np.float32), 6, prepared, (f32, f32))
        with pytest.raises(RuntimeError, match="expected arrays of float32, got one of float64"):
            rnn._stepper("rnn_fwd", np.dtype(np.float32), 6, prepared, (f32, f64))
        # the whole-sequence kernels' launches are keyed by their arrays' dtypes too (checked at every launch)
        with pytest.raises(RuntimeError, match="expected arrays of float32, got one of float64"):
            rnn._launch_sequence("lstm_seq_fwd", np.dtype(np.float32), 1, 6, f32, f64, 3, True)
    """)


def test_clip_grad_norm_takes_three_launches_over_every_chunk():
    """clip_grad_norm_ of many CUDA gradients (Note [Fused gradient clipping] in flambeau.nn): one launch of
    per-chunk partial norms, one to finish, one to scale, the address table covering every gradient's chunks
    once; gradients the fused path does not take (strided) go through the tensor operators."""
    _run("""
        import numpy as np
        import flambeau.nn  # noqa: F401
        from flambeau._kernels.cuda import _direct
        from flambeau.nn.utils import _cuda_clip
        from flambeau.optim import _cuda_kernels

        launched, tables = [], []
        real_launch, real_upload = _direct.Kernel.launch, _cuda_kernels._upload

        def launch(self, config, plan, args):
            launched.append(self.dispatcher.py_func.__name__)
            return real_launch(self, config, plan, args)

        def upload(host):
            tables.append(host.copy())
            return real_upload(host)

        _direct.Kernel.launch = launch
        _cuda_kernels._upload = upload
        shapes = [(3, 4), (_cuda_clip.CHUNK + 5,), (1,), (7,), (2 * _cuda_clip.CHUNK,)] + [(5,)] * 7
        params = [fl.empty(*s, device="cuda", requires_grad=True) for s in shapes]
        for p in params:
            p.grad = fl.empty(*p.shape, device="cuda")
        total = fl.nn.utils.clip_grad_norm_(params, 1.0)
        assert launched == ["partials", "finish", "scale"], launched
        assert total.device.type == "cuda" and total.ndim == 0
        rows = len(params)
        for host in tables:  # norm and scale: the same table
            ptrs, sizes = host[:rows], host[rows:2 * rows]
            chunks = (len(host) - 2 * rows) // 2
            chunk_row, chunk_start = host[2 * rows:2 * rows + chunks], host[2 * rows + chunks:]
            assert list(ptrs) == [p.grad.data_ptr() for p in params] and list(sizes) == [p.numel() for p in params]
            covered = sorted(zip(chunk_row, chunk_start))
            want = sorted((r, s) for r, p in enumerate(params) for s in range(0, p.numel(), _cuda_clip.CHUNK))
            assert covered == want
        launched.clear()
        params[0].grad = fl.empty(4, 3, device="cuda").t()  # strided: the tensor operators
        fl.nn.utils.clip_grad_norm_(params, 1.0)
        assert "partials" not in launched and "scale" not in launched and len(launched) > 3, launched
    """)


def test_gradients_become_grad_without_a_copy_when_nothing_else_holds_them():
    """The engine's AccumulateGrad takes a device gradient as ``.grad`` when no other array can reach its
    memory (``owns_memory_alone``), and copies it otherwise, as on the CPU."""
    _run("""
        import flambeau.autograd  # noqa: F401
        clones = []
        real_clone = fl.Tensor.clone
        fl.Tensor.clone = lambda self, *a, **k: clones.append(1) or real_clone(self, *a, **k)
        w = fl.empty(4, 4, device="cuda", requires_grad=True)
        (w * 2).sum().backward()  # a fresh allocation: taken as it is
        assert not clones, clones
        w.grad = None
        (w.view(16) * 2).view(4, 4).sum().backward()  # a view of a fresh allocation: taken too
        assert not clones, clones
        w.grad = None
        given = fl.empty(4, 4, device="cuda")
        w.backward(given)  # the caller holds the gradient: copied
        assert len(clones) == 1 and w.grad._data is not given._data

        from flambeau._backends import backend
        be = backend("cuda")
        t = fl.empty(4, 4, device="cuda")  # its array: held by the tensor and its storage
        assert be.owns_memory_alone(t._data)
        v = be.view_from(t._data, t._data, (16,), (4,), 0, "float32")
        assert not be.owns_memory_alone(t._data)  # the view reaches it
        assert not be.owns_memory_alone(v)  # and the tensor reaches the view's memory
        del t
        assert be.owns_memory_alone(v)
        b = be.empty((4,), "float32")
        b.gpu_data  # numba's pointer: numba's views share it unseen
        assert not be.owns_memory_alone(b)
    """)


def test_recurrent_bias_gradients_never_share_memory():
    """The two bias gradients of a recurrent layer are equal, but each must be its own memory: the engine
    takes a device gradient as ``.grad`` without a copy, and ``clip_grad_norm_`` then scaled a shared one
    twice (the LSTM model trained differently on an H100 than on the CPU; the simulator copies every
    gradient, so only a real or fake device shows it)."""
    _run("""
        import numpy as np
        import flambeau.nn  # noqa: F401
        x = fl.empty(3, 2, 4, device="cuda")
        for layer in (fl.nn.LSTM(4, 5, num_layers=2), fl.nn.GRU(4, 5), fl.nn.RNN(4, 5)):
            layer = layer.to("cuda")
            layer(x)[0].sum().backward()
            for suffix in ("l0", "l1") if layer.num_layers == 2 else ("l0",):
                b_ih, b_hh = getattr(layer, "bias_ih_" + suffix), getattr(layer, "bias_hh_" + suffix)
                assert b_ih.grad.data_ptr() != b_hh.grad.data_ptr(), (type(layer).__name__, suffix)

        # and should a kernel hand back one array for both, the engine copies one of them
        from flambeau._ops.rnn import RNN_LAYER_BACKWARD
        cuda_backward = RNN_LAYER_BACKWARD.kernels["cuda"]

        def shared(*args):
            *rest, g_b_ih, _ = cuda_backward(*args)
            return (*rest, g_b_ih, g_b_ih)

        RNN_LAYER_BACKWARD.kernels["cuda"] = shared
        rnn = fl.nn.RNN(4, 5).to("cuda")
        rnn(x)[0].sum().backward()
        assert rnn.bias_ih_l0.grad.data_ptr() != rnn.bias_hh_l0.grad.data_ptr()
    """)


def test_cudnn_math_type_follows_allow_tf32():
    """float32 convolutions through the legacy calls ask cuDNN for CUDNN_DEFAULT_MATH (TF32 allowed) while
    ``flambeau.backends.cudnn.allow_tf32`` is True, as torch's default, and CUDNN_FMA_MATH when it is
    False; float64 always FMA. Plans are kept per math type, so flipping the flag takes effect."""
    _run("""
        import flambeau.nn.functional as F
        from flambeau._kernels.cuda import _cudnn
        _cudnn._GRAPH_API = False
        lib = _cudnn._state["lib"]
        seen = []
        lib.cudnnSetConvolutionMathType = lambda conv, math_type: seen.append(math_type) or 0
        x, w = fl.empty(1, 2, 5, 5, device="cuda"), fl.empty(3, 2, 3, 3, device="cuda")
        assert fl.backends.cudnn.allow_tf32  # torch's default
        F.conv2d(x, w)
        assert seen == [_cudnn.CUDNN_DEFAULT_MATH], seen
        fl.backends.cudnn.allow_tf32 = False
        F.conv2d(x, w)
        assert seen[1:] == [_cudnn.CUDNN_FMA_MATH], seen
        F.conv2d(x.double(), w.double())
        fl.backends.cudnn.allow_tf32 = True
        F.conv2d(x.double(), w.double())  # float64: FMA (one plan for both settings would be fine too)
        assert set(seen[2:]) == {_cudnn.CUDNN_FMA_MATH}, seen
    """)


def test_cudnn_graph_plans_pack_each_call_s_pointers():
    """Through cuDNN's graph API (Note [cuDNN's graph API]) a convolution's forward and its two gradients each
    execute a plan with a variant pack of the operands' unique ids (x 1, w 2, y 3) and their device pointers."""
    _run("""
        import flambeau.nn.functional as F
        import host_overhead
        from flambeau._kernels.cuda import _cudnn_graph as graph
        packs = host_overhead._FakeLibrary.PACKS = []
        x = fl.empty(2, 4, 6, 6, device="cuda").requires_grad_()
        w = fl.empty(3, 4, 3, 3, device="cuda").requires_grad_()
        gy = fl.empty(2, 3, 6, 6, device="cuda")
        packs.clear()
        y = F.conv2d(x, w, padding=1)
        y.backward(gy)
        assert [name for name, _ in packs] == [graph.PACK_UIDS, graph.PACK_POINTERS] * 3, packs
        got = {tuple(packs[i][1]): tuple(packs[i + 1][1]) for i in range(0, 6, 2)}
        ptr = lambda t: t.data_ptr()
        assert got == {(1, 2, 3): (ptr(x), ptr(w), ptr(y)),  # forward
                       (2, 3, 1): (ptr(w), ptr(gy), ptr(x.grad)),  # the input's gradient
                       (1, 3, 2): (ptr(x), ptr(gy), ptr(w.grad))}, got  # the weight's
    """)


@pytest.mark.parametrize("case", ["tf32 refused", "tf32 allowed", "nondeterministic refused"])
def test_cudnn_graph_engines_are_filtered_as_torch_does(case):
    """An engine whose numerical notes say it computes otherwise than asked (TF32 tensor cores for float32 with
    ``allow_tf32`` False, non-deterministic under deterministic algorithms) is skipped; with none left the
    legacy calls take the convolution."""
    _run(f"""
        import flambeau.nn.functional as F
        import host_overhead
        from flambeau._kernels.cuda import _cudnn_graph as graph
        calls, case = host_overhead._CALLS, {case!r}
        notes = host_overhead._FakeLibrary.ENGINE_NOTES
        if case.startswith("tf32"):
            notes[:] = [graph.NOTE_TENSOR_CORE]
            fl.backends.cudnn.allow_tf32 = case == "tf32 allowed"
        else:
            notes[:] = [graph.NOTE_NONDETERMINISTIC]
            fl.use_deterministic_algorithms(True)
        calls.clear()
        F.conv2d(fl.empty(1, 2, 5, 5, device="cuda"), fl.empty(3, 2, 3, 3, device="cuda"))
        by_graph = case == "tf32 allowed"
        assert calls["cudnnBackendExecute"] == by_graph and calls["cudnnConvolutionForward"] == (not by_graph), calls
    """)


def test_cudnn_graph_variant_packs_are_kept_by_pointers():
    """Note [Variant packs kept]: a call with the pointers of an earlier one executes that call's variant pack (no
    pack is made); new pointers make a new pack; a plan keeps at most ``_PACKS_KEPT``, the oldest destroyed first,
    and the rest with the plan."""
    _run(_NUMBERED_DESCRIPTORS + textwrap.dedent("""
        import flambeau.nn.functional as F
        executed = []
        lib.cudnnBackendExecute = lambda h, plan, pack: executed.append(address(pack)) or 0
        graph._PACKS_KEPT = 3
        x, w = fl.empty(1, 2, 5, 5, device="cuda"), fl.empty(3, 2, 3, 3, device="cuda")
        outs = [F.conv2d(x, w) for _ in range(2)]  # two outputs alive: two pointer triples
        F.conv2d(x, w)
        (plan,) = [plan for plan in _cudnn._PLANS.values() if getattr(plan, "graph", False)]
        assert len(plan.packs) == 3 and len(set(executed)) == 3, (plan.packs, executed)
        ptr = lambda t: t.data_ptr()
        before = len(live)
        _cudnn._run("forward", x._data.dtype, (1, 2, 5, 5), (3, 2, 3, 3), (1, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1,
                    x._data, w._data, outs[0]._data)  # the first call's pointers again: its pack
        assert executed[-1] == executed[0] and len(live) == before, executed
        y = fl.empty(1, 3, 3, 3, device="cuda")
        _cudnn._run("forward", x._data.dtype, (1, 2, 5, 5), (3, 2, 3, 3), (1, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1,
                    x._data, w._data, y._data)  # a fourth triple: the oldest pack goes
        kept = {address(pack) for pack in plan.packs.values()}
        assert len(kept) == 3 and executed[0] not in kept and executed[0] not in live and len(live) == before
        assert (ptr(x), ptr(w), ptr(y), 0) in plan.packs
        plan.close()
        assert not plan.packs
    """))


def test_cudnn_graph_takes_an_acceptable_engine_listed_after_the_sixteenth():
    """The heuristics' whole list is asked for, as torch asks: where the first twenty configurations of the instant
    mode are refused (TF32 tensor cores for float32 without TF32) and the twenty-first is not, that one runs, not
    the fallback list's (the first sixteen alone sent ResNet-18's convolutions to cuDNN's legacy kernels on an
    H100)."""
    _run(_NUMBERED_DESCRIPTORS + _LISTED_ENGINES + textwrap.dedent("""
        import flambeau.nn.functional as F
        listed = 24
        list_engines(listed, lambda i: graph.NOTE_TENSOR_CORE if i < 20 else None)  # the first twenty use TF32
        fl.backends.cudnn.allow_tf32 = False
        F.conv2d(fl.empty(1, 2, 5, 5, device="cuda"), fl.empty(3, 2, 3, 3, device="cuda"))
        (plan,) = [plan for plan in _cudnn._PLANS.values() if getattr(plan, "graph", False)]
        assert list(kinds.values()).count(graph.ENGINEHEUR) == 1  # the instant list had one: no fallback asked for
        assert sorted(order.values()) == list(range(listed))  # every configuration was asked for
        assert max(engine_of.values()) == 20  # the first one without tensor cores was taken
    """))


def test_cudnn_benchmark_mode_keeps_the_fastest_engine():
    """Note [cuDNN benchmark mode]: with ``backends.cudnn.benchmark`` a configuration's first call times the engines
    that compute as asked, on its own pointers, and keeps the fastest (the fake's executions sleep: the third
    configuration's plan is the fastest, a refused one faster still is never run); the others' descriptors are
    destroyed; the flag is part of the plan's key, and without it the heuristics' first runs."""
    _run(_NUMBERED_DESCRIPTORS + _LISTED_ENGINES + textwrap.dedent("""
        import time
        import flambeau.nn.functional as F
        config_of, ran = {}, []
        delay = {0: 0.004, 1: 0.0001, 2: 0.0005, 3: 0.002}  # seconds an execution of each configuration's plan takes
        list_engines(4, lambda i: graph.NOTE_DOWN_CONVERT if i == 1 else None)  # the second narrows its inputs
        real_set = lib.cudnnBackendSetAttribute

        def set_attribute(d, name, kind, n, values):
            if name == graph.PLAN_ENGINE_CONFIG:
                config_of[address(d)] = order[address(values[0])]
            return real_set(d, name, kind, n, values)

        def execute(h, plan, pack):
            ran.append(config_of[address(plan)])
            time.sleep(delay[config_of[address(plan)]])
            return 0

        lib.cudnnBackendSetAttribute, lib.cudnnBackendExecute = set_attribute, execute
        x, w = fl.empty(1, 2, 5, 5, device="cuda"), fl.empty(3, 2, 3, 3, device="cuda")

        def taken():
            (plan,) = [p for p in _cudnn._PLANS.values() if getattr(p, "graph", False) and p.plan is not None]
            return config_of[address(plan.plan)]

        fl.backends.cudnn.benchmark = True
        F.conv2d(x, w)
        assert taken() == 2 and 1 not in ran, (taken(), ran)
        assert ran[-1] == 2 and len(ran) > 4, ran  # every candidate timed, then the call itself
        alive = [kinds[d] for d in live]
        assert alive.count(graph.EXECUTION_PLAN) == alive.count(graph.ENGINE) == alive.count(graph.ENGINECFG) == 1
        fl.backends.cudnn.benchmark = False
        _cudnn._PLANS.clear()  # (its descriptors stay alive: this test no longer counts them)
        ran.clear()
        F.conv2d(x, w)
        assert taken() == 0 and ran == [0], ran  # the heuristics' first, untimed
    """))


def test_cudnn_graph_failure_hands_the_configuration_to_the_legacy_calls():
    """A plan of the graph API whose execution fails is replaced by the legacy calls' plan for good: the call
    and the later ones of that configuration run ``cudnnConvolutionForward``."""
    _run("""
        import flambeau.nn.functional as F
        import host_overhead
        from flambeau._kernels.cuda import _cudnn
        calls, lib = host_overhead._CALLS, _cudnn._state["lib"]
        lib.cudnnBackendExecute = lambda *args: calls.update(["cudnnBackendExecute"]) or 5000  # EXECUTION_FAILED
        x, w = fl.empty(1, 2, 5, 5, device="cuda"), fl.empty(3, 2, 3, 3, device="cuda")
        calls.clear()
        F.conv2d(x, w)
        F.conv2d(x, w)
        assert calls["cudnnBackendExecute"] == 1 and calls["cudnnConvolutionForward"] == 2, calls
    """)


def test_cudnn_graph_descriptors_are_destroyed_once_and_closed_plans_never_stay_cached():
    """A graph plan keeps the descriptors of its one engine configuration (the refused candidates' and the unused
    configurations' are destroyed at once); a refused graph leaves none alive; a plan whose execution fails is
    closed and out of the cache even when the legacy calls cannot take its configuration either (the numba
    kernels then do); no descriptor is destroyed twice."""
    _run(_NUMBERED_DESCRIPTORS + textwrap.dedent("""
        import flambeau.nn.functional as F
        import host_overhead
        real_get = lib.cudnnBackendGetAttribute

        def get(d, name, kind, requested, count, array):
            rc = real_get(d, name, kind, requested, count, array)
            if name == graph.HEUR_RESULTS:
                count[0] = 2  # two configurations: the first one is taken
            return rc

        lib.cudnnBackendGetAttribute = get
        x, w = fl.empty(1, 2, 5, 5, device="cuda"), fl.empty(3, 2, 3, 3, device="cuda")
        F.conv2d(x, w)
        # 3 tensors, the convolution, the operation, its graph, the instant heuristics, one configuration, its
        # engine, its execution plan and the call's variant pack (kept for the next call with its pointers)
        assert len(live) == 11, len(live)
        plans = [plan for plan in _cudnn._PLANS.values() if getattr(plan, "graph", False)]
        assert len(plans) == 1
        host_overhead._FakeLibrary.ENGINE_NOTES[:] = [graph.NOTE_DOWN_CONVERT]  # every engine refused
        F.conv2d(fl.empty(1, 2, 6, 6, device="cuda"), w)
        assert len(live) == 11, len(live)  # the refused graph left nothing alive
        host_overhead._FakeLibrary.ENGINE_NOTES[:] = []
        lib.cudnnBackendExecute = lambda *args: 5000  # the plan's execution fails ...
        lib.cudnnGetConvolutionForwardAlgorithm_v7 = lambda *args: 3000  # ... and the legacy calls refuse too
        F.conv2d(x, w)
        assert not live and plans[0].plan is None, live  # closed, and no longer cached:
        assert not [plan for plan in _cudnn._PLANS.values() if getattr(plan, "graph", False)]
    """))


def test_cudnn_graph_workspace_out_of_memory_hands_over_to_the_leanest_legacy_algorithm():
    """Note [cuDNN workspaces]: where a graph plan's workspace cannot be allocated when it runs, the legacy calls'
    usable algorithm of least workspace takes the call and the configuration (the graph plan closed)."""
    _run("""
        import numpy as np
        import flambeau.nn.functional as F
        import host_overhead
        from flambeau._backends import backend
        from flambeau._kernels.cuda import _cudnn, _cudnn_graph as graph
        calls, lib = host_overhead._CALLS, _cudnn._state["lib"]
        real_get, be = lib.cudnnBackendGetAttribute, backend("cuda")
        real_empty = be.empty

        def get(d, name, kind, requested, count, array):
            rc = real_get(d, name, kind, requested, count, array)
            if name == graph.PLAN_WORKSPACE_SIZE:
                array[0] = 1 << 20  # the graph plan's workspace: a MiB
            return rc

        def empty(shape, dtype, *args):
            if tuple(shape) == (1 << 20,) and np.dtype(dtype) == np.uint8:
                raise MemoryError("CUDA out of memory: tried to allocate 1 MiB")
            return real_empty(shape, dtype, *args)

        lib.cudnnBackendGetAttribute, be.empty = get, empty
        calls.clear()
        F.conv2d(fl.empty(1, 2, 5, 5, device="cuda"), fl.empty(3, 2, 3, 3, device="cuda"))
        assert calls["cudnnConvolutionForward"] == 1 and not calls["cudnnBackendExecute"], calls
        (plan,) = [plan for key, plan in _cudnn._PLANS.items() if key[0] == "forward"]
        assert not plan.graph and plan.nbytes == 0  # the legacy calls' leanest (the fake's: no workspace)
    """)


def test_depthwise_convolutions_follow_the_switch():
    """Depthwise float32 convolutions, forward and both gradients, go to cuDNN (``DEPTHWISE_BY_CUDNN``, measured
    faster on an H100 than flambeau's direct kernels); with the switch off they run the direct kernels, and other
    grouped convolutions still go to cuDNN."""
    _run("""
        import flambeau.nn.functional as F
        from flambeau._kernels.cuda import _cudnn, conv
        import host_overhead
        calls = host_overhead._CALLS

        def cudnn_calls(x, w, groups):
            calls.clear()
            xl, wl = x.requires_grad_(), w.requires_grad_()
            F.conv2d(xl, wl, padding=1, groups=groups).sum().backward()
            return sum(n for name, n in calls.items() if name.startswith(("cudnnConvolution", "cudnnBackendExecute")))

        def pair(c, cg, o):
            return fl.empty(2, c, 6, 6, device="cuda"), fl.empty(o, cg, 3, 3, device="cuda")

        assert conv.DEPTHWISE_BY_CUDNN
        assert cudnn_calls(*pair(4, 1, 4), groups=4) == 3  # depthwise: forward, data, filter
        conv.DEPTHWISE_BY_CUDNN = False
        assert cudnn_calls(*pair(4, 1, 4), groups=4) == 0
        assert cudnn_calls(*pair(4, 1, 8), groups=4) == 0  # depthwise with a channel multiplier
        assert cudnn_calls(*pair(4, 2, 4), groups=2) == 3  # grouped, not depthwise
    """)


def test_keyed_launches_keep_their_contract_through_training_steps():
    """``launch_keyed``'s callers promise that equal keys mean equal argument types: through two training
    steps of every model of benchmarks/train.py, each keyed launch's plan is the one its arguments'
    own types select (batch norm on flambeau's kernels, not cuDNN's: Note [Batch norm through cuDNN]). And
    every launch goes the direct way: none falls back to numba's dispatcher (~100 µs on a GPU's host), as
    the launches given the device's error flag did while its class was not registered."""
    _run(f"""
        sys.path.insert(0, {str(TOOLS.parent / "benchmarks")!r})
        import numpy as np
        import train
        from flambeau._kernels.cuda import _cudnn_bn, _direct

        _cudnn_bn.forward = _cudnn_bn.backward = lambda *args: None
        checked = []
        real = _direct.Kernel.launch_keyed

        def launch_keyed(self, config, key, args):
            real(self, config, key, args)
            assert self._keyed[key] is self.plan(args), (self.dispatcher.py_func.__name__, key)
            checked.append(key)

        _direct.Kernel.launch_keyed = launch_keyed
        dispatched, real_launch = [], _direct.Kernel.launch

        def launch(self, config, plan, args):
            if plan is None:
                dispatched.append(self.dispatcher.py_func.__name__)
            else:
                real_launch(self, config, plan, args)

        _direct.Kernel.launch = launch
        for name, spec in train.MODELS.items():
            model = spec.build(fl).to("cuda")
            x, y = spec.make_batch(np.random.default_rng(0))
            opt = getattr(fl.optim, spec.optimizer)(model.parameters(), **spec.optimizer_args)
            step = train.train_step(fl, spec, model, opt, fl.from_numpy(x).to("cuda"), fl.from_numpy(y).to("cuda"))
            step()
            step()
        assert len(checked) > 1000, len(checked)
        assert not dispatched, sorted(set(dispatched))
        # the paper's sizes take other host paths: rows split over blocks (one allocation for their partials),
        # column tiles, multi-chunk optimizer tables (Table 1's two convolutional models of modest parameters)
        import host_overhead

        before = len(checked)
        for name in ("resnet50", "mobilenet_v2"):
            step = host_overhead.paper_step(fl, name)
            step()
            step()
        assert len(checked) - before > 1000, len(checked) - before
        assert not dispatched, sorted(set(dispatched))
    """)


def test_training_steps_after_the_first_make_no_raw_allocation():
    """The issue's promise, at the sizes of benchmarks/train.py (the simulator tier's models are too small to
    show it) and through the caching allocator: after the first training step, no step of any of the seven
    models makes a raw device allocation, and each step ends with as much memory allocated as the last.
    Optimizer state taken from the activations' cache (Note [Optimizer state in a memory pool of its own])
    made the second step allocate; address tables kept by content (flambeau-nn's ``_upload``) made the
    allocated memory grow step after step, and a raw allocation come now and then."""
    _run(f"""
        sys.path.insert(0, {str(TOOLS.parent / "benchmarks")!r})
        import numpy as np
        import train

        for name, spec in train.MODELS.items():
            model = spec.build(fl).to("cuda")
            x, y = spec.make_batch(np.random.default_rng(0))
            opt = getattr(fl.optim, spec.optimizer)(model.parameters(), **spec.optimizer_args)
            step = train.train_step(fl, spec, model, opt, fl.from_numpy(x).to("cuda"), fl.from_numpy(y).to("cuda"))
            raw, allocated = [], []
            for _ in range(6):
                before = fl.cuda.memory_stats()["num_device_alloc"]
                step()
                raw.append(fl.cuda.memory_stats()["num_device_alloc"] - before)
                allocated.append(fl.cuda.memory_allocated())
            assert raw[0] > 0 and raw[1:] == [0] * 5, (name, raw)
            assert allocated[1:] == [allocated[1]] * 5, (name, allocated)
            del model, opt, step
    """, caching_allocator=True)


def test_training_steps_at_gpu_sizes_make_no_raw_allocation_after_the_first():
    """The same at the GPU sizes of benchmarks/gpu.py and for Table 1's GNMT (Adam), whose caches are
    fuller: best fit in the large pool made the GPU-size ResNet-18 allocate a 32 MiB gradient at its second
    step (Note [First fit in segment order] in flambeau-cuda-alloc), and the optimizers' uploads, taken from
    the common cache, made GNMT allocate at its second step, the GPT at its third and MobileNetV2 at its
    seventh (Note [Uploaded tables in a pool of their own] in flambeau-nn)."""
    _run(f"""
        sys.path.insert(0, {str(TOOLS.parent / "benchmarks")!r})
        import host_overhead

        steps = [(name, lambda name=name: host_overhead.train_step(fl, name, gpu_size=True), 8)
                 for name in ("resnet18", "mobilenet_v2", "gpt")]
        steps.append(("gnmt", lambda: host_overhead.paper_step(fl, "gnmt"), 4))
        for name, make, count in steps:
            step = make()
            raw = []
            for _ in range(count):
                before = fl.cuda.memory_stats()["num_device_alloc"]
                step()
                raw.append(fl.cuda.memory_stats()["num_device_alloc"] - before)
            assert raw[0] > 0 and raw[1:] == [0] * (count - 1), (name, raw)
            del step
            fl.cuda.empty_cache()  # the next model starts from an empty cache, as on its own
    """, caching_allocator=True)


def test_optimizer_state_lives_in_a_pool_of_its_own():
    """SGD's momentum buffers and Adam's moments of CUDA parameters are allocated in segments of the optimizer's
    own memory pool (Note [Optimizer state in a memory pool of its own]); the parameters and the gradients are
    not, and a second optimizer gets another pool. The fused updates' uploaded tables live in a pool of their
    own, one for all optimizers (Note [Uploaded tables in a pool of their own])."""
    _run("""
        from flambeau._backends import backend
        from flambeau.optim import _cuda_kernels

        def pool_of(t):
            address = t if isinstance(t, int) else t.data_ptr()
            for segment in fl.cuda.memory_snapshot():
                if segment["address"] <= address < segment["address"] + segment["total_size"]:
                    return segment["segment_pool_id"]
            raise AssertionError("no segment holds the tensor")

        pools = []
        for make, keys in ((lambda ps: fl.optim.SGD(ps, lr=0.1, momentum=0.9), ("momentum_buffer",)),
                           (lambda ps: fl.optim.Adam(ps), ("exp_avg", "exp_avg_sq"))):
            model = fl.nn.Sequential(fl.nn.Linear(300, 200), fl.nn.Linear(200, 1)).to("cuda")
            opt = make(model.parameters())
            model(fl.empty(8, 300, device="cuda")).sum().backward()
            opt.step()
            for p in model.parameters():
                assert pool_of(p) == (0, 0) and pool_of(p.grad) == (0, 0)
                state_pools = {pool_of(opt.state[p][k]) for k in keys}
                assert len(state_pools) == 1 and (0, 0) not in state_pools, state_pools
                pools.append(state_pools.pop())
        assert len(set(pools)) == 2, pools  # one pool per optimizer

        def upload_pools():
            return {pool_of(backend("cuda").data_ptr(copy)) for _, copy in _cuda_kernels._UPLOADS.values()}

        uploads = upload_pools()
        assert len(uploads) == 1 and uploads.isdisjoint({(0, 0), *pools}), (uploads, pools)

        # inside a pool of the caller's the state goes there, as every allocation of the step does (and torch's)
        mine = fl.cuda.MemPool()
        model = fl.nn.Linear(300, 200).to("cuda")
        opt = fl.optim.Adam(model.parameters())
        model(fl.empty(8, 300, device="cuda")).sum().backward()
        with fl.cuda.use_mem_pool(mine):
            opt.step()
        assert {pool_of(opt.state[p][k]) for p in model.parameters() for k in ("exp_avg", "exp_avg_sq")} == {mine.id}
        assert mine.id in upload_pools()  # (the step's scalars, uploaded inside the caller's pool)
    """, caching_allocator=True)


def test_batch_norm_in_training_goes_through_cudnn():
    """Note [Batch norm through cuDNN]: a training forward and backward with an affine transform are one cuDNN
    call each (the fake device's library counts them); evaluation mode, no affine transform, a 2-d input or no
    input gradient run flambeau's kernels."""
    _run("""

        calls = host_overhead._CALLS

        def count(module, shape=(8, 4, 5, 5), train=True, input_grad=True, dtype=fl.float32):
            calls.clear()
            module.to(dtype).train(train)
            x = fl.empty(*shape, device="cuda", dtype=dtype, requires_grad=input_grad)
            y = module(x)
            if y.requires_grad:
                y.backward(fl.empty(*shape, device="cuda", dtype=dtype))
            return calls["cudnnBatchNormalizationForwardTraining"], calls["cudnnBatchNormalizationBackward"]

        bn = fl.nn.BatchNorm2d(4).to("cuda")
        assert count(bn) == (1, 1)
        assert count(bn, dtype=fl.float64) == (1, 1)
        assert count(fl.nn.BatchNorm1d(4).to("cuda"), shape=(8, 4, 5)) == (1, 1)
        assert count(fl.nn.BatchNorm3d(4).to("cuda"), shape=(2, 4, 3, 3, 3)) == (1, 1)
        assert count(bn, train=False) == (0, 0)
        assert count(bn, input_grad=False) == (1, 0)  # the weight's and bias's gradients alone: two column sums
        assert count(fl.nn.BatchNorm2d(4, affine=False).to("cuda")) == (0, 0)
        assert count(fl.nn.BatchNorm1d(4).to("cuda"), shape=(8, 4)) == (0, 0)
        assert count(fl.nn.BatchNorm2d(4, eps=1e-6).to("cuda")) == (0, 1)  # (the saved statistics are eps-free)
    """)


def test_the_gpu_diagnostic_tools_run_on_the_fake_device():
    """``tools/gpu_calls.py`` and ``tools/gpu_cudnn_engines.py`` run on a lent GPU's scarce minutes: their ``--fake``
    runs here keep them working (every native call of a step timed by name; every engine configuration listed,
    flambeau's marked)."""
    env = {**__import__("os").environ, "NUMBA_ENABLE_CUDASIM": "0"}
    calls = subprocess.run([sys.executable, str(TOOLS / "gpu_calls.py"), "lenet", "--fake"], capture_output=True,
                           text=True, timeout=300, env=env)
    assert calls.returncode == 0, calls.stdout + calls.stderr
    assert "=== lenet: wall" in calls.stdout and "cuLaunchKernel (direct)" in calls.stdout, calls.stdout
    engines = subprocess.run([sys.executable, str(TOOLS / "gpu_cudnn_engines.py"), "--fake"], capture_output=True,
                             text=True, timeout=300, env=env)
    assert engines.returncode == 0, engines.stdout + engines.stderr
    assert engines.stdout.count("<- flambeau") == 18, engines.stdout  # 3 convolutions x 3 kinds x TF32 on, off
