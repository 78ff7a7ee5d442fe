"""Small models shared by the tests of the compiled JAX window and its host start."""

from __future__ import annotations

import numpy

import nonmarkov as nm

SX = numpy.array([[0.0, 1.0], [1.0, 0.0]], dtype=complex)
SZ = numpy.array([[1.0, 0.0], [0.0, -1.0]], dtype=complex)


def spin_boson(alpha: float = 0.3):
    """Spin-boson model with a driving field: H_S = 0.5 sx + 0.2 sz, S = 0.5 sz, an
    ohmic bath at T = 0.5, a superposition as initial state; (system, bath, rho0)."""
    system = nm.System(0.5 * SX + 0.2 * SZ)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(alpha, 1.0, 5.0, temperature=0.5))
    psi = numpy.array([0.8, 0.6 * numpy.exp(0.4j)])
    return system, bath, numpy.outer(psi, psi.conj())


def ohmic_independent_boson(alpha: float = 0.2, cutoff: float = 4.0):
    """Independent-boson model with an ohmic bath at T = 0 (exponential cutoff):
    H_S = 0.3 sz, S = 0.5 sz, a superposition as initial state; (system, bath, rho0).
    Its exact dynamics: :func:`ohmic_independent_boson_exact`."""
    system = nm.System(0.3 * SZ)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(alpha, 1.0, cutoff, temperature=0.0))
    psi = numpy.array([0.8, 0.6 * numpy.exp(0.4j)])
    return system, bath, numpy.outer(psi, psi.conj())


def ohmic_independent_boson_exact(rho0, energies, couplings, alpha, cutoff, times):
    """Exact states of an independent-boson model (S = diag(couplings), H_S =
    diag(energies)) with J(w) = 2 alpha w exp(-w / wc) at T = 0, in closed form:
    rho_nm(t) = rho_nm(0) exp(-i (E_n - E_m) t - (s_n - s_m)^2 G(t) + i (s_n^2 - s_m^2) P(t))
    with G(t) = alpha ln(1 + wc^2 t^2) and P(t) = 2 alpha (wc t - arctan(wc t))
    (``../shared/DESIGN.md``, section 1)."""
    energies = numpy.asarray(energies, dtype=float)
    s = numpy.asarray(couplings, dtype=float)
    de = numpy.subtract.outer(energies, energies)
    ds2 = numpy.subtract.outer(s, s) ** 2
    dsq = numpy.subtract.outer(s**2, s**2)
    states = []
    for t in numpy.asarray(times, dtype=float):
        g = alpha * numpy.log1p((cutoff * t) ** 2)
        p = 2.0 * alpha * (cutoff * t - numpy.arctan(cutoff * t))
        states.append(rho0 * numpy.exp(-1j * de * t - ds2 * g + 1j * dsq * p))
    return numpy.array(states)
