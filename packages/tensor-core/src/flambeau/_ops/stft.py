"""Short-time Fourier transforms: ``stft`` and its inverse ``istft``, as torch's.

Both are composites of operators autograd records (padding, strided frames, window products, the DFT
operators of ``_ops/spectral.py``, ``index_add`` for the overlap-add), so they are differentiable and
run on every device those have kernels for.

``stft(input, n_fft, ...)``: ``input`` is ``(L,)`` or ``(B, L)``, real or complex. With ``center`` the
signal is padded by ``n_fft // 2`` on both sides (``pad_mode``, ``'reflect'`` by default); frames of
``n_fft`` samples start every ``hop_length`` (``n_fft // 4``), each multiplied by ``window`` (``win_length``
long, ``n_fft`` by default, zero-padded to ``n_fft`` at the centre; none: a rectangle), and transformed:
the result is ``(B?, n_fft // 2 + 1 or n_fft, n_frames)`` complex (``onesided`` keeps the first half, the
default for real input and window), scaled by ``n_fft ** -0.5`` with ``normalized``.
``return_complex=False`` gives ``view_as_real`` of it with torch's deprecation warning; a real input must
say which. ``align_to_window=True`` (only without ``center``) starts each frame's window, not the frame,
at a multiple of ``hop_length``: ``1 + (L - win_length) // hop_length`` frames.

``istft(input, n_fft, ...)`` inverts it by overlap-add: each frame's inverse DFT is multiplied by the window
and added at its offset, and the sum divided by the sum of the squared windows there (which must not
vanish: torch's "window overlap add min" check, a host synchronisation as in torch). ``length`` crops or
zero-pads the result (with torch's warning when it pads).
"""

from __future__ import annotations

import warnings

from flambeau._dtype import to_real
from flambeau._factories import arange, ones, zeros
from flambeau._ops._common import Tensor
from flambeau._ops._registry import declare
from flambeau._ops._samples import FLOAT, SampleInput, make_tensor
from flambeau._ops.complex import view_as_real
from flambeau._ops.indexing import index_add
from flambeau._ops.shape import pad
from flambeau._ops.spectral import fft_c2c, fft_c2r, fft_r2c

__all__ = ["stft", "istft"]

STFT = declare("stft(Tensor input, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, "
               "bool center=True, str pad_mode='reflect', bool normalized=False, bool? onesided=None, "
               "bool? return_complex=None, bool? align_to_window=None) -> Tensor", composite=True, category="stft")
ISTFT = declare("istft(Tensor input, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, "
                "bool center=True, bool normalized=False, bool? onesided=None, int? length=None, "
                "bool return_complex=False) -> Tensor", composite=True, category="stft")

_NO_WINDOW_WARNING = ("A window was not provided. A rectangular window will be applied.Please provide the same window "
                      "used by stft to make the inversion lossless.To suppress this warning and use a rectangular "
                      "window, explicitly set `window=flambeau.ones(n_fft, device=<device>)`.")


def _lengths(name: str, n_fft: int, hop_length, win_length) -> tuple:
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    if n_fft <= 0:
        raise RuntimeError(f"{name}: expected n_fft > 0, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{name}: expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(f"{name}: expected 0 < win_length <= n_fft, but got win_length={win}")
    return hop, win


def _full_window(name: str, window, n_fft: int, win: int, input: Tensor):
    """``window`` (``win`` long; None: a rectangle) zero-padded at the centre to ``n_fft``; None when there is
    nothing to multiply by (no window, ``win == n_fft``)."""
    if window is not None:
        if not isinstance(window, Tensor):
            raise TypeError(f"{name}(): argument 'window' must be Tensor, not {type(window).__name__}")
        if window.dim() != 1 or window.shape[0] != win:
            raise RuntimeError(f"{name}: expected a 1D window tensor of size equal to win_length={win}, but got "
                               f"window with size {list(window.shape)}")
        if window.device != input.device:
            raise RuntimeError(f"{name}: expected window on {input.device} as the input, but got it on "
                               f"{window.device}")
    if win == n_fft:
        return window
    left = (n_fft - win) // 2
    if window is None:
        window = ones(win, dtype=to_real(input.dtype), device=input.device)
    return pad(window, (left, n_fft - win - left))


@STFT.front
def stft(input: Tensor, n_fft: int, hop_length=None, win_length=None, window=None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided=None, return_complex=None,
         align_to_window=None) -> Tensor:
    """Short-time Fourier transform of ``input`` (``(L,)`` or ``(B, L)``): ``(B?, n_freq, n_frames)`` complex
    (module docstring, torch's conventions)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' must be Tensor, not {type(input).__name__}")
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if return_complex is None and not input.is_complex() and not (window is not None and window.is_complex()):
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                           "require that return_complex=True in a future release.")
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got a {input.dim()}D tensor")
    n_fft = int(n_fft)
    hop, win = _lengths("stft", n_fft, hop_length, win_length)
    x = input if input.dim() == 2 else input.unsqueeze(0)
    if center:
        half = n_fft // 2
        x = pad(x.unsqueeze(1), (half, half), pad_mode).squeeze(1)  # (the 3-D form reflection padding takes)
    elif align_to_window:  # each frame's window, not the frame, starts at a multiple of hop
        left = (n_fft - win) // 2
        x = pad(x, (left, n_fft - win - left))
    length = x.shape[1]
    if n_fft > length:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length} (the signal's length"
                           f"{', padded' if center else ''}), but got n_fft={n_fft}")
    frames = x.unfold(1, n_fft, hop)  # (B, n_frames, n_fft), a strided view
    full = _full_window("stft", window, n_fft, win, input)
    if full is not None:
        frames = frames * full
    norm = "ortho" if normalized else "backward"
    if frames.is_complex():
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        out = fft_c2c(frames, (2,), norm, True)
    else:
        out = fft_r2c(frames, (2,), norm, True, True if onesided is None else bool(onesided))
    out = out.transpose(1, 2)
    if input.dim() == 1:
        out = out.squeeze(0)
    if return_complex:
        return out
    warnings.warn("stft with return_complex=False is deprecated. In a future release, stft will return complex "
                  "tensors for all inputs, and return_complex=False will raise an error.\nNote: you can still call "
                  "flambeau.view_as_real on the complex output to recover the old return format.",
                  UserWarning, stacklevel=2)
    return view_as_real(out)


@ISTFT.front
def istft(input: Tensor, n_fft: int, hop_length=None, win_length=None, window=None, center: bool = True,
          normalized: bool = False, onesided=None, length=None, return_complex: bool = False) -> Tensor:
    """Inverse short-time Fourier transform of ``input`` (``(B?, n_freq, n_frames)`` complex, as :func:`stft`
    returns): ``(B?, L)``, real unless ``return_complex`` (module docstring, torch's conventions)."""
    if not isinstance(input, Tensor) or not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex, but got {input.dim()}")
    n_fft = int(n_fft)
    hop, win = _lengths("istft", n_fft, hop_length, win_length)
    if hop > win:
        raise RuntimeError(f"istft: expected 0 < hop_length <= win_length, but got hop_length={hop}")
    x = (input if input.dim() == 3 else input.unsqueeze(0)).transpose(1, 2)  # (B, n_frames, n_freq)
    batch, n_frames, fft_size = x.shape
    if n_frames == 0:
        raise RuntimeError("istft: expected at least one frame, but got an input with 0 frames")
    onesided = fft_size != n_fft if onesided is None else bool(onesided)
    if onesided and n_fft // 2 + 1 != fft_size:
        raise RuntimeError("istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {fft_size}")
    if not onesided and n_fft != fft_size:
        raise RuntimeError("istft: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft when onesided=False, but got {fft_size}")
    if window is None:
        warnings.warn(_NO_WINDOW_WARNING, UserWarning, stacklevel=2)
        window = ones(win, dtype=to_real(input.dtype), device=input.device)
    full = _full_window("istft", window, n_fft, win, input)
    norm = "ortho" if normalized else "backward"
    if return_complex:
        if onesided:
            raise RuntimeError("cannot have onesided output if window or input is complex")
        frames = fft_c2c(x, (2,), norm, False)
    else:
        if full.is_complex():
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        frames = fft_c2r(x if onesided else x.narrow(2, 0, n_fft // 2 + 1), (2,), norm, n_fft)
    frames = frames * full  # (B, n_frames, n_fft)
    signal_length = n_fft + hop * (n_frames - 1)
    offsets = (arange(n_frames, device=input.device).unsqueeze(1) * hop
               + arange(n_fft, device=input.device)).reshape(-1)
    y = index_add(zeros(batch, signal_length, dtype=frames.dtype, device=input.device), 1, offsets,
                  frames.reshape(batch, -1))
    squares = (full * full.conj()).real if full.is_complex() else full * full
    envelope = index_add(zeros(signal_length, dtype=squares.dtype, device=input.device), 0, offsets,
                         squares.expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    end = start + int(length) if length is not None else (signal_length - n_fft // 2 if center else signal_length)
    stop = min(end, signal_length)
    y = y[:, start:stop]
    envelope = envelope[start:stop]
    if bool((envelope.abs() < 1e-11).any()):  # (a synchronisation on a GPU, as torch's check)
        raise RuntimeError("istft: window overlap add min: 1 (the sum of the squared windows vanishes somewhere: "
                           "the transform cannot be inverted with this window and hop_length)")
    y = y / envelope
    if end > signal_length:
        warnings.warn("The length of signal is shorter than the length parameter. Result is being padded with zeros "
                      "in the tail. Please check your center and hop_length settings.", UserWarning, stacklevel=2)
        y = pad(y, (0, end - signal_length))
    return y.squeeze(0) if input.dim() == 2 else y


def _signal(device, dtype, requires_grad, *shape):
    return make_tensor(shape, dtype=dtype, device=device, requires_grad=requires_grad)


@STFT.samples(dtypes=FLOAT)
def _stft_samples(device, dtype, requires_grad):
    from flambeau._ops.numeric import hann_window

    yield SampleInput(_signal(device, dtype, requires_grad, 24), 8, return_complex=True)
    yield SampleInput(_signal(device, dtype, requires_grad, 2, 20), 8, hop_length=3,
                      window=hann_window(8, dtype=dtype, device=device), normalized=True, return_complex=True)
    yield SampleInput(_signal(device, dtype, requires_grad, 20), 8, win_length=5,
                      window=hann_window(5, dtype=dtype, device=device), center=False, onesided=False,
                      return_complex=True)


def _spectrum(device, dtype, *shape):
    from flambeau._ops.complex import complex as make_complex

    return make_complex(make_tensor(shape, dtype=dtype, device=device),
                        make_tensor(shape, dtype=dtype, device=device))


@ISTFT.samples(dtypes=FLOAT)
def _istft_samples(device, dtype, requires_grad):
    from flambeau._ops.numeric import hann_window

    window = hann_window(8, dtype=dtype, device=device)
    spectrum = stft(_signal(device, dtype, False, 2, 24), 8, window=window, return_complex=True)
    yield SampleInput(spectrum.detach().requires_grad_(requires_grad), 8, window=window)
    yield SampleInput(spectrum.detach()[0].clone().requires_grad_(requires_grad), 8, window=window, hop_length=4,
                      length=20)
