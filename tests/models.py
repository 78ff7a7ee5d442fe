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
