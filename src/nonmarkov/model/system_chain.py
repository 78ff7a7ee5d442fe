"""Chains of small systems with nearest-neighbour couplings, and their controls.

A :class:`SystemChain` of n sites (site k of Hilbert space dimension d_k)
holds one Liouvillian per site, (d_k^2, d_k^2), and one per neighbouring pair
(k, k+1), (d_k^2 d_{k+1}^2, d_k^2 d_{k+1}^2). Superoperators use the
library's row-major vectorisation, vec(A rho B) = (A kron B^T) vec(rho); a
pair's Liouville index is site k's index first, then site k+1's
(``alpha_k * d_{k+1}^2 + alpha_{k+1}``), the order of
:func:`nonmarkov.operators.cross_commutator` and friends.

:class:`ChainControl` holds instantaneous single-site control superoperators
at chosen time steps, before (``post=False``) or after (``post=True``) the
state of that step is recorded.

Both are model objects: small host arrays, checked on entry; PT-TEBD
(:mod:`nonmarkov.methods.pt_tebd`) turns them into gates.
"""

from __future__ import annotations

from typing import Any

import numpy as default_np

from .. import validation as check
from ..cost import affordable_run
from .operators import (
    commutator,
    cross_acommutator,
    cross_commutator,
    cross_left_right_super,
    lindblad_dissipator,
)


def chain_dimensions(hilbert_space_dimensions: Any, name: str) -> default_np.ndarray:
    """The site dimensions as an int array (n,), n >= 1, each >= 1; else TypeError/ValueError."""
    if isinstance(hilbert_space_dimensions, (str, bytes)) or not hasattr(
        hilbert_space_dimensions, "__len__"
    ):
        raise TypeError(
            f"{name} must be a list of positive integers (one per site); "
            f"got {hilbert_space_dimensions!r}"
        )
    dims = [
        check.positive_integer(d, f"{name}[{k}]") for k, d in enumerate(hilbert_space_dimensions)
    ]
    if not dims:
        raise ValueError(f"{name} must name at least one site")
    return default_np.array(dims, dtype=int)


def _site_index(site: Any, length: int, name: str = "site") -> int:
    if isinstance(site, bool) or not isinstance(site, (int, default_np.integer)):
        raise TypeError(f"{name} must be an integer; got {site!r}")
    if not 0 <= site < length:
        raise ValueError(f"{name} must be in 0..{length - 1}; got {site}")
    return int(site)


def _superoperator(value: Any, name: str, dimension: int) -> default_np.ndarray:
    matrix = check.square_matrix(value, name, kind="superoperator")
    if matrix.shape[0] != dimension:
        raise ValueError(f"{name} must be ({dimension}, {dimension}); got {matrix.shape}")
    return matrix


class _Sites:
    """What a chain and its controls share: the site dimensions, a name, a description."""

    def __init__(self, hilbert_space_dimensions: Any, name: str | None, description: str | None):
        self._hs_dims = chain_dimensions(hilbert_space_dimensions, "hilbert_space_dimensions")
        self.name = f"Unnamed {type(self).__name__}" if name is None else str(name)
        self.description = "" if description is None else str(description)

    def __len__(self) -> int:
        return len(self._hs_dims)

    @property
    def hs_dims(self) -> default_np.ndarray:
        """The site dimensions (n,) (a copy)."""
        return self._hs_dims.copy()


class SystemChain(_Sites):
    """A 1D chain of systems with site and nearest-neighbour Liouvillians.

    Parameters
    ----------
    hilbert_space_dimensions : list of int, the dimension d_k of each site
        (n >= 1 sites; they may differ).
    name, description : optional text.

    Terms are added with the ``add_*`` methods; every one checks its site
    index and the dimensions of its operators (``ValueError``/``TypeError``).
    Time is in units with hbar = 1; a Hamiltonian term H adds -i[H, .].
    """

    def __init__(
        self,
        hilbert_space_dimensions: Any,
        name: str | None = None,
        description: str | None = None,
    ):
        super().__init__(hilbert_space_dimensions, name, description)
        dims = self._hs_dims
        squares = dims.astype(float) ** 2
        held = float(default_np.sum(squares**2) + default_np.sum((squares[:-1] * squares[1:]) ** 2))
        affordable_run(
            1,
            int(default_np.max(dims)),
            0,
            "SystemChain",
            members=len(dims),
            unit="sites",
            cause=f"{len(dims)} sites",
            held_bytes=int(min(held * 16, 2**62)),
            remedy="use a shorter chain or smaller sites",
        )
        self._site_liouvillians = [default_np.zeros((d**2, d**2), dtype=complex) for d in dims]
        self._nn_liouvillians = [
            default_np.zeros((dl**2 * dr**2, dl**2 * dr**2), dtype=complex)
            for dl, dr in zip(dims[:-1], dims[1:])
        ]

    def __str__(self) -> str:
        return (
            f"SystemChain {self.name!r}: {len(self)} sites of dimensions {self._hs_dims.tolist()}"
        )

    @property
    def site_liouvillians(self) -> list[default_np.ndarray]:
        """The single-site Liouvillians, (d_k^2, d_k^2) each (copies)."""
        return [m.copy() for m in self._site_liouvillians]

    @property
    def nn_liouvillians(self) -> list[default_np.ndarray]:
        """The nearest-neighbour Liouvillians of pairs (k, k+1), without site terms (copies)."""
        return [m.copy() for m in self._nn_liouvillians]

    # ------------------------------------------------------------- checks

    def _site(self, site: Any) -> int:
        return _site_index(site, len(self))

    def _pair(self, site: Any) -> int:
        if len(self) < 2:
            raise ValueError("a nearest-neighbour term needs a chain of at least two sites")
        return _site_index(site, len(self) - 1, "site (the left site of the pair)")

    def _operator(self, value: Any, name: str, site: int) -> default_np.ndarray:
        matrix = check.square_matrix(value, name)
        if matrix.shape[0] != self._hs_dims[site]:
            raise ValueError(
                f"{name} is {matrix.shape[0]}-dimensional but site {site} has dimension "
                f"{self._hs_dims[site]}"
            )
        return matrix

    # ------------------------------------------------------------- site terms

    def add_site_hamiltonian(self, site: int, hamiltonian: Any) -> None:
        """Add -i[H, rho_k] to site ``site`` (H: (d_k, d_k))."""
        site = self._site(site)
        matrix = self._operator(hamiltonian, "hamiltonian", site)
        matrix = check.hermitian_matrix(matrix, "hamiltonian")
        self._site_liouvillians[site] = self._site_liouvillians[site] - 1j * commutator(matrix)

    def add_site_liouvillian(self, site: int, liouvillian: Any) -> None:
        """Add a superoperator (d_k^2, d_k^2) to the Liouvillian of site ``site``."""
        site = self._site(site)
        d2 = int(self._hs_dims[site]) ** 2
        matrix = _superoperator(liouvillian, "liouvillian", d2)
        self._site_liouvillians[site] = self._site_liouvillians[site] + matrix

    def add_site_dissipation(self, site: int, lindblad_operator: Any, gamma: float = 1.0) -> None:
        """Add gamma (A rho A^dag - 1/2 {A^dag A, rho}) to site ``site`` (A: (d_k, d_k))."""
        site = self._site(site)
        a = self._operator(lindblad_operator, "lindblad_operator", site)
        gamma = check.non_negative_number(gamma, "gamma")
        term = lindblad_dissipator(a)
        self._site_liouvillians[site] = self._site_liouvillians[site] + gamma * term

    # ------------------------------------------------------------- pair terms

    def add_nn_hamiltonian(self, site: int, hamiltonian_l: Any, hamiltonian_r: Any) -> None:
        """Add -i[H_l kron H_r, rho] to the pair (``site``, ``site`` + 1)."""
        site = self._pair(site)
        left = self._operator(hamiltonian_l, "hamiltonian_l", site)
        right = self._operator(hamiltonian_r, "hamiltonian_r", site + 1)
        check.hermitian_matrix(
            default_np.kron(left, right), "the pair term hamiltonian_l kron hamiltonian_r"
        )
        self._nn_liouvillians[site] = self._nn_liouvillians[site] - 1j * cross_commutator(
            left, right
        )

    def add_nn_liouvillian(self, site: int, liouvillian_l_r: Any) -> None:
        """Add a two-site superoperator (d_k^2 d_{k+1}^2, same) to the pair
        (``site``, ``site`` + 1).

        A ``qutip.Qobj`` superoperator on the pair's joint density matrix is
        reordered from the joint row-major vectorisation to the site-by-site
        one used here.
        """
        site = self._pair(site)
        d_l, d_r = int(self._hs_dims[site]), int(self._hs_dims[site + 1])
        d2 = (d_l * d_r) ** 2
        matrix = _superoperator(liouvillian_l_r, "liouvillian_l_r", d2)
        if check.is_qobj(liouvillian_l_r):
            # index (i_l, i_r, j_l, j_r) of rho_joint[i, j] -> (i_l, j_l, i_r, j_r)
            dims = (d_l, d_r, d_l, d_r)
            matrix = matrix.reshape(dims + dims).transpose(0, 2, 1, 3, 4, 6, 5, 7).reshape(d2, d2)
        self._nn_liouvillians[site] = self._nn_liouvillians[site] + matrix

    def add_nn_dissipation(
        self,
        site: int,
        lindblad_operator_l: Any,
        lindblad_operator_r: Any,
        gamma: float = 1.0,
    ) -> None:
        """Add gamma (A rho A^dag - 1/2 {A^dag A, rho}) with A = A_l kron A_r to the pair
        (``site``, ``site`` + 1)."""
        site = self._pair(site)
        a_l = self._operator(lindblad_operator_l, "lindblad_operator_l", site)
        a_r = self._operator(lindblad_operator_r, "lindblad_operator_r", site + 1)
        gamma = check.non_negative_number(gamma, "gamma")
        jump = cross_left_right_super(a_l, a_l.conj().T, a_r, a_r.conj().T)
        anti = cross_acommutator(a_l.conj().T @ a_l, a_r.conj().T @ a_r)
        self._nn_liouvillians[site] = self._nn_liouvillians[site] + gamma * (jump - 0.5 * anti)

    def get_nn_full_liouvillians(self) -> list[default_np.ndarray]:
        """The Liouvillian of each pair (k, k+1) with the site terms shared out.

        A site term enters the pairs it belongs to with weight 1/2 each, the
        end sites' with weight 1 (their only pair), so that the sum over pairs
        is the Liouvillian of the whole chain. Needs n >= 2 sites.
        """
        if len(self) < 2:
            raise ValueError(
                "a chain of one site has no nearest-neighbour pairs; its Liouvillian is "
                "site_liouvillians[0]"
            )
        full = []
        last = len(self) - 2
        for k, pair in enumerate(self._nn_liouvillians):
            dl, dr = int(self._hs_dims[k]) ** 2, int(self._hs_dims[k + 1]) ** 2
            weight_l = 1.0 if k == 0 else 0.5
            weight_r = 1.0 if k == last else 0.5
            full.append(
                pair
                + weight_l * default_np.kron(self._site_liouvillians[k], default_np.identity(dr))
                + weight_r
                * default_np.kron(default_np.identity(dl), self._site_liouvillians[k + 1])
            )
        return full


class ChainControl(_Sites):
    """Single-site control superoperators at time steps of a chain.

    A control at step k acts on the chain state at t_k: before it is recorded
    (``post=False``, the default; at step 0 on the initial state) or after it
    is recorded, before the propagation to t_{k+1} (``post=True``). Controls
    of one site, step and slot combine: a later one acts first
    (``earlier @ later``), as in OQuPy.

    Parameters
    ----------
    hilbert_space_dimensions : list of int, the site dimensions of the chain.
    name, description : optional text.
    """

    def __init__(
        self,
        hilbert_space_dimensions: Any,
        name: str | None = None,
        description: str | None = None,
    ):
        super().__init__(hilbert_space_dimensions, name, description)
        self._controls: dict[bool, list[dict[str, Any]]] = {False: [], True: []}

    def add_single_site_control(
        self,
        control: Any,
        site: int,
        step: int,
        post: bool = False,
        name: str | None = None,
    ) -> None:
        """Add ``control`` (d_site^2, d_site^2), a superoperator on the row-major
        vectorised density matrix of ``site``, at time step ``step`` (>= 0)."""
        site = _site_index(site, len(self))
        step = check.positive_integer(step, "step", minimum=0)
        post = check.boolean(post, "post")
        d2 = int(self._hs_dims[site]) ** 2
        matrix = _superoperator(control, "control", d2)
        self._controls[post].append({"contr": matrix, "site": site, "step": step, "name": name})

    def get_single_site_controls(self, step: int, post: bool) -> list[Any] | None:
        """The combined control of each site at ``step`` (None where a site has none),
        or None if no site has one there."""
        found = False
        controls: list[Any] = [None] * len(self)
        for entry in self._controls[check.boolean(post, "post")]:
            if entry["step"] != step:
                continue
            found = True
            site = entry["site"]
            current = controls[site]
            controls[site] = entry["contr"].copy() if current is None else current @ entry["contr"]
        return controls if found else None

    @property
    def steps(self) -> set[int]:
        """The steps with at least one control."""
        return {entry["step"] for slot in self._controls.values() for entry in slot}
