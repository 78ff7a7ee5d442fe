"""The discretised Feynman-Vernon influence functional of a Gaussian bath.

In the eigenbasis of the coupling operator S a time point k carries the
Liouville index alpha = (a, b) with ket and bra eigenvalues s+ = s_a and
s- = s_b. For points k > k' (lag j = k - k' >= 1) the influence factor is

    I_j(alpha_k, alpha_k') = exp(-(s+_k - s-_k) [Re eta_j (s+_k' - s-_k')
                                               + i Im eta_j (s+_k' + s-_k')]),

and each point has its own factor I_0(alpha_k) with eta_0 in place of eta_j.
eta_0 is the integral of C(t' - t'') over the triangle t'' < t' of one step,
eta_j (j >= 1) the integral over the square of the steps k and k'.

The factors depend on alpha only through the pair (s+, s-); the m distinct
pairs are the "classes" of the tensor-network kernels (m = d^2 unless
``unique=True`` merges degenerate pairs). As a function of the newer point,
I_j depends only on the difference s+_k - s-_k: the r distinct differences
("rows", r <= d(d - 1) + 1 < m) are all the kernels need to carry from the
new point to the older ones.
"""

from __future__ import annotations

import numpy as default_np

from .model.bath import Bath


class DiscretisedInfluence:
    """Coupling matrices of one bath on a time grid of step ``dt``.

    Parameters
    ----------
    bath : the bath.
    dt : time step.
    unique : merge Liouville indices with equal (s+, s-) into one class.
    add_correlation_time : extra correlation time lumped into the last lag
        (see ``last_lag``), or None.
    last_lag : the memory cut (number of lags kept), or None for full memory.
    epsrel, subdiv_limit : accuracy of the correlation integrals.
    """

    def __init__(
        self,
        bath: Bath,
        dt: float,
        unique: bool = False,
        add_correlation_time: float | None = None,
        last_lag: int | None = None,
        epsrel: float = 2**-26,
        subdiv_limit: int = 256,
    ):
        self.bath = bath
        self.dt = dt
        self.unique = bool(unique)
        self.add_correlation_time = add_correlation_time
        self.last_lag = last_lag
        self.epsrel = epsrel
        self.subdiv_limit = subdiv_limit
        dim = bath.dimension
        if self.unique:
            s_plus, s_minus, classes = bath.liouville_degeneracy()
        else:
            s_plus, s_minus = bath.liouville_eigenvalues()
            classes = default_np.arange(dim * dim)
        self.s_plus = s_plus
        self.s_minus = s_minus
        self.classes = classes.astype(int)
        self.num_classes = len(s_plus)
        self.carrier_rows, self.row_differences = _distinct_differences(s_plus - s_minus)
        self.num_rows = len(self.row_differences)
        self._eta: dict[int, complex] = {}

    @classmethod
    def from_parameters(cls, bath: Bath, parameters, unique: bool = False) -> DiscretisedInfluence:
        """The influence of ``bath`` on the grid and memory cut of ``TempoParameters``."""
        return cls(
            bath,
            parameters.dt,
            unique=unique,
            add_correlation_time=parameters.add_correlation_time,
            last_lag=parameters.dkmax,
            subdiv_limit=parameters.integral_subdiv_limit,
        )

    @property
    def class_projector(self) -> default_np.ndarray:
        """P[alpha, c] = 1 if alpha is in class c; shape (d^2, m)."""
        projector = default_np.zeros((len(self.classes), self.num_classes))
        projector[default_np.arange(len(self.classes)), self.classes] = 1.0
        return projector

    def eta(self, lag: int) -> complex:
        """The discretised correlation integral eta_lag (complex)."""
        if lag not in self._eta:
            correlations = self.bath.correlations
            epsrel, subdiv_limit = self.epsrel, self.subdiv_limit
            if lag == 0:
                value = correlations.correlation_2d_integral(
                    self.dt, 0.0, shape="upper-triangle", epsrel=epsrel, subdiv_limit=subdiv_limit
                )
            elif lag == self.last_lag and self.add_correlation_time:
                value = correlations.correlation_2d_integral(
                    self.dt,
                    lag * self.dt,
                    (lag + 1) * self.dt + self.add_correlation_time,
                    shape="rectangle",
                    epsrel=epsrel,
                    subdiv_limit=subdiv_limit,
                )
            else:
                value = correlations.correlation_2d_integral(
                    self.dt, lag * self.dt, shape="square", epsrel=epsrel, subdiv_limit=subdiv_limit
                )
            self._eta[lag] = complex(value)
        return self._eta[lag]

    def own_factor(self) -> default_np.ndarray:
        """I_0 per class, shape (m,)."""
        eta = self.eta(0)
        diff = self.s_plus - self.s_minus
        total = self.s_plus + self.s_minus
        return default_np.exp(-diff * (eta.real * diff + 1j * eta.imag * total))

    def lag_matrix(self, lag: int) -> default_np.ndarray:
        """I_lag[c_new, c_old], shape (m, m), for lag >= 1."""
        eta = self.eta(lag)
        diff = self.s_plus - self.s_minus
        total = self.s_plus + self.s_minus
        return default_np.exp(-default_np.outer(diff, eta.real * diff + 1j * eta.imag * total))

    def lag_matrix_rows(self, lag: int) -> default_np.ndarray:
        """The distinct rows of I_lag: shape (r, m), row ``carrier_rows[c]`` is I_lag[c, :]."""
        eta = self.eta(lag)
        diff = self.s_plus - self.s_minus
        total = self.s_plus + self.s_minus
        return default_np.exp(
            -default_np.outer(self.row_differences, eta.real * diff + 1j * eta.imag * total)
        )

    def liouville_transforms(self) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(to_eigenbasis, from_eigenbasis) superoperators, each (d^2, d^2).

        to_eigenbasis maps vec(rho) to vec(V^dag rho V), V = bath.unitary_transform.
        """
        unitary = self.bath.unitary_transform
        to_eigen = default_np.kron(unitary.conj().T, unitary.T)
        from_eigen = default_np.kron(unitary, unitary.conj())
        return to_eigen, from_eigen


def _distinct_differences(
    differences: default_np.ndarray, tolerance: float = 1e-12
) -> tuple[default_np.ndarray, default_np.ndarray]:
    """Group equal values of s+ - s- (within ``tolerance`` times the largest).

    Returns the group of each class (m,) and one value per group (r,).
    """
    scale = max(float(default_np.max(default_np.abs(differences), initial=0.0)), 1.0)
    rows = default_np.zeros(len(differences), dtype=int)
    values: list[float] = []
    for c, value in enumerate(differences):
        for r, known in enumerate(values):
            if abs(value - known) <= tolerance * scale:
                rows[c] = r
                break
        else:
            rows[c] = len(values)
            values.append(float(value))
    return rows, default_np.array(values)
