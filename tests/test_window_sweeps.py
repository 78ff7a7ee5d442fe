"""The two sweeps of a window step (``nonmarkov.kernels.window``, option ``window_sweep``).

- Without truncation (epsrel 0) both compute the exact product of the window
  and the new point's couplings: the contracted window (and a finalised site)
  agree to rounding for every oldest-site action and window length, including
  the one- and two-point windows where the oldest site is the front's
  neighbour.
- Each leaves its gauge: ``'zip_up'`` left-orthonormal sites with the norm in
  the oldest, ``'exact'`` right-orthonormal with the norm in the front; a
  finalised site is right-orthonormal in both.
- With truncation the zip-up's first cut adds little error: on a spin-1
  process tensor (five carrier rows, where the sweeps differ most) and on
  the spin-boson model its error against a converged reference is at most
  1.5 times the exact sweep's, at about the same bonds; TEMPO with the zip-up
  gives the exact independent-boson coherence.
- The sketched SVD of the zip-up's cuts keeps the rank rule's guarantee
  (discarded norm at most epsrel times the largest singular value), keeps
  the rank of the plain SVD on a decaying spectrum, widens a sketch that is
  too narrow, and is the plain SVD on a narrow matrix; its test columns are
  fixed numbers of (class, column, sketch column), whatever block is asked for.
- The rank rule takes the same rank on a short spectrum (a loop on the host)
  as on that spectrum padded with zeros (array operations).
- The option is checked.

These run on the host engine under the NumPy backend in any session.
"""

from __future__ import annotations

import numpy
import pytest

import nonmarkov as nm
from models import assert_coherences_match, independent_boson_problem, spin_boson
from nonmarkov import backends
from nonmarkov.kernels.truncation import (
    rank_rule,
    sketch_gaussians,
    sketched_truncated_svd,
    truncated_svd,
)
from nonmarkov.kernels.window import NORM_SITE, advance_window

RNG = numpy.random.default_rng(20261201)


def random_window(bonds: list[int], classes: int) -> list[numpy.ndarray]:
    """Sites (l, m, r) with the given bonds between them (first and last 1)."""
    return [
        RNG.normal(size=(left, classes, right)) + 1j * RNG.normal(size=(left, classes, right))
        for left, right in zip(bonds[:-1], bonds[1:])
    ]


def contract(window: list[numpy.ndarray], finalized=None) -> numpy.ndarray:
    """The window (and a finalised site after it) as one tensor over all point indices."""
    sites = list(window) + ([] if finalized is None else [finalized])
    tensor = sites[0]
    for site in sites[1:]:
        tensor = numpy.tensordot(tensor, site, axes=([-1], [0]))
    return tensor


def step_arguments(window, dim_x: int, num_rows: int):
    """A new point: theta (x, m, r) from the front, rows, carrier and lag matrices."""
    classes = window[0].shape[1]
    between = RNG.normal(size=(dim_x, classes)) + 1j * RNG.normal(size=(dim_x, classes))
    theta = numpy.einsum("xp,pr->xpr", between, window[0][0])
    first = numpy.exp(0.3 * RNG.normal(size=(dim_x, classes)))
    carrier = numpy.arange(dim_x) % num_rows
    lags = [
        numpy.exp(0.3 * RNG.normal(size=(num_rows, classes)) + 0.2j) for _ in range(len(window) - 1)
    ]
    return theta, first, carrier, lags


@pytest.mark.parametrize("oldest", ["keep", "trace", "finalize"])
@pytest.mark.parametrize("points", [1, 2, 3, 5])
def test_without_truncation_both_sweeps_compute_the_exact_product(oldest, points):
    with backends.use_backend("numpy", "double"):
        last = 2 if oldest == "finalize" else 1  # a finalize window ends on a PT bond
        window = random_window([1] + [min(3 + j, 6) for j in range(points - 1)] + [last], 4)
        theta, first, carrier, lags = step_arguments(window, dim_x=4, num_rows=3)
        results = {}
        for sweep in ("zip_up", "exact"):
            new, finalized = advance_window(
                window, theta, first, carrier, 3, lags, 0.0, oldest, sweep=sweep
            )
            assert (finalized is None) == (oldest != "finalize")
            for left, right in zip(new[:-1], new[1:]):
                assert left.shape[2] == right.shape[0]
            if finalized is not None:
                assert new[-1].shape[2] == finalized.shape[0]
            results[sweep] = contract(new, finalized)
        scale = numpy.max(numpy.abs(results["exact"]))
        numpy.testing.assert_allclose(results["zip_up"], results["exact"], atol=1e-12 * scale)


def _orthonormal(matrix: numpy.ndarray) -> bool:
    return numpy.allclose(matrix @ matrix.conj().T, numpy.eye(matrix.shape[0]), atol=1e-12)


@pytest.mark.parametrize("sweep", ["zip_up", "exact"])
def test_each_sweep_leaves_its_gauge(sweep):
    with backends.use_backend("numpy", "double"):
        window = random_window([1, 4, 6, 6, 2], classes=4)
        theta, first, carrier, lags = step_arguments(window, dim_x=4, num_rows=3)
        new, finalized = advance_window(
            window, theta, first, carrier, 3, lags, 1e-3, "finalize", sweep=sweep
        )
        holder = NORM_SITE[sweep] % len(new)
        for index, site in enumerate(new):
            chi_l, dim_p, chi_r = site.shape
            if index < holder:  # left of the norm: left-orthonormal
                assert _orthonormal(site.reshape(chi_l * dim_p, chi_r).T.conj())
            elif index > holder:
                assert _orthonormal(site.reshape(chi_l, dim_p * chi_r))
        assert _orthonormal(finalized.reshape(finalized.shape[0], -1))


def spin_one_pt_dynamics(epsrel: float, sweep: str) -> tuple[numpy.ndarray, int]:
    """States of a spin 1 (H = S_x, coupling S_z, Ohmic) from a PT, and its largest bond."""
    sx = numpy.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=complex) / numpy.sqrt(2.0)
    sz = numpy.diag([1.0, 0.0, -1.0]).astype(complex)
    bath = nm.Bath(sz, nm.PowerLawSD(alpha=0.1, zeta=1, cutoff=4.0, cutoff_type="exponential"))
    parameters = nm.TempoParameters(dt=0.1, tcut=0.6, epsrel=epsrel)
    options = nm.options.default_options().replace(window_sweep=sweep)
    with backends.use_backend("numpy", "double"):
        pt = nm.pt_tempo_compute(
            bath, 0.0, 1.2, parameters, progress_type="silent", options=options
        )
        rho0 = numpy.diag([1.0, 0.0, 0.0]).astype(complex)
        dynamics = nm.compute_dynamics(
            nm.System(sx), rho0, process_tensor=pt, progress_type="silent"
        )
    return numpy.asarray(dynamics.states), max(pt.get_bond_dimensions())


def spin_boson_tempo(epsrel: float, sweep: str) -> tuple[numpy.ndarray, int]:
    system, bath, rho0 = spin_boson(alpha=0.3)
    parameters = nm.TempoParameters(dt=0.1, dkmax=10, epsrel=epsrel)
    options = nm.options.default_options().replace(window_sweep=sweep)
    with backends.use_backend("numpy", "double"):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=options)
        dynamics = tempo.compute(2.0, progress_type="silent")
    return numpy.asarray(dynamics.states), tempo.max_bond_dimension


@pytest.mark.parametrize("run", [spin_one_pt_dynamics, spin_boson_tempo])
@pytest.mark.slow
def test_the_zip_up_cut_costs_little_accuracy(run):
    reference, _ = run(1e-8, "exact")
    zip_states, zip_bond = run(1e-6, "zip_up")
    exact_states, exact_bond = run(1e-6, "exact")
    zip_error = numpy.max(numpy.abs(zip_states - reference))
    exact_error = numpy.max(numpy.abs(exact_states - reference))
    assert 0.0 < exact_error < 1e-3
    assert zip_error <= 1.5 * exact_error
    assert abs(zip_bond - exact_bond) <= max(2, exact_bond // 5)


@pytest.mark.parametrize("key", ["ohmic-T0", "three-level"])
def test_the_zip_up_gives_the_exact_independent_boson_coherence(key):
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem(key)
    options = nm.options.default_options().replace(window_sweep="zip_up")
    with backends.use_backend("numpy", "double"):
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, options=options)
        dynamics = tempo.compute(end_time, progress_type="silent")
    # full memory, epsrel 1e-10, no Trotter error: exact to the truncation (as test_tempo)
    assert_coherences_match(numpy.asarray(dynamics.states), exact, closed, bound=1e-8)


def decaying_matrix(rows: int, cols: int, decay: float) -> numpy.ndarray:
    """A complex (rows, cols) matrix with singular values exp(-decay i), random vectors."""
    size = min(rows, cols)
    u = numpy.linalg.qr(RNG.normal(size=(rows, size)) + 1j * RNG.normal(size=(rows, size)))[0]
    v = numpy.linalg.qr(RNG.normal(size=(cols, size)) + 1j * RNG.normal(size=(cols, size)))[0]
    return (u * numpy.exp(-decay * numpy.arange(size))[None, :]) @ v.conj().T


@pytest.mark.parametrize("expected", [30, 4])  # about right, and far too small
@pytest.mark.parametrize("epsrel", [1e-4, 1e-8])
def test_the_sketched_svd_keeps_the_truncation_guarantee(expected, epsrel):
    matrix = decaying_matrix(200, 300, 0.5)
    u, s, vh = sketched_truncated_svd(matrix, epsrel, expected)
    plain_rank = truncated_svd(matrix, epsrel)[1].shape[0]
    assert u.shape == (200, len(s)) and vh.shape == (len(s), 300)
    assert plain_rank <= len(s) <= plain_rank + 1
    discarded = numpy.linalg.norm(matrix - (u * s[None, :]) @ vh)
    assert discarded <= epsrel * numpy.linalg.norm(matrix, 2) * (1.0 + 1e-6)
    numpy.testing.assert_allclose(u.conj().T @ u, numpy.eye(len(s)), atol=1e-12)
    numpy.testing.assert_allclose(vh @ vh.conj().T, numpy.eye(len(s)), atol=1e-12)


def copied_rows_matrix(groups: int, copies: int, cols: int, spread: float, spread_rank: int):
    """Rows (g, copies): every copy of a group row is one decaying matrix plus a
    small difference of rank ``spread_rank`` and size ``spread``."""
    base = decaying_matrix(groups, cols, 0.3)
    shift = decaying_matrix(groups * copies, cols, 0.5)
    u, s, vh = numpy.linalg.svd(shift, full_matrices=False)
    shift = (u[:, :spread_rank] * s[:spread_rank]) @ vh[:spread_rank]
    return numpy.repeat(base, copies, axis=0) + spread * shift / numpy.linalg.norm(shift, 2)


@pytest.mark.parametrize("spread_rank", [3, 60])  # within the first block, and far beyond it
@pytest.mark.parametrize("epsrel", [1e-4, 1e-8])
def test_the_sketch_of_copied_rows_keeps_the_truncation_guarantee(spread_rank, epsrel):
    matrix = copied_rows_matrix(40, 5, 240, 1e-2, spread_rank)
    u, s, vh = sketched_truncated_svd(matrix, epsrel, 40, copies=5)
    plain = truncated_svd(matrix, epsrel)[1]
    assert len(plain) <= len(s) <= len(plain) + 2
    # Weyl: what the sketch leaves out (norm <= epsrel s_max) moves no value by more
    numpy.testing.assert_allclose(s[: len(plain)], plain[: len(s)], rtol=0, atol=epsrel * plain[0])
    discarded = numpy.linalg.norm(matrix - (u * s[None, :]) @ vh)
    assert discarded <= epsrel * numpy.linalg.norm(matrix, 2) * (1.0 + 1e-6)
    numpy.testing.assert_allclose(u.conj().T @ u, numpy.eye(len(s)), atol=1e-12)
    numpy.testing.assert_allclose(vh @ vh.conj().T, numpy.eye(len(s)), atol=1e-12)


def test_a_sketch_as_wide_as_the_matrix_is_the_plain_svd():
    matrix = decaying_matrix(40, 60, 0.2)
    sketched = sketched_truncated_svd(matrix, 1e-6, 20)
    plain = truncated_svd(matrix, 1e-6)
    for left, right in zip(sketched, plain):
        numpy.testing.assert_array_equal(left, right)


def test_the_sketch_test_columns_are_fixed_numbers_of_their_indices():
    small = sketch_gaussians(3, 10, 0, 20).reshape(3, 10, 20)
    large = sketch_gaussians(3, 37, 5, 40).reshape(3, 37, 40)
    numpy.testing.assert_array_equal(small[:, :, 5:], large[:, :10, :15])
    grid = sketch_gaussians(4, 256, 0, 256)
    assert abs(grid.mean()) < 0.01 and abs(grid.std() - 1.0) < 0.01


def test_the_rank_rule_is_the_same_on_short_and_padded_spectra():
    rng = numpy.random.default_rng(7)
    for _ in range(2000):
        size = int(rng.integers(1, 60))
        s = rng.random(size) ** int(rng.integers(1, 30))
        if rng.random() < 0.3:  # a multiplet
            start = int(rng.integers(0, size))
            s[start : start + 3] = s[start]
        if rng.random() < 0.2:  # zeros
            s[int(rng.integers(0, size)) :] = 0.0
        s = numpy.sort(s)[::-1].copy()
        epsrel = 10.0 ** -int(rng.integers(1, 14))
        max_rank = None if rng.random() < 0.7 else int(rng.integers(1, 70))
        padded = numpy.concatenate([s, numpy.zeros(80)])
        assert int(rank_rule(s, epsrel, max_rank)) == int(rank_rule(padded, epsrel, max_rank))


def test_the_option_is_checked():
    with pytest.raises(ValueError, match="window_sweep"):
        nm.options.EngineOptions(window_sweep="fast")
    with pytest.raises(ValueError, match="compiled"):
        nm.options.EngineOptions(compiled="always")
