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

Memory cut K with an extra correlation time tau_a (``add_correlation_time``):
a new point k still couples to the points at lags 1..K, but the coupling to
the oldest one (lag K, the point that leaves the memory at this step) is the
integral of C over all of the past that point stands for: the points at lags
K, K + 1, ... back to the time t_k - K dt - tau_a, and not before the first
point. When the n-th point leaves the memory (n = 1, 2, ...: n points lie at
lags >= K) that past has the length L_n = min(n dt, dt + tau_a), and

    eta_lumped(n) = int_{t' in [K dt, K dt + L_n]} int_{t'' in [0, dt]} C(t' - t'')
                  = eta_K + eta_{K+1} + ... (+ the part of a square up to L_n).

With tau_a = inf every point feels its whole past (exact for the
independent-boson model, where the classes of a path never change); a
stationary (time-translation-invariant) construction uses the limit
n -> inf of an infinitely long past.
"""

from __future__ import annotations

import math

import numpy as default_np

from . import validation
from .model.bath import Bath
from .model.correlations import CustomSD
from .model.parameters import TempoParameters

#: a length within this fraction of a step of a whole number of steps counts as whole
_WHOLE_STEP_TOLERANCE = 1e-9
#: the most lags beyond the cut that the tail modes fit
MAX_TAIL_SAMPLES = 20000


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
        self.unique = validation.boolean(unique, "unique")
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
        #: partial sums eta_K + ... + eta_{K+i-1} of the lumped coupling, i = 0, 1, ...
        self._lumped_sums: list[complex] = [0.0j]
        self._leaving_rows: dict[int | None, default_np.ndarray] = {}

    @classmethod
    def from_parameters(
        cls, bath: Bath, parameters: TempoParameters, unique: bool = False, tail: bool = False
    ) -> DiscretisedInfluence:
        """The influence of ``bath`` on the grid and memory cut of ``TempoParameters``;
        ``tail``: the caller carries ``parameters.exponential_tail`` (else it is refused)."""
        if parameters.exponential_tail and not tail:
            raise ValueError(
                "exponential_tail is run by TEMPO (tempo_compute, Tempo, MeanFieldTempo) and "
                "sequential PT-TEMPO (PtTempo, pt_tempo_compute); for this construction use "
                "exponential_tail=False"
            )
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

    def _integral(self, time_1: float, time_2: float | None, shape: str) -> complex:
        return complex(
            self.bath.correlations.correlation_2d_integral(
                self.dt,
                time_1,
                time_2,
                shape=shape,
                epsrel=self.epsrel,
                subdiv_limit=self.subdiv_limit,
            )
        )

    def eta(self, lag: int) -> complex:
        """The discretised correlation integral eta_lag (complex), lag >= 0."""
        if lag not in self._eta:
            if lag == 0:
                self._eta[lag] = self._integral(0.0, None, "upper-triangle")
            else:
                self._eta[lag] = self._integral(lag * self.dt, None, "square")
        return self._eta[lag]

    @property
    def lumps(self) -> bool:
        """Whether the coupling to the point leaving the memory is lumped (a memory
        cut and an extra correlation time > 0)."""
        return bool(self.last_lag) and bool(self.add_correlation_time)

    @property
    def lumped_steps(self) -> int | None:
        """The n from which ``lumped_eta(n)`` no longer changes (None: never, tau_a = inf)."""
        if not self.lumps:
            return 1
        extra = float(self.add_correlation_time)  # type: ignore[arg-type]
        if math.isinf(extra):
            return None
        return 1 + math.ceil(extra / self.dt - _WHOLE_STEP_TOLERANCE)

    def lumped_eta(self, n: int | None) -> complex:
        """Coupling of a new point to the n-th point that leaves the memory (n >= 1;
        None: after an infinitely long past), see the module docstring."""
        last = self.last_lag
        if not self.lumps or last is None:
            raise ValueError("lumped couplings need a memory cut and add_correlation_time > 0")
        settled = self.lumped_steps
        if settled is not None and (n is None or n > settled):
            n = settled
        if n is None:
            return self._integral(last * self.dt, math.inf, "rectangle")
        if n < 1:
            raise ValueError(f"n counts the points that left the memory (>= 1); got {n}")
        length = min(n * self.dt, self.dt + float(self.add_correlation_time))  # type: ignore[arg-type]
        whole = min(n, int(math.floor(length / self.dt + _WHOLE_STEP_TOLERANCE)))
        sums = self._lumped_sums
        while len(sums) <= whole:
            sums.append(sums[-1] + self.eta(last + len(sums) - 1))
        value = sums[whole]
        rest = length - whole * self.dt
        if rest > _WHOLE_STEP_TOLERANCE * self.dt:
            start = (last + whole) * self.dt
            value += self._integral(start, start + rest, "rectangle")
        return value

    def _factor(self, new: default_np.ndarray, eta: complex) -> default_np.ndarray:
        """exp(-new (x) (Re eta (s+ - s-) + i Im eta (s+ + s-))) for the values
        ``new`` of s+ - s- of the newer point; shape (len(new), m)."""
        diff = self.s_plus - self.s_minus
        total = self.s_plus + self.s_minus
        with default_np.errstate(over="ignore", invalid="ignore"):
            factor = default_np.exp(-default_np.outer(new, eta.real * diff + 1j * eta.imag * total))
        return _finite_factor(factor, eta)

    def own_factor(self) -> default_np.ndarray:
        """I_0 per class, shape (m,)."""
        eta = self.eta(0)
        diff = self.s_plus - self.s_minus
        total = self.s_plus + self.s_minus
        with default_np.errstate(over="ignore", invalid="ignore"):
            factor = default_np.exp(-diff * (eta.real * diff + 1j * eta.imag * total))
        return _finite_factor(factor, eta)

    def lag_matrix(self, lag: int) -> default_np.ndarray:
        """I_lag[c_new, c_old], shape (m, m), for lag >= 1."""
        return self._factor(self.s_plus - self.s_minus, self.eta(lag))

    def lag_matrix_rows(self, lag: int) -> default_np.ndarray:
        """The distinct rows of I_lag: shape (r, m), row ``carrier_rows[c]`` is I_lag[c, :]."""
        return self._factor(self.row_differences, self.eta(lag))

    def leaving_rows(self, n: int | None) -> default_np.ndarray:
        """Rows (r, m) of the coupling to the n-th point that leaves the memory
        (``lumped_eta``; n None: after an infinite past). The same array object for
        every n from ``lumped_steps`` on (engines move it to a device once)."""
        settled = self.lumped_steps
        if settled is not None and (n is None or n > settled):
            n = settled
        if n not in self._leaving_rows:
            self._leaving_rows[n] = self._factor(self.row_differences, self.lumped_eta(n))
        return self._leaving_rows[n]

    def stationary_lag_matrix(self, lag: int) -> default_np.ndarray:
        """I_lag (m, m) of a stationary construction: at the memory cut, the lumped
        coupling after an infinite past (``lumped_eta(None)``) when lumping."""
        if self.lumps and lag == self.last_lag:
            return self._factor(self.s_plus - self.s_minus, self.lumped_eta(None))
        return self.lag_matrix(lag)

    def tail_couplings(self, epsrel: float) -> tuple[default_np.ndarray, float]:
        """The couplings beyond the cut that the tail modes carry, and the tolerance
        of their fit (``kernels.tail.fit_geometric``).

        The tail's budget is sum_{j>K} |eta_j - fit_j| <= dt epsrel / max|s+ - s-|^2
        (an error of epsrel / max|s+ - s-|^2 in int |C| beyond the cut, K =
        ``last_lag``): half of it for the lags after J, where dt int_{J dt}^inf |C| is
        below it, half for the fit of eta_{K+1} .. eta_J. Returns those couplings
        (J - K,) complex and the fit's tolerance.
        """
        if self.last_lag is None:
            raise ValueError("tail modes need a memory cut")
        largest = max(float(default_np.max(default_np.abs(self.row_differences))), 1e-300)
        tolerance = self.dt * epsrel / largest**2
        first = self.last_lag + 1
        last = max(first + 3, self._tail_end(tolerance / 2.0))  # a pencil needs a few
        couplings = self.bath.correlations.square_integrals(
            self.dt,
            default_np.arange(first, last + 1),
            epsrel=self.epsrel,
            subdiv_limit=self.subdiv_limit,
        )
        return couplings, tolerance / 2.0

    def tail_modes(
        self, amplitudes: default_np.ndarray, poles: default_np.ndarray
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """The modes of the couplings beyond the cut, eta_j = sum_p b_p r_p^(j-K-1)
        (amplitudes b (P,), poles r (P,), closed under conjugation).

        A term couples a new point to an old one by exp(-(s+ - s-)_new r^(j-K-1)
        (b s+ - b^* s-)_old): the part b s+ decays at r, the part -b^* s- at r^*, so
        the parts of one rate are one mode. Returns the rates r (M,) and injections
        (M, m): the amplitude each class of a point gives its mode when it leaves the
        window (at lag K + 1).
        """
        rates: list[complex] = []
        injections: list[default_np.ndarray] = []

        def add(rate: complex, injection: default_np.ndarray) -> None:
            for i, known in enumerate(rates):  # the parts of one rate are one mode
                if abs(known - rate) <= 1e-12 * abs(rate):
                    injections[i] = injections[i] + injection
                    return
            rates.append(rate)
            injections.append(injection)

        for b, r in zip(amplitudes, poles):
            add(complex(r), b * self.s_plus)
            add(complex(r).conjugate(), -b.conjugate() * self.s_minus)
        return (
            default_np.array(rates, dtype=complex),
            default_np.array(injections, dtype=complex).reshape(len(rates), self.num_classes),
        )

    def _tail_end(self, tolerance: float) -> int:
        """The lag J from which the rest of the memory is negligible: the first time
        t = J dt past the cut with dt int_t^inf |C| <= ``tolerance`` (|C| on a geometric
        grid to 10^4 times the cut or the bath's time scale). A ``ValueError`` past
        ``MAX_TAIL_SAMPLES`` lags."""
        cut = float(self.last_lag) * self.dt  # type: ignore[arg-type]
        scale = max(cut, self.dt, float(self.bath.correlations.time_scale()))
        times = cut + default_np.geomspace(self.dt, 1e4 * scale, 60)
        magnitude = default_np.abs(default_np.asarray(self.bath.correlations.correlation(times)))
        pieces = 0.5 * (magnitude[1:] + magnitude[:-1]) * default_np.diff(times)
        rest = default_np.concatenate([default_np.cumsum(pieces[::-1])[::-1], [0.0]])
        end = float(times[int(default_np.argmax(self.dt * rest <= tolerance))])
        lag = int(math.ceil(end / self.dt))
        if lag - self.last_lag > MAX_TAIL_SAMPLES:  # type: ignore[operator]
            raise ValueError(
                f"the bath's memory beyond the cut lasts to t ~ {end:.3g} at this epsrel "
                f"(more than {MAX_TAIL_SAMPLES} steps of dt = {self.dt:g}) for the tail modes "
                "(a power-law tail, as at T = 0?); use exponential_tail=False"
            )
        return lag

    def liouville_transforms(self) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(to_eigenbasis, from_eigenbasis) superoperators, each (d^2, d^2).

        to_eigenbasis maps vec(rho) to vec(V^dag rho V), V = bath.unitary_transform.
        """
        unitary = self.bath.unitary_transform
        to_eigen = default_np.kron(unitary.conj().T, unitary.T)
        from_eigen = default_np.kron(unitary, unitary.conj())
        return to_eigen, from_eigen


def _finite_factor(factor: default_np.ndarray, eta: complex) -> default_np.ndarray:
    """``factor`` if finite, else a ValueError: the bath couples so strongly over one
    step (|eta| large) that exp(-(s+ - s-) eta ...) overflows."""
    if not default_np.all(default_np.isfinite(factor)):
        raise ValueError(
            f"the bath's influence over one time step overflows (the correlation integral "
            f"eta = {complex(eta):.3g}): the coupling is far too strong for this dt (a "
            "spectral density's alpha of order 1e6?); use a weaker coupling or a smaller dt"
        )
    return factor


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


class ImaginaryTimeInfluence:
    """The influence of a thermal bath on the imaginary-time grid of a Gibbs state.

    The mean-force state Tr_B exp(-beta H) / Z_B is a path integral over
    imaginary time tau in [0, beta], beta = 1/T, cut into ``n_steps`` steps of
    delta = beta / n_steps. A path visits one eigenvalue s_k of S per step; the
    bath weighs it by exp(sum_{k >= k'} eta_{k-k'} s_k s_k') with the integrals
    of the imaginary-time correlation C_M over the triangle (eta_0) and the
    squares (eta_j, j >= 1) of the grid: real, positive and symmetric,
    eta_j = eta_{n_steps - j} (C_M is beta-periodic and even). They tile the
    triangle 0 <= tau'' <= tau' <= beta exactly, so a constant path gets
    exp(beta lambda s^2), lambda = int J(w) / w dw.

    The weights depend on a point only through its eigenvalue: the m distinct
    eigenvalues of S are the classes. Parameters: ``bath`` (a spectral density
    at T > 0), ``n_steps`` (>= 2), ``epsrel``/``subdiv_limit`` of the integrals.
    """

    def __init__(self, bath: Bath, n_steps: int, epsrel: float = 2**-26, subdiv_limit: int = 256):
        correlations = bath.correlations
        if not isinstance(correlations, CustomSD) or correlations.temperature <= 0.0:
            raise ValueError("imaginary-time influence needs a spectral density at T > 0")
        self.bath = bath
        self._correlations = correlations
        self.n_steps = n_steps
        self.delta = 1.0 / (correlations.temperature * n_steps)
        self.epsrel = epsrel
        self.subdiv_limit = subdiv_limit
        eigenvalues = bath.coupling_eigenvalues
        self.values, self.classes = default_np.unique(eigenvalues, return_inverse=True)
        self.num_classes = len(self.values)
        self._eta: default_np.ndarray | None = None

    def eta(self, lag: int) -> float:
        """eta_lag (real), 0 <= lag < n_steps (all lags at the first call: the bath's
        ``imaginary_time_integrals``)."""
        if self._eta is None:
            self._eta = self._correlations.imaginary_time_integrals(
                self.n_steps, epsrel=self.epsrel, subdiv_limit=self.subdiv_limit
            )
        return float(self._eta[min(lag, self.n_steps - lag) if lag > 0 else 0])

    def own_factor(self) -> default_np.ndarray:
        """exp(eta_0 s_c^2) per class, (m,)."""
        return default_np.exp(self.eta(0) * self.values**2)

    def lag_matrix(self, lag: int) -> default_np.ndarray:
        """exp(eta_lag s_c s_c') (m, m), lag >= 1: symmetric, one row per class."""
        return default_np.exp(self.eta(lag) * default_np.outer(self.values, self.values))
