"""Where the CUDA QR goes wrong on a real GPU: geqrf's packed reflectors and tau, then orgqr's Q, each
against LAPACK's own (scipy.linalg.lapack), on one small matrix; prints the first differing entries."""

from __future__ import annotations

import numpy as np
import scipy.linalg.lapack as lapack

import flambeau as fl
from flambeau._backends import backend
from flambeau._kernels.cuda import linalg_solvers as ls

be = backend("cuda")
for m, n in ((6, 1), (4, 4), (5, 3)):
    a = np.random.default_rng(0).standard_normal((m, n))
    qr_ref, tau_ref, _, _ = lapack.dgeqrf(a)
    dev = be.from_numpy(a.copy())
    work = ls._work(dev, ())
    tau = be.empty((min(m, n),), np.float64)
    ls._per_matrix("qr", 1, ls._flat(work), ls._flat(tau), m, n)
    got, got_tau = be.to_numpy(work), be.to_numpy(tau)
    print(f"({m},{n}) geqrf max err {np.abs(got - qr_ref).max():.2e}, tau err {np.abs(got_tau - tau_ref).max():.2e}")
    if np.abs(got - qr_ref).max() > 1e-9:
        print(" got\n", got, "\n want\n", qr_ref, "\n tau", got_tau, tau_ref)
    q = be.from_numpy(np.eye(m, min(m, n)))
    ls._per_matrix("orgqr", 1, ls._flat(be.from_numpy(qr_ref)), ls._flat(be.from_numpy(tau_ref)), ls._flat(q), m, n,
                   min(m, n))
    q_ref = lapack.dorgqr(qr_ref, tau_ref)[0]
    err = np.abs(be.to_numpy(q) - q_ref[:, :min(m, n)]).max()
    print(f"({m},{n}) orgqr from LAPACK's reflectors: max err {err:.2e}")
    u, s, vh = fl.linalg.svd(fl.tensor(a, device="cuda"), full_matrices=False)
    print(f"({m},{n}) svd reconstruction err "
          f"{np.abs((u.cpu().numpy() * s.cpu().numpy()) @ vh.cpu().numpy() - a).max():.2e}")
