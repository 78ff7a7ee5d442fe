"""Tests of the divide-and-conquer process tensor (``pt_divide_and_conquer_compute``).

Physics checks: untruncated it is an exact rewriting of the discretised
influence functional, so it reproduces sequential PT-TEMPO (full memory and
memory cut, full and merged classes) and the exact independent-boson
solution; truncated, its error is set by epsrel; it works wherever a process
tensor does (dynamics, correlation functions, files, ``pt_tempo_compute``).
Problems are tiny so that the file also runs quickly on the JAX backend.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import nonmarkov as nm
from models import (
    SZ,
    assert_coherences_match,
    biased_spin_boson,
    independent_boson_problem,
    sequential,
)
from nonmarkov.methods.pt_divide import pt_divide_and_conquer_compute


def divide(bath, parameters, num_steps, unique=False):
    return pt_divide_and_conquer_compute(
        bath, 0.0, num_steps * parameters.dt, parameters, unique=unique, progress_type="silent"
    )


def states_of(system, rho0, pt):
    return nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent").states


@pytest.mark.parametrize(
    "dkmax, num_steps, unique",
    [
        (None, 1, False),
        (None, 5, False),
        (None, 6, True),
        (1, 5, False),
        (3, 2, False),
        (3, 11, False),
        (2, 9, True),
    ],
)
def test_untruncated_equals_sequential_pt_tempo(dkmax, num_steps, unique):
    """Every combination of blocks is an exact product of influence factors:
    with epsrel 1e-13 nothing is cut and the states equal sequential PT-TEMPO's
    to rounding (measured 1e-15..1e-13; asserted 1e-10). The cases cover one
    step, full memory (K = N - 1), a cut shorter and longer than the run, N a
    power of two and not (blocks of several sizes joined), merged classes."""
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-13, dkmax=dkmax)
    reference = sequential(system, bath, rho0, parameters, num_steps, unique=unique)
    pt = divide(bath, parameters, num_steps, unique=unique)
    assert len(pt) == num_steps
    states = states_of(system, rho0, pt)
    closed = nm.compute_dynamics(
        system, rho0, dt=0.2, num_steps=num_steps, progress_type="silent"
    ).states
    assert np.max(np.abs(reference.states - closed)) > 1e-3  # the bath matters
    np.testing.assert_allclose(states, reference.states, rtol=0, atol=1e-10)


@pytest.mark.parametrize("key", ["ohmic-T0", "three-level"])
def test_independent_boson_exact(key):
    """Full memory, epsrel 1e-10: the exact independent-boson solution
    (measured ~1e-10 with the quadrature; asserted 1e-8), for a spin and for
    a three-level system with unequal couplings."""
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem(key)
    num_steps = len(exact) - 1
    states = states_of(system, rho0, divide(bath, parameters, num_steps))
    assert_coherences_match(states, exact, closed, bound=1e-8)


def test_truncated_error_is_set_by_epsrel():
    """epsrel = 1e-4 and 1e-6, dkmax = 3, 12 steps: against the untruncated
    result the error is of order epsrel like sequential PT-TEMPO's (measured
    about 1e-4 and 1e-6); asserted 10 epsrel, and the truncation must act
    (bond below the untruncated 3^3 = 27)."""
    system, bath, rho0 = biased_spin_boson()
    num_steps = 12
    exact = sequential(
        system, bath, rho0, nm.TempoParameters(dt=0.2, epsrel=1e-13, dkmax=3), num_steps
    ).states
    for epsrel in (1e-4, 1e-6):
        parameters = nm.TempoParameters(dt=0.2, epsrel=epsrel, dkmax=3)
        pt = divide(bath, parameters, num_steps)
        if epsrel == 1e-4:
            assert pt.get_bond_dimensions().max() < 27
        assert np.max(np.abs(states_of(system, rho0, pt) - exact)) < 10 * epsrel


def test_usable_like_any_process_tensor(tmp_path):
    """Correlation functions and files: <sz(t) sz(0)> from the
    divide-and-conquer PT equals the one from PT-TEMPO's (untruncated,
    1e-10), the exported file gives the same dynamics (1e-12) and keeps
    how the PT was made, and
    ``pt_tempo_compute(method='divide_and_conquer')`` is this method."""
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-13, dkmax=2)
    num_steps = 6
    pt = nm.pt_tempo_compute(
        bath, 0.0, num_steps * 0.2, parameters, method="divide_and_conquer", progress_type="silent"
    )
    reference = nm.PtTempo(bath, 0.0, num_steps * 0.2, parameters).get_process_tensor(
        progress_type="silent"
    )
    times = [0.0, 0.4, 1.0]
    ours = nm.compute_correlations(
        system, pt, SZ, SZ, 0.0, times, initial_state=rho0, progress_type="silent"
    )
    theirs = nm.compute_correlations(
        system, reference, SZ, SZ, 0.0, times, initial_state=rho0, progress_type="silent"
    )
    assert np.max(np.abs(theirs[1])) > 0.1
    np.testing.assert_allclose(ours[1], theirs[1], rtol=0, atol=1e-10)
    filename = tmp_path / "divide.hdf5"
    pt.export(str(filename))
    from_file = nm.import_process_tensor(str(filename))
    assert from_file.metadata["created_by"] == "pt_divide_and_conquer_compute"
    assert from_file.metadata["parameters"]["dkmax"] == 2
    np.testing.assert_allclose(
        states_of(system, rho0, from_file), states_of(system, rho0, pt), rtol=0, atol=1e-12
    )


def test_bad_input():
    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-6, dkmax=2)
    with pytest.raises(TypeError, match="bath"):
        pt_divide_and_conquer_compute("bath", 0.0, 1.0, parameters)
    with pytest.raises(TypeError, match="parameters"):
        pt_divide_and_conquer_compute(bath, 0.0, 1.0, {"dt": 0.2})
    with pytest.raises(ValueError, match="end_time"):
        pt_divide_and_conquer_compute(bath, 1.0, 0.5, parameters)
    with pytest.raises(ValueError, match="shorter than"):
        pt_divide_and_conquer_compute(bath, 0.0, 0.05, parameters)
    with pytest.raises(ValueError, match="method"):
        nm.pt_tempo_compute(bath, 0.0, 1.0, parameters, method="pairwise")


@pytest.mark.parametrize("epsrel", [1e-4, 1e-9])
def test_zip_split_keeps_the_discarded_weight_below_epsrel(epsrel):
    """The split used while zipping two blocks (Gram-matrix eigenvectors for
    a loose cut, an SVD for a tight one): u orthonormal, and the part it
    drops has norm <= epsrel times the largest singular value, with a rank
    close to the SVD's (spectrum decaying like 10^-j/4)."""
    from nonmarkov.kernels.combine import _split_off_left
    from nonmarkov.kernels.truncation import kept_rank

    rng = np.random.default_rng(7)
    rows, cols = 24, 200
    left = np.linalg.qr(rng.normal(size=(rows, rows)) + 1j * rng.normal(size=(rows, rows)))[0]
    right = np.linalg.qr(rng.normal(size=(cols, rows)) + 1j * rng.normal(size=(cols, rows)))[0]
    spectrum = 10.0 ** (-np.arange(rows) / 4.0)
    matrix = (left * spectrum) @ right.conj().T
    u, rest = _split_off_left(nm.backends.numerical_backend.np.asarray(matrix), epsrel, None)
    u, rest = np.asarray(u), np.asarray(rest)
    np.testing.assert_allclose(u.conj().T @ u, np.eye(u.shape[1]), atol=1e-12)
    assert np.linalg.norm(matrix - u @ rest) <= epsrel * spectrum[0] * (1 + 1e-6)
    assert abs(u.shape[1] - kept_rank(spectrum, epsrel)) <= 1


def test_file_target_checked_before_the_work(tmp_path, monkeypatch):
    """pt_tempo_compute(method=...) with a file: an existing file without
    overwrite is refused before anything is computed; True streams to an
    automatic temporary name; the file holds the same PT."""
    import nonmarkov.methods.pt_divide

    system, bath, rho0 = biased_spin_boson()
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-10, dkmax=2)
    filename = tmp_path / "exists.hdf5"
    filename.write_bytes(b"")

    def must_not_run(*args, **kwargs):
        raise AssertionError("computed before the file target was checked")

    with monkeypatch.context() as patch:
        patch.setattr(nonmarkov.methods.pt_divide, "pt_divide_and_conquer_compute", must_not_run)
        with pytest.raises(FileExistsError, match="overwrite"):
            nm.pt_tempo_compute(
                bath,
                0.0,
                1.0,
                parameters,
                method="divide_and_conquer",
                process_tensor_file=str(filename),
            )
    on_file = nm.pt_tempo_compute(
        bath,
        0.0,
        1.0,
        parameters,
        method="divide_and_conquer",
        process_tensor_file=True,
        progress_type="silent",
    )
    try:
        in_memory = divide(bath, parameters, 5)
        np.testing.assert_allclose(
            states_of(system, rho0, on_file), states_of(system, rho0, in_memory), rtol=0, atol=1e-12
        )
    finally:
        on_file.close()
        os.remove(on_file.filename)
