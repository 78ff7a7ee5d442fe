"""Bath: eigendecomposition of the coupling operator and Liouville-space degeneracies."""

from __future__ import annotations

import numpy
import pytest
import scipy.stats

import nonmarkov
from nonmarkov import operators as op


@pytest.fixture(scope="module")
def correlations():
    return nonmarkov.PowerLawSD(0.1, 1.0, 3.0, "exponential", 0.0)


def random_unitary(d: int, seed: int) -> numpy.ndarray:
    return scipy.stats.unitary_group.rvs(d, random_state=seed)


@pytest.mark.parametrize("seed", [1, 2])
def test_eigendecomposition_reproduces_the_coupling_operator(correlations, seed):
    rng = numpy.random.default_rng(seed)
    m = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    s = 0.5 * (m + m.conj().T)
    bath = nonmarkov.Bath(s, correlations)
    v = bath.unitary_transform
    eigenvalues = bath.coupling_eigenvalues
    assert bath.dimension == 4
    assert numpy.all(numpy.diff(eigenvalues) >= 0)
    numpy.testing.assert_allclose(v.conj().T @ v, numpy.eye(4), atol=1e-12)
    numpy.testing.assert_allclose(v @ numpy.diag(eigenvalues) @ v.conj().T, s, atol=1e-12)
    numpy.testing.assert_allclose(bath.coupling_operator, s, atol=1e-15)


def test_spin_boson_coupling(correlations):
    bath = nonmarkov.Bath(0.5 * op.sigma("z"), correlations)
    numpy.testing.assert_allclose(bath.coupling_eigenvalues, [-0.5, 0.5])
    s_plus, s_minus = bath.liouville_eigenvalues()
    # alpha = a * d + b (ket a, bra b)
    v = bath.unitary_transform
    expected = numpy.diag(v.conj().T @ (0.5 * op.sigma("z")) @ v).real
    numpy.testing.assert_allclose(s_plus, numpy.repeat(expected, 2))
    numpy.testing.assert_allclose(s_minus, numpy.tile(expected, 2))


def test_degenerate_eigenvalues_are_exactly_equal(correlations):
    u = random_unitary(3, seed=11)
    s = u @ numpy.diag([1.0, 0.0, 0.0]) @ u.conj().T
    bath = nonmarkov.Bath(s, correlations)
    eigenvalues = bath.coupling_eigenvalues
    assert eigenvalues[0] == eigenvalues[1]  # exact, not approximately equal
    assert eigenvalues[0] == pytest.approx(0.0, abs=1e-12)
    assert eigenvalues[2] == pytest.approx(1.0, abs=1e-12)
    v = bath.unitary_transform
    numpy.testing.assert_allclose(v @ numpy.diag(eigenvalues) @ v.conj().T, s, atol=1e-12)


def test_liouville_degeneracy_maps_nine_indices_onto_four_pairs(correlations):
    u = random_unitary(3, seed=5)
    bath = nonmarkov.Bath(u @ numpy.diag([1.0, 0.0, 0.0]) @ u.conj().T, correlations)
    s_plus_unique, s_minus_unique, index = bath.liouville_degeneracy()
    assert s_plus_unique.shape == s_minus_unique.shape == (4,)
    assert index.shape == (9,)
    assert index.dtype.kind in "iu"
    pairs = {(round(a, 12), round(b, 12)) for a, b in zip(s_plus_unique, s_minus_unique)}
    assert pairs == {(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)}
    # the map sends every alpha to its own (s_a, s_b) pair
    s_plus, s_minus = bath.liouville_eigenvalues()
    numpy.testing.assert_array_equal(s_plus_unique[index], s_plus)
    numpy.testing.assert_array_equal(s_minus_unique[index], s_minus)
    # multiplicities: two-fold degenerate 0 -> (0,0) x4, (0,1) x2, (1,0) x2, (1,1) x1
    counts = sorted(numpy.bincount(index, minlength=4).tolist())
    assert counts == [1, 2, 2, 4]


def test_non_degenerate_coupling_has_no_merged_indices(correlations):
    bath = nonmarkov.Bath(numpy.diag([-1.0, 0.5, 2.0]), correlations)
    s_plus_unique, _, index = bath.liouville_degeneracy()
    assert len(s_plus_unique) == 9
    assert sorted(index.tolist()) == list(range(9))


def test_bath_keeps_its_correlations(correlations):
    bath = nonmarkov.Bath(op.sigma("x"), correlations, name="phonons")
    assert bath.correlations is correlations
    assert "phonons" in str(bath)


# --- bad input -------------------------------------------------------------------------------


def test_non_hermitian_coupling_operator(correlations):
    with pytest.raises(ValueError, match="coupling_operator must be Hermitian"):
        nonmarkov.Bath(op.sigma("+"), correlations)


def test_non_square_coupling_operator(correlations):
    with pytest.raises(ValueError, match="coupling_operator must be a non-empty square matrix"):
        nonmarkov.Bath(numpy.ones((2, 3)), correlations)


def test_correlations_of_the_wrong_type():
    with pytest.raises(TypeError, match="correlations must be a correlations object"):
        nonmarkov.Bath(op.sigma("z"), lambda tau: 1.0)
