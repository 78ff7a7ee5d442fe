"""A Gaussian bath: coupling operator S and correlation function C(tau).

H = H_S + S kron B + H_B. S is diagonalised once (``eigh``); the algorithms
work in its eigenbasis, where the influence functional is diagonal, and
transform back with ``unitary_transform``.

Degeneracies: the influence of the bath on a Liouville-space index
alpha = (a, b) (ket a, bra b) depends only on the pair of eigenvalues
(s_a, s_b). ``liouville_degeneracy()`` maps the d^2 indices onto the distinct
pairs; ``unique=True`` in the algorithms uses it to shrink tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as default_np

from .. import validation as check
from .api import BaseAPIClass
from .correlations import BaseCorrelations

DEGENERACY_TOLERANCE = 1e-10


class Bath(BaseAPIClass):
    """Bath coupled through the Hermitian operator ``coupling_operator`` (d, d).

    Parameters
    ----------
    coupling_operator : (d, d) Hermitian matrix S.
    correlations : a :class:`~nonmarkov.correlations.BaseCorrelations`
        (e.g. ``PowerLawSD``) describing C(tau) of the bath operator B.
    name, description : optional text.
    """

    _default_name = "Unnamed Bath"

    def __init__(
        self,
        coupling_operator: Any,
        correlations: BaseCorrelations,
        name: str | None = None,
        description: str | None = None,
    ):
        self._coupling_operator = check.hermitian_matrix(coupling_operator, "coupling_operator")
        if not isinstance(correlations, BaseCorrelations):
            raise TypeError(
                "correlations must be a correlations object such as PowerLawSD, CustomSD or "
                f"CustomCorrelations; got {type(correlations).__name__}"
            )
        self._correlations = correlations
        super().__init__(name, description)
        eigenvalues, eigenvectors = default_np.linalg.eigh(self._coupling_operator)
        scale = max(1.0, float(default_np.max(default_np.abs(eigenvalues))))
        # snap nearly equal eigenvalues together so that degeneracies are exact
        snapped = eigenvalues.copy()
        for i in range(1, len(snapped)):
            if abs(snapped[i] - snapped[i - 1]) <= DEGENERACY_TOLERANCE * scale:
                snapped[i] = snapped[i - 1]
        self._eigenvalues = snapped
        self._unitary = eigenvectors

    @property
    def correlations(self) -> BaseCorrelations:
        """The bath correlations (spectral density or C(tau))."""
        return self._correlations

    @property
    def dimension(self) -> int:
        """Hilbert-space dimension d of the system the bath couples to."""
        return self._coupling_operator.shape[0]

    @property
    def coupling_operator(self) -> default_np.ndarray:
        """S, (d, d)."""
        return self._coupling_operator.copy()

    @property
    def coupling_eigenvalues(self) -> default_np.ndarray:
        """Eigenvalues s_a of S, ascending, (d,); degenerate ones exactly equal."""
        return self._eigenvalues.copy()

    @property
    def unitary_transform(self) -> default_np.ndarray:
        """V with S = V diag(s) V^dagger; its columns are S's eigenvectors, (d, d)."""
        return self._unitary.copy()

    def liouville_eigenvalues(self) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(s_plus, s_minus): ket and bra eigenvalues of each alpha = a*d + b, each (d^2,)."""
        s = self._eigenvalues
        return default_np.repeat(s, len(s)), default_np.tile(s, len(s))

    @property
    def coupling_comm(self) -> default_np.ndarray:
        """Diagonal of the commutator superoperator of S in its eigenbasis, (d^2,) complex.

        Entry alpha = a*d + b (ket a, bra b) is s_a - s_b: ``[diag(s), .]`` acts
        on |a><b| by this factor. Real valued; complex dtype like the other
        superoperators.
        """
        s_plus, s_minus = self.liouville_eigenvalues()
        return (s_plus - s_minus).astype(default_np.complex128)

    @property
    def coupling_acomm(self) -> default_np.ndarray:
        """Diagonal of the anticommutator superoperator of S in its eigenbasis, (d^2,) complex.

        Entry alpha = a*d + b (ket a, bra b) is s_a + s_b, in the order of
        :attr:`coupling_comm`.
        """
        s_plus, s_minus = self.liouville_eigenvalues()
        return (s_plus + s_minus).astype(default_np.complex128)

    def liouville_degeneracy(
        self,
    ) -> tuple[default_np.ndarray, default_np.ndarray, default_np.ndarray]:
        """Distinct (s_a, s_b) pairs and the map onto them.

        Returns ``(s_plus_unique, s_minus_unique, index)``: the m distinct
        pairs (each (m,)) and, for each of the d^2 indices alpha, the position
        of its pair (``index``, (d^2,) ints).
        """
        s_plus, s_minus = self.liouville_eigenvalues()
        pairs = default_np.stack([s_plus, s_minus], axis=1)
        unique, index = default_np.unique(pairs, axis=0, return_inverse=True)
        return unique[:, 0].copy(), unique[:, 1].copy(), default_np.asarray(index).reshape(-1)

    @property
    def north_degeneracy_map(self) -> default_np.ndarray:
        """(d^2,) ints: for each Liouville index alpha = (a, b) the position of its
        distinct (s_a - s_b, s_a + s_b) pair (the ``index`` of :meth:`liouville_degeneracy`);
        equal numbers mark indices the influence cannot tell apart (``unique=True``)."""
        return self.liouville_degeneracy()[2]

    @property
    def west_degeneracy_map(self) -> default_np.ndarray:
        """(d^2,) ints: for each Liouville index alpha = (a, b) the position of its
        distinct commutator eigenvalue s_a - s_b (:attr:`coupling_comm`) among them."""
        _, index = default_np.unique(self.coupling_comm.real, return_inverse=True)
        return default_np.asarray(index).reshape(-1)

    def __str__(self) -> str:
        return (
            f"Bath {self.name!r}: dimension {self.dimension}, coupling eigenvalues "
            f"{default_np.round(self._eigenvalues, 6).tolist()}, {self.correlations}"
        )
