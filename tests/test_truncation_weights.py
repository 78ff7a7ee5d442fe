"""PT-TEMPO truncated in a class-weighted norm (the ``truncation_weights`` option).

A point is weighted when it enters the window and unweighted when it leaves,
so the weighting changes only which singular values a cut sees: weight 1 is
today's build bit for bit, a negligible epsrel gives the unweighted process
tensor, and NumPy and JAX agree. docs/truncation_weights.md has the study.
"""

from __future__ import annotations

import numpy as np
import pytest

import nonmarkov as nm
from models import driven_spin_boson, spin_boson
from nonmarkov import backends
from nonmarkov.options import EngineOptions

WEIGHTINGS = [0.25, 3.0, (1.0, 0.4, 2.5, 0.7)]


def _build(bath, parameters, end, **option):
    """The PtTempo builder (computed) and its process tensor; deterministic, so that on
    JAX two builds take the same path (host start and handover at a fixed step)."""
    options = EngineOptions(deterministic=True, **option)
    builder = nm.PtTempo(bath, 0.0, end, parameters, options=options)
    return builder, builder.get_process_tensor(progress_type="silent")


def _states(system, rho0, pt):
    return nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent").states


def _tensors(pt):
    return [np.asarray(pt.get_step_tensor(step)[0]) for step in range(pt.num_steps)]


def test_weight_one_is_the_flat_build():
    system, bath, rho0 = driven_spin_boson(alpha=0.3)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-4, dkmax=4)
    _, flat = _build(bath, parameters, 2.0)
    for ones in (1.0, (1.0, 1.0, 1.0, 1.0)):
        _, weighted = _build(bath, parameters, 2.0, truncation_weights=ones)
        for a, b in zip(_tensors(weighted), _tensors(flat), strict=True):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
        np.testing.assert_allclose(
            _states(system, rho0, weighted), _states(system, rho0, flat), rtol=0, atol=1e-12
        )


@pytest.mark.parametrize("weights", WEIGHTINGS)
def test_weighting_is_undone_exactly(weights):
    """Without truncation (epsrel near the floor, bonds kept in full) any weighting
    gives the flat process tensor: the same dynamics of a driven, biased system."""
    system, bath, rho0 = spin_boson(0.3, 0.5, bias=0.4, cutoff=4.0)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-14, dkmax=3)
    flat_builder, flat = _build(bath, parameters, 2.0)
    builder, weighted = _build(bath, parameters, 2.0, truncation_weights=weights)
    assert builder.max_bond_dimension == flat_builder.max_bond_dimension
    np.testing.assert_allclose(
        _states(system, rho0, weighted), _states(system, rho0, flat), rtol=0, atol=1e-9
    )


def test_weighting_reaches_the_cuts():
    """At a loose epsrel the weighted cuts keep other singular values: another
    process tensor (the option is not a no-op), still near the flat one."""
    system, bath, rho0 = driven_spin_boson(alpha=0.3)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-4, dkmax=4)
    _, flat = _build(bath, parameters, 2.0)
    _, weighted = _build(bath, parameters, 2.0, truncation_weights=0.25)
    difference = np.max(np.abs(_states(system, rho0, weighted) - _states(system, rho0, flat)))
    assert 1e-8 < difference < 0.05


def test_weighted_build_streamed_to_a_file_is_the_one_in_memory(tmp_path):
    system, bath, rho0 = driven_spin_boson(alpha=0.3)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-5, dkmax=3)
    option = EngineOptions(truncation_weights=0.25)
    in_memory = nm.PtTempo(bath, 0.0, 1.6, parameters, options=option).get_process_tensor(
        progress_type="silent"
    )
    streamed = nm.PtTempo(
        bath, 0.0, 1.6, parameters, process_tensor_file=str(tmp_path / "pt.hdf5"), options=option
    ).get_process_tensor(progress_type="silent")
    np.testing.assert_allclose(
        _states(system, rho0, streamed), _states(system, rho0, in_memory), rtol=0, atol=1e-12
    )


def test_numpy_and_jax_agree_on_a_weighted_build():
    pytest.importorskip("jax")
    system, bath, rho0 = driven_spin_boson(alpha=0.3)
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-6, dkmax=4)
    results = {}
    for name in ("numpy", "jax"):
        with backends.use_backend(name, "double"):
            _, pt = _build(bath, parameters, 2.0, truncation_weights=0.25, window_sweep="exact")
            results[name] = _states(system, rho0, pt)
    np.testing.assert_allclose(results["jax"], results["numpy"], rtol=0, atol=1e-10)


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [0, -0.5, float("nan"), float("inf"), True, "populations", [], [1.0, 0.0], [1, "a"]]
)
def test_bad_weights_are_refused(value):
    with pytest.raises(ValueError, match="truncation_weights option must be None"):
        EngineOptions(truncation_weights=value)


def test_weights_of_the_wrong_length_are_refused_before_the_build():
    _, bath, _ = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-6, dkmax=3)
    with pytest.raises(ValueError, match="has 3 values; .* 4 classes"):
        nm.PtTempo(
            bath, 0.0, 1.0, parameters, options=EngineOptions(truncation_weights=(1.0, 0.5, 1.0))
        )


@pytest.mark.parametrize("method", ["repeated_block", "divide_and_conquer"])
def test_other_constructions_refuse_weights(method):
    _, bath, _ = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-6, dkmax=3)
    with pytest.raises(ValueError, match="sequential PT-TEMPO only"):
        nm.pt_tempo_compute(
            bath,
            0.0,
            1.0,
            parameters,
            method=method,
            options=EngineOptions(truncation_weights=0.5),
        )


def test_the_repeated_block_and_uniform_constructions_refuse_weights_when_called_directly():
    _, bath, _ = driven_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-6, dkmax=3)
    weighted = EngineOptions(truncation_weights=0.5)
    with pytest.raises(ValueError, match="not to the repeated-block construction"):
        nm.pt_repeated_block_compute(bath, 0.0, 1.0, parameters, options=weighted)
    with pytest.raises(ValueError, match="not to the uniform construction"):
        nm.pt_uniform_compute(bath, parameters, options=weighted)
