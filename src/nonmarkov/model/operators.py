"""Spin and boson operators, density matrices and superoperators.

Everything here is small and built on the host: functions return NumPy arrays
of dtype complex128. Algorithms move them to the active backend once.

Superoperators use row-major vectorisation, vec(A rho B) = (A kron B^T) vec(rho):
``left_super(A) = A kron I`` and ``right_super(B) = I kron B^T``. The
two-site superoperators (``cross_commutator``, ``cross_acommutator``,
``cross_left_right_super``) act on the product of two such Liouville spaces,
site 1 first.
"""

from __future__ import annotations

import numpy as default_np

from ..validation import square_matrix

# The tables are kept private and immutable, so that ``sigma`` and ``spin_dm``
# cannot be changed by editing the public dictionaries below.
_SIGMA: dict[str, tuple[tuple[complex, ...], ...]] = {
    "id": ((1, 0), (0, 1)),
    "x": ((0, 1), (1, 0)),
    "y": ((0, -1j), (1j, 0)),
    "z": ((1, 0), (0, -1)),
    "+": ((0, 1), (0, 0)),
    "-": ((0, 0), (1, 0)),
}

_SPIN_DM: dict[str, tuple[tuple[complex, ...], ...]] = {
    "up": ((1, 0), (0, 0)),
    "down": ((0, 0), (0, 1)),
    "z+": ((1, 0), (0, 0)),
    "z-": ((0, 0), (0, 1)),
    "x+": ((0.5, 0.5), (0.5, 0.5)),
    "x-": ((0.5, -0.5), (-0.5, 0.5)),
    "y+": ((0.5, -0.5j), (0.5j, 0.5)),
    "y-": ((0.5, 0.5j), (-0.5j, 0.5)),
    "mixed": ((0.5, 0.0), (0.0, 0.5)),
}

#: The Pauli matrices by name, as nested lists: ``'id'``, ``'x'``, ``'y'``,
#: ``'z'``, ``'+'`` (raising, |up><down|) and ``'-'`` (lowering). ``sigma(name)``
#: gives the same matrix as a complex array.
SIGMA: dict[str, list[list[complex]]] = {
    key: [list(row) for row in value] for key, value in _SIGMA.items()
}

#: Spin-1/2 density matrices by name, as nested lists: ``'up'``/``'z+'``,
#: ``'down'``/``'z-'``, ``'x+'``, ``'x-'``, ``'y+'``, ``'y-'`` and ``'mixed'``.
#: ``spin_dm(name)`` gives the same matrix as a complex array.
SPIN_DM: dict[str, list[list[complex]]] = {
    key: [list(row) for row in value] for key, value in _SPIN_DM.items()
}


def _as_matrix(operator, name: str) -> default_np.ndarray:
    """``operator`` as a square complex128 NumPy matrix, or a clear error."""
    return square_matrix(operator, name)


def _check_dimension(n, name: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, (int, default_np.integer)):
        raise TypeError(f"{name} must be a positive integer; got {n!r}")
    if n < 1:
        raise ValueError(f"{name} must be a positive integer; got {n}")
    return int(n)


def identity(n: int) -> default_np.ndarray:
    """The n x n identity matrix (complex)."""
    return default_np.identity(_check_dimension(n), dtype=default_np.complex128)


def sigma(name: str) -> default_np.ndarray:
    """Pauli matrix: ``'id'``, ``'x'``, ``'y'``, ``'z'``, ``'+'`` (raising) or ``'-'``."""
    if name not in _SIGMA:
        raise ValueError(f"unknown Pauli operator {name!r}; valid names are {list(_SIGMA)}")
    return default_np.array(_SIGMA[name], dtype=default_np.complex128)


def spin_dm(name: str) -> default_np.ndarray:
    """Spin-1/2 density matrix: ``'up'``/``'z+'``, ``'down'``/``'z-'``, ``'x+'``,
    ``'x-'``, ``'y+'``, ``'y-'`` or ``'mixed'``."""
    if name not in _SPIN_DM:
        raise ValueError(f"unknown spin state {name!r}; valid names are {list(_SPIN_DM)}")
    return default_np.array(_SPIN_DM[name], dtype=default_np.complex128)


def create(n: int) -> default_np.ndarray:
    """Boson creation operator truncated to n levels, (n, n)."""
    n = _check_dimension(n)
    return default_np.diag(default_np.sqrt(default_np.arange(1, n)), k=-1).astype(
        default_np.complex128
    )


def destroy(n: int) -> default_np.ndarray:
    """Boson annihilation operator truncated to n levels, (n, n)."""
    n = _check_dimension(n)
    return default_np.diag(default_np.sqrt(default_np.arange(1, n)), k=1).astype(
        default_np.complex128
    )


def commutator(operator) -> default_np.ndarray:
    """Superoperator of ``rho -> [A, rho]``, (d^2, d^2)."""
    matrix = _as_matrix(operator, "operator")
    return left_super(matrix) - right_super(matrix)


def acommutator(operator) -> default_np.ndarray:
    """Superoperator of ``rho -> {A, rho}``, (d^2, d^2)."""
    matrix = _as_matrix(operator, "operator")
    return left_super(matrix) + right_super(matrix)


def left_super(operator) -> default_np.ndarray:
    """Superoperator of ``rho -> A rho``: A kron I, (d^2, d^2)."""
    matrix = _as_matrix(operator, "operator")
    return default_np.kron(matrix, default_np.identity(matrix.shape[0]))


def right_super(operator) -> default_np.ndarray:
    """Superoperator of ``rho -> rho B``: I kron B^T, (d^2, d^2)."""
    matrix = _as_matrix(operator, "operator")
    return default_np.kron(default_np.identity(matrix.shape[0]), matrix.T)


def left_right_super(left_operator, right_operator) -> default_np.ndarray:
    """Superoperator of ``rho -> A rho B``: A kron B^T, (d^2, d^2)."""
    left = _as_matrix(left_operator, "left_operator")
    right = _as_matrix(right_operator, "right_operator")
    if left.shape != right.shape:
        raise ValueError(
            f"left_operator and right_operator must have the same shape; got {left.shape} "
            f"and {right.shape}"
        )
    return default_np.kron(left, right.T)


def unitary_super(unitary) -> default_np.ndarray:
    """Superoperator of ``rho -> U rho U^dagger``: U kron U^*, (d^2, d^2)."""
    matrix = _as_matrix(unitary, "unitary")
    return default_np.kron(matrix, matrix.conj())


def lindblad_dissipator(operator) -> default_np.ndarray:
    """Superoperator of ``rho -> A rho A^dag - 1/2 {A^dag A, rho}``, (d^2, d^2)."""
    matrix = _as_matrix(operator, "operator")
    ada = matrix.conj().T @ matrix
    return left_right_super(matrix, matrix.conj().T) - 0.5 * acommutator(ada)


def preparation(density_matrix) -> default_np.ndarray:
    """Superoperator that traces the state out and prepares ``density_matrix``.

    ``rho -> Tr(rho) sigma``: the matrix vec(sigma) vec(I)^T, (d^2, d^2).
    """
    matrix = square_matrix(density_matrix, "density_matrix", kind="state")
    dim = matrix.shape[0]
    return default_np.outer(matrix.flatten(), default_np.identity(dim).flatten())


# --------------------------------------------------------------------------
# two-site superoperators
# --------------------------------------------------------------------------
#
# A two-site superoperator acts on the product of the two Liouville spaces,
# site 1 first: the index of a vector is alpha_1 * d_2^2 + alpha_2 with
# alpha_n = i_n * d_n + j_n the row-major Liouville index of site n. A product
# state rho_1 kron rho_2 is the vector vec(rho_1) kron vec(rho_2); a general
# two-site operator R (rows (i_1, i_2), columns (j_1, j_2)) is
# ``R.reshape(d1, d2, d1, d2).transpose(0, 2, 1, 3).reshape(-1)``. The maps are
# (d_1^2 d_2^2, d_1^2 d_2^2), d^4 x d^4 for two sites of dimension d.


def cross_left_right_super(
    operator_1_l, operator_1_r, operator_2_l, operator_2_r
) -> default_np.ndarray:
    """Two-site superoperator of ``R -> (A_1 kron A_2) R (B_1 kron B_2)``.

    ``operator_1_l`` = A_1 and ``operator_1_r`` = B_1 act on site 1 (d_1, d_1),
    ``operator_2_l`` = A_2 and ``operator_2_r`` = B_2 on site 2 (d_2, d_2).
    Returns ``left_right_super(A_1, B_1) kron left_right_super(A_2, B_2)``,
    (d_1^2 d_2^2, d_1^2 d_2^2), in the site-by-site Liouville order described
    above.
    """
    first = left_right_super(operator_1_l, operator_1_r)
    second = left_right_super(operator_2_l, operator_2_r)
    return default_np.kron(first, second)


def _two_site_parts(operator_1, operator_2) -> tuple[default_np.ndarray, default_np.ndarray]:
    """The left (A_1 kron A_2) R and right R (A_1 kron A_2) two-site superoperators."""
    first = _as_matrix(operator_1, "operator_1")
    second = _as_matrix(operator_2, "operator_2")
    left = default_np.kron(left_super(first), left_super(second))
    right = default_np.kron(right_super(first), right_super(second))
    return left, right


def cross_commutator(operator_1, operator_2) -> default_np.ndarray:
    """Two-site superoperator of ``R -> [A_1 kron A_2, R]``.

    ``operator_1`` = A_1 acts on site 1 (d_1, d_1), ``operator_2`` = A_2 on
    site 2 (d_2, d_2). Returns a (d_1^2 d_2^2, d_1^2 d_2^2) matrix in the
    site-by-site Liouville order described above; ``-1j * cross_commutator(A, B)``
    is the generator of a coupling Hamiltonian A kron B between two sites.
    """
    left, right = _two_site_parts(operator_1, operator_2)
    return left - right


def cross_acommutator(operator_1, operator_2) -> default_np.ndarray:
    """Two-site superoperator of ``R -> {A_1 kron A_2, R}``.

    Shapes and index order as :func:`cross_commutator`.
    """
    left, right = _two_site_parts(operator_1, operator_2)
    return left + right


def vectorise(matrix) -> default_np.ndarray:
    """Row-major vec of a (d, d) matrix: shape (d^2,)."""
    return _as_matrix(matrix, "matrix").reshape(-1)


def unvectorise(vector) -> default_np.ndarray:
    """Inverse of :func:`vectorise`: (d^2,) -> (d, d)."""
    vector = default_np.asarray(vector)
    dim = int(round(default_np.sqrt(vector.shape[-1])))
    return vector.reshape(vector.shape[:-1] + (dim, dim))
