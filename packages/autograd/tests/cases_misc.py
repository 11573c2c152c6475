"""Gradcheck cases of the composite search/distance/shape helpers (``_ops/searching.py``), of the grid samplers
(``_ops/resample.py``) and of the short-time Fourier transforms (``_ops/stft.py``), merged into
test_derivatives.CASES."""

from __future__ import annotations

import numpy as np

import flambeau as fl

RNG = np.random.default_rng(2468)


def t(*shape):
    return fl.tensor(RNG.uniform(-1, 1, size=shape), dtype=fl.float64, requires_grad=True)


def grid(*shape):
    """Sampling locations inside (-0.9, 0.9), away from the pixel centres where bilinear weights kink."""
    return fl.tensor(RNG.uniform(-0.9, 0.9, size=shape), dtype=fl.float64, requires_grad=True)


def _sum_all(tensors):
    return sum((x * (i + 1)).sum() for i, x in enumerate(tensors))


CASES = {
    "stft": (lambda x, w: fl.view_as_real(fl.stft(x, 8, hop_length=3, window=w, return_complex=True)),
             (t(2, 20), t(8))),
    "stft#complex": (lambda re, im: fl.view_as_real(fl.stft(fl.complex(re, im), 8, win_length=5, center=False,
                                                            return_complex=True)), (t(20), t(20))),
    "istft": (lambda re, im, w: fl.istft(fl.complex(re, im), 8, hop_length=2, window=w + 2.0, length=14),
              (t(5, 9), t(5, 9), t(8))),
    "cdist": (lambda a, b: fl.cdist(a, b), (t(2, 4, 3), t(2, 5, 3))),
    "cdist#p1": (lambda a, b: fl.cdist(a, b, p=1.0), (t(4, 3), t(5, 3))),
    "cdist#p3": (lambda a, b: fl.cdist(a, b, p=3.0), (t(3, 2), t(4, 2))),
    "cdist#mm": (lambda a, b: fl.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), (t(4, 3), t(5, 3))),
    "meshgrid": (lambda a, b: _sum_all(fl.meshgrid(a, b, indexing="ij")), (t(3), t(4))),
    "meshgrid#xy": (lambda a, b: _sum_all(fl.meshgrid(a, b, indexing="xy")), (t(3), t(4))),
    "atleast_1d": (lambda a: fl.atleast_1d(a) * 2, (t(),)),
    "atleast_2d": (lambda a: fl.atleast_2d(a) * 2, (t(3),)),
    "atleast_3d": (lambda a: fl.atleast_3d(a) * 2, (t(3, 2),)),
    # interpolation_mode 0 bilinear / 2 bicubic, padding_mode 0 zeros / 1 border / 2 reflection
    "grid_sampler_2d": (lambda x, g: fl.grid_sampler_2d(x, g, 0, 0, False), (t(2, 2, 4, 5), grid(2, 3, 2, 2))),
    "grid_sampler_2d#bicubic_border": (lambda x, g: fl.grid_sampler_2d(x, g, 2, 1, True),
                                       (t(1, 2, 4, 4), grid(1, 2, 3, 2))),
    "grid_sampler_3d": (lambda x, g: fl.grid_sampler_3d(x, g, 0, 2, False), (t(1, 2, 3, 4, 3), grid(1, 2, 2, 2, 3))),
}
