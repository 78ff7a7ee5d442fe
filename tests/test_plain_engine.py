"""A new engine runs the library's algorithms: the plain chain engine of
``tests/engines_plain_python.py`` (docs/ARCHITECTURE.md, "Adding an engine"),
put in place with ``nonmarkov.engines.use_engines``, gives the exact
independent-boson dynamics through ``compute_dynamics``, agrees with the
backend's engine with controls, time dependence and two process tensors, runs
mean-field dynamics (the algorithm steps the states itself), and its refusal of
the adjoint method reaches the user. ``tests/test_engines.py`` runs it through the
interface tests of every chain engine."""

from __future__ import annotations

import math

import numpy
import pytest

import nonmarkov as nm
from engines_plain_python import PlainChainEngine
from models import (
    SX,
    SZ,
    LaserSpin,
    assert_coherences_match,
    cavity_eom,
    independent_boson_problem,
    spin_boson,
)
from nonmarkov.engines import chain_engine, use_engines
from nonmarkov.engines.eager_chain import EagerChainEngine

SILENT = {"progress_type": "silent"}


@pytest.fixture(scope="module")
def independent_boson():
    """(system, rho0, process tensor, exact, closed) of the ohmic T = 0 model."""
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem("ohmic-T0")
    pt = nm.pt_tempo_compute(bath, 0.0, end_time, parameters, **SILENT)
    return system, rho0, pt, exact, closed


def test_compute_dynamics_on_the_plain_engine_is_exact(independent_boson):
    system, rho0, pt, exact, closed = independent_boson
    with use_engines(chain=PlainChainEngine):
        assert isinstance(chain_engine(), PlainChainEngine)
        dynamics = nm.compute_dynamics(system, rho0, process_tensor=pt, **SILENT)
    reference = nm.compute_dynamics(system, rho0, process_tensor=pt, **SILENT)
    states = numpy.asarray(dynamics.states)
    assert_coherences_match(states, exact, closed, bound=1e-8)
    numpy.testing.assert_allclose(states, numpy.asarray(reference.states), rtol=0, atol=1e-12)


@pytest.mark.parametrize("record_all", [True, False], ids=["all", "last"])
def test_the_plain_engine_agrees_with_the_backends_engine(record_all):
    """Two process tensors (different baths and bonds), a time-dependent system and
    controls before and after steps: the same states as the backend's engine."""
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=3)
    baths = [spin_boson()[1], nm.Bath(0.5 * SX, nm.PowerLawSD(0.1, 1.0, 3.0))]
    pts = [nm.pt_tempo_compute(bath, 0.0, 1.0, parameters, **SILENT) for bath in baths]
    system = nm.TimeDependentSystem(lambda t: 0.5 * SX + 0.2 * math.cos(3.0 * t) * SZ)
    control = nm.Control(2)
    control.add_single(3, nm.operators.left_super(SX) @ nm.operators.right_super(SX))
    control.add_single(6, nm.operators.left_super(SZ) @ nm.operators.right_super(SZ), post=True)
    arguments = {"process_tensor": pts, "control": control, "record_all": record_all, **SILENT}
    rho0 = spin_boson()[2]
    with use_engines(chain=PlainChainEngine):
        plain = nm.compute_dynamics(system, rho0, **arguments)
    reference = nm.compute_dynamics(system, rho0, **arguments)
    assert len(plain.states) == (11 if record_all else 2)
    numpy.testing.assert_allclose(plain.times, reference.times, rtol=0, atol=1e-14)
    numpy.testing.assert_allclose(
        numpy.asarray(plain.states), numpy.asarray(reference.states), rtol=0, atol=1e-12
    )


def test_mean_field_dynamics_steps_the_plain_engine():
    """Mean-field dynamics steps the states itself (``prepare``, ``step``, ``stepping``)."""
    spin = LaserSpin()
    system = nm.MeanFieldSystem([spin.system()], cavity_eom([spin]))
    pt = nm.pt_tempo_compute(
        nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1.0, 3.0)),
        0.0,
        0.8,
        nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=4),
        **SILENT,
    )
    arguments = {"process_tensor_list": [pt], "initial_state_list": [spin_boson()[2]], **SILENT}
    with use_engines(chain=PlainChainEngine):
        plain = nm.compute_dynamics_with_field(system, 0.3 + 0.1j, **arguments)
    reference = nm.compute_dynamics_with_field(system, 0.3 + 0.1j, **arguments)
    numpy.testing.assert_allclose(plain.fields, reference.fields, rtol=0, atol=1e-12)
    numpy.testing.assert_allclose(
        numpy.asarray(plain.system_dynamics[0].states),
        numpy.asarray(reference.system_dynamics[0].states),
        rtol=0,
        atol=1e-12,
    )


def test_an_engines_refusal_reaches_the_user(independent_boson):
    system, rho0, pt, _, _ = independent_boson
    parameterized = nm.ParameterizedSystem(lambda h: h * SX)
    with use_engines(chain=PlainChainEngine), pytest.raises(ValueError, match="PlainChainEngine"):
        nm.state_gradient(
            parameterized, rho0, numpy.eye(2), pt, numpy.full((2 * 6, 1), 0.5), **SILENT
        )


def test_use_engines_restores_the_choice_and_refuses_unknown_kinds():
    with use_engines(chain=PlainChainEngine):
        with use_engines(chain=lambda options: EagerChainEngine(options)):
            assert type(chain_engine()) is EagerChainEngine
        assert isinstance(chain_engine(), PlainChainEngine)
    assert not isinstance(chain_engine(), PlainChainEngine)
    with pytest.raises(TypeError, match="unknown engine kind 'chains'"):
        with use_engines(chains=PlainChainEngine):
            pass
    with pytest.raises(TypeError, match="callable"):
        with use_engines(chain="plain"):
            pass
