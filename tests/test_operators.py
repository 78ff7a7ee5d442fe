"""Operator algebra and superoperators in the row-major convention (docs/index.md, Conventions)."""

from __future__ import annotations

import numpy
import pytest

from nonmarkov import operators as op

RNG = numpy.random.default_rng(20240611)


def random_matrix(d: int) -> numpy.ndarray:
    return RNG.normal(size=(d, d)) + 1j * RNG.normal(size=(d, d))


def random_density_matrix(d: int) -> numpy.ndarray:
    m = random_matrix(d)
    rho = m @ m.conj().T
    return rho / numpy.trace(rho)


def vec(matrix: numpy.ndarray) -> numpy.ndarray:
    """Row-major vectorisation, written out independently of the library."""
    return numpy.asarray(matrix).reshape(-1)


def assert_close(a, b, tol=1e-12):
    numpy.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# --- Pauli and spin operators -------------------------------------------------------


def test_pauli_products_follow_the_su2_algebra():
    x, y, z, one = op.sigma("x"), op.sigma("y"), op.sigma("z"), op.sigma("id")
    assert_close(x @ y, 1j * z)
    assert_close(y @ z, 1j * x)
    assert_close(z @ x, 1j * y)
    for s in (x, y, z):
        assert_close(s @ s, one)
        assert_close(s, s.conj().T)
        assert abs(numpy.trace(s)) < 1e-15
    for a, b in ((x, y), (y, z), (z, x)):
        assert_close(a @ b + b @ a, numpy.zeros((2, 2)))


def test_raising_and_lowering_pauli_operators():
    x, y, z = op.sigma("x"), op.sigma("y"), op.sigma("z")
    plus, minus = op.sigma("+"), op.sigma("-")
    assert_close(plus, 0.5 * (x + 1j * y))
    assert_close(minus, 0.5 * (x - 1j * y))
    assert_close(minus, plus.conj().T)
    assert_close(plus @ minus - minus @ plus, z)
    # sigma_+ raises 'down' (index 1) to 'up' (index 0)
    assert_close(plus @ numpy.array([0, 1]), numpy.array([1, 0]))


def test_identity():
    assert_close(op.identity(3), numpy.eye(3))
    assert op.identity(4).dtype == numpy.complex128


BLOCH_VECTORS = {
    "up": (0, 0, 1),
    "z+": (0, 0, 1),
    "down": (0, 0, -1),
    "z-": (0, 0, -1),
    "x+": (1, 0, 0),
    "x-": (-1, 0, 0),
    "y+": (0, 1, 0),
    "y-": (0, -1, 0),
    "mixed": (0, 0, 0),
}


@pytest.mark.parametrize("name", list(BLOCH_VECTORS))
def test_spin_dm_is_a_density_matrix_with_the_right_bloch_vector(name):
    rho = op.spin_dm(name)
    assert rho.shape == (2, 2)
    assert_close(rho, rho.conj().T)
    assert abs(numpy.trace(rho) - 1) < 1e-15
    assert numpy.linalg.eigvalsh(rho).min() > -1e-15
    bloch = [numpy.trace(rho @ op.sigma(axis)).real for axis in "xyz"]
    assert_close(bloch, BLOCH_VECTORS[name])
    purity = numpy.trace(rho @ rho).real
    assert purity == pytest.approx(1.0 if name != "mixed" else 0.5)


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_boson_commutator_is_one_except_on_the_last_level(n):
    a, adag = op.destroy(n), op.create(n)
    assert_close(adag, a.conj().T)
    comm = a @ adag - adag @ a
    assert_close(comm[:-1, :-1], numpy.eye(n - 1))
    # truncation: [a, a^dag] on the top level is -(n - 1), not 1
    assert comm[-1, -1] == pytest.approx(-(n - 1))
    off_diagonal = comm - numpy.diag(numpy.diag(comm))
    assert_close(off_diagonal, numpy.zeros((n, n)))


def test_number_operator_and_ladder_action():
    n = 6
    a = op.destroy(n)
    assert_close(a.conj().T @ a, numpy.diag(numpy.arange(n)))
    fock_3 = numpy.zeros(n)
    fock_3[3] = 1
    expected = numpy.zeros(n)
    expected[2] = numpy.sqrt(3)
    assert_close(a @ fock_3, expected)


# --- superoperators -----------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_left_right_superoperators_reproduce_a_rho_b(d):
    a, b, rho = random_matrix(d), random_matrix(d), random_matrix(d)
    assert_close(op.left_super(a) @ vec(rho), vec(a @ rho))
    assert_close(op.right_super(b) @ vec(rho), vec(rho @ b))
    assert_close(op.left_right_super(a, b) @ vec(rho), vec(a @ rho @ b))
    assert_close(op.left_super(a) @ op.right_super(b), op.left_right_super(a, b))
    # left and right multiplication commute
    assert_close(op.left_super(a) @ op.right_super(b), op.right_super(b) @ op.left_super(a))
    # the documented Kronecker forms
    assert_close(op.left_super(a), numpy.kron(a, numpy.eye(d)))
    assert_close(op.right_super(b), numpy.kron(numpy.eye(d), b.T))


@pytest.mark.parametrize("d", [2, 4])
def test_commutator_and_anticommutator_superoperators(d):
    a, rho = random_matrix(d), random_matrix(d)
    assert_close(op.commutator(a) @ vec(rho), vec(a @ rho - rho @ a))
    assert_close(op.acommutator(a) @ vec(rho), vec(a @ rho + rho @ a))


def test_unitary_super_and_lindblad_dissipator():
    d = 3
    h = random_matrix(d)
    h = h + h.conj().T
    w, v = numpy.linalg.eigh(h)
    u = v @ numpy.diag(numpy.exp(-0.7j * w)) @ v.conj().T
    rho = random_density_matrix(d)
    assert_close(op.unitary_super(u) @ vec(rho), vec(u @ rho @ u.conj().T))
    a = random_matrix(d)
    adag = a.conj().T
    expected = a @ rho @ adag - 0.5 * (adag @ a @ rho + rho @ adag @ a)
    assert_close(op.lindblad_dissipator(a) @ vec(rho), vec(expected))
    # a dissipator is trace preserving: vec(I)^T D = 0
    assert_close(vec(numpy.eye(d)) @ op.lindblad_dissipator(a), numpy.zeros(d * d))


def test_cross_left_right_super_acts_on_two_sites():
    """R -> (A1 kron A2) R (B1 kron B2), site by site: on a product state
    rho1 kron rho2 (vector vec(rho1) kron vec(rho2)) each site gets A_n rho_n B_n."""
    d = 2
    a1, b1, a2, b2, rho1, rho2 = (random_matrix(d) for _ in range(6))
    superop = op.cross_left_right_super(a1, b1, a2, b2)
    assert superop.shape == (d**4, d**4)
    expected = numpy.kron(vec(a1 @ rho1 @ b1), vec(a2 @ rho2 @ b2))
    assert_close(superop @ numpy.kron(vec(rho1), vec(rho2)), expected)


def test_preparation_traces_out_and_prepares():
    sigma = op.spin_dm("x+")
    rho = random_matrix(2)
    prep = op.preparation(sigma)
    assert_close(prep @ vec(rho), numpy.trace(rho) * vec(sigma))
    # applying it twice is the same as once on states (a projector onto sigma)
    state = random_density_matrix(2)
    assert_close(prep @ prep @ vec(state), prep @ vec(state))


def test_vectorise_is_row_major_and_unvectorise_inverts_it():
    m = numpy.arange(9).reshape(3, 3) + 0j
    assert_close(op.vectorise(m), [0, 1, 2, 3, 4, 5, 6, 7, 8])
    assert_close(op.unvectorise(op.vectorise(m)), m)
    stack = numpy.stack([vec(m), vec(2 * m)])
    assert_close(op.unvectorise(stack), numpy.stack([m, 2 * m]))


# --- bad input -------------------------------------------------------------------------


def test_unknown_operator_names():
    with pytest.raises(ValueError, match="unknown Pauli operator 'w'"):
        op.sigma("w")
    with pytest.raises(ValueError, match="unknown spin state 'left'"):
        op.spin_dm("left")


@pytest.mark.parametrize(
    "n, error", [(0, ValueError), (-2, ValueError), (2.5, TypeError), (True, TypeError)]
)
def test_bad_boson_dimension(n, error):
    with pytest.raises(error, match="n must be a positive integer"):
        op.destroy(n)
    with pytest.raises(error, match="n must be a positive integer"):
        op.create(n)


def test_non_square_operator_is_rejected():
    with pytest.raises(ValueError, match="operator must be a non-empty square matrix"):
        op.commutator(numpy.ones((2, 3)))
    with pytest.raises(ValueError, match="density_matrix must be a non-empty square"):
        op.preparation(numpy.ones(4))


def test_mismatched_left_right_operators_are_rejected():
    with pytest.raises(ValueError, match="left_operator and right_operator"):
        op.left_right_super(numpy.eye(2), numpy.eye(3))
