"""Numerical parameters of TEMPO and PT-TEMPO, and a physically motivated guess."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as default_np

from .. import config
from .. import validation as check
from ..cost import affordable_run
from .bath import Bath
from .system import BaseSystem, TimeDependentSystem, TimeDependentSystemWithField

#: the smallest epsrel a double-precision SVD can honour (singular values below
#: ~eps s_max are rounding noise)
EPSREL_FLOOR = 1e-15


def _check_epsrel(epsrel: Any) -> float:
    """The SVD truncation tolerance: a number in [EPSREL_FLOOR, 1]."""
    epsrel = check.real_number(epsrel, "epsrel")
    if not 0.0 < epsrel <= 1.0:
        raise ValueError(f"epsrel must lie in (0, 1]; got {epsrel}")
    if epsrel < EPSREL_FLOOR:
        raise ValueError(
            f"epsrel={epsrel} is below what a double-precision SVD can resolve "
            f"({EPSREL_FLOOR}): the bond would grow on rounding noise"
        )
    return epsrel


class TempoParameters:
    """Parameters of the TEMPO family of algorithms.

    Parameters
    ----------
    dt : time step (> 0).
    epsrel : SVD truncation tolerance in (0, 1]: the smallest singular values
        are dropped while the norm of the dropped ones is <= epsrel * s_max.
    tcut : memory time; the bath memory is cut after ``round(tcut / dt)``
        steps (at least one, with a ``UserWarning`` if tcut < dt / 2).
        Exclusive with ``dkmax``; neither means full memory.
    dkmax : memory cut in steps (integer >= 1).
    add_correlation_time : extra correlation time tau_a >= 0 (``math.inf``
        allowed) beyond the memory cut: a new point at t_k feels the bath
        correlations back to max(start, t_k - tcut - tau_a), those beyond the
        cut lumped onto the oldest point of the memory (exact for an
        independent-boson model with ``math.inf``). None (or 0): no lumping.
    subdiv_limit : maximum number of subintervals of the adaptive
        quadratures (correlation integrals, time-dependent Liouvillians), a
        whole number >= 1 (an integral float such as 1e3 is accepted), or
        None for midpoint sampling of time-dependent Liouvillians.
    liouvillian_epsrel : relative accuracy of those quadratures.
    name, description : optional text.
    exponential_tail : carry the bath's memory beyond the cut as modes (TEMPO,
        MeanFieldTempo and sequential PT-TEMPO with a memory cut): the couplings
        beyond the cut fitted by the fewest decaying exponentials to a tolerance
        set by ``epsrel`` (exact where C(t) is a sum of exponentials, as for
        :class:`~nonmarkov.DrudeLorentzSD` and :class:`~nonmarkov.UnderdampedSD` at
        T > 0; a ValueError where the tail needs more than 16, as for a power-law
        tail at T = 0). The window then needs to cover only what the modes do not
        (the fast part of C(t) before ``tcut``). See docs/algorithms.md.
    """

    def __init__(
        self,
        dt: float,
        epsrel: float,
        tcut: float | None = None,
        dkmax: int | None = None,
        add_correlation_time: float | None = None,
        subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
        liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
        name: str | None = None,
        description: str | None = None,
        exponential_tail: bool = False,
    ):
        self._dt = check.positive_number(dt, "dt")
        self._epsrel = _check_epsrel(epsrel)
        if tcut is not None and dkmax is not None:
            raise ValueError("give either tcut or dkmax (or neither, for full memory), not both")
        if tcut is not None:
            tcut = check.positive_number(tcut, "tcut")
            dkmax = int(round(tcut / self._dt))
            if dkmax < 1:
                warnings.warn(
                    f"tcut={tcut} is shorter than half a time step (dt={self._dt}): the "
                    "memory is cut after one step (dkmax=1)",
                    UserWarning,
                    stacklevel=2,
                )
                dkmax = 1
        elif dkmax is not None:
            dkmax = check.positive_integer(dkmax, "dkmax", minimum=1)
        self._dkmax = dkmax
        if add_correlation_time is not None:
            add_correlation_time = check.non_negative_number(
                add_correlation_time, "add_correlation_time", allow_infinity=True
            )
        self._add_correlation_time = add_correlation_time
        self._exponential_tail = check.boolean(exponential_tail, "exponential_tail")
        if self._exponential_tail and self._dkmax is None:
            raise ValueError(
                "exponential_tail carries the bath's memory beyond a memory cut: give tcut "
                "or dkmax (without a cut the whole memory is in the window already)"
            )
        if self._exponential_tail and add_correlation_time:
            raise ValueError(
                "exponential_tail and add_correlation_time both stand for the memory beyond "
                "the cut; give one of them"
            )
        if subdiv_limit is not None:
            given: Any = subdiv_limit
            if isinstance(given, float) and given.is_integer():
                given = int(given)  # 1e3, or -1.0: then a ValueError
            subdiv_limit = check.positive_integer(given, "subdiv_limit")
        self._subdiv_limit = subdiv_limit
        self._liouvillian_epsrel = check.positive_number(liouvillian_epsrel, "liouvillian_epsrel")
        self.name = "Unnamed TempoParameters" if name is None else str(name)
        self.description = "" if description is None else str(description)

    @property
    def dt(self) -> float:
        """Time step."""
        return self._dt

    @property
    def epsrel(self) -> float:
        """SVD truncation tolerance."""
        return self._epsrel

    @property
    def add_correlation_time(self) -> float | None:
        """Extra correlation time beyond the memory cut, or None."""
        return self._add_correlation_time

    @property
    def exponential_tail(self) -> bool:
        """Whether the bath's memory beyond the cut is carried as modes, fitted by
        decaying exponentials (TEMPO, MeanFieldTempo, sequential PT-TEMPO)."""
        return self._exponential_tail

    @property
    def subdiv_limit(self) -> int | None:
        """Subinterval limit of the adaptive quadratures, or None (midpoint sampling)."""
        return self._subdiv_limit

    @property
    def liouvillian_epsrel(self) -> float:
        """Relative accuracy of the quadratures of time-dependent Liouvillians."""
        return self._liouvillian_epsrel

    @property
    def dkmax(self) -> int | None:
        """Memory cut in steps, or None for full memory."""
        return self._dkmax

    @property
    def tcut(self) -> float | None:
        """Memory cut as a time (dkmax * dt), or None."""
        return None if self._dkmax is None else self._dkmax * self.dt

    @property
    def integral_subdiv_limit(self) -> int:
        """Subinterval limit used for the correlation integrals."""
        return config.DEFAULT_SUBDIV_LIMIT if self.subdiv_limit is None else self.subdiv_limit

    def __str__(self) -> str:
        return (
            f"TempoParameters(dt={self.dt}, epsrel={self.epsrel}, dkmax={self.dkmax}, "
            f"tcut={self.tcut}, add_correlation_time={self.add_correlation_time}"
            + (", exponential_tail=True)" if self.exponential_tail else ")")
        )

    __repr__ = __str__


class GibbsParameters:
    """Parameters of Gibbs TEMPO (the mean-force Gibbs state in imaginary time).

    Parameters
    ----------
    n_steps : number of imaginary-time steps (integer >= 2) over [0, 1/T].
    epsrel : SVD truncation tolerance in (0, 1], as in :class:`TempoParameters`.
    name, description : optional text.
    """

    def __init__(
        self,
        n_steps: int,
        epsrel: float,
        name: str | None = None,
        description: str | None = None,
    ):
        self._n_steps = check.positive_integer(n_steps, "n_steps", minimum=2)
        # every imaginary-time point couples to every earlier one: n_steps^2 / 2 updates
        affordable_run(
            self._n_steps,
            0,
            0,
            "GibbsParameters",
            self._n_steps,
            cause=f"n_steps={n_steps}",
            remedy="use fewer imaginary-time steps (n_steps)",
        )
        self._epsrel = _check_epsrel(epsrel)
        self.name = "Unnamed GibbsParameters" if name is None else str(name)
        self.description = "" if description is None else str(description)

    @property
    def n_steps(self) -> int:
        """Number of imaginary-time steps."""
        return self._n_steps

    @property
    def epsrel(self) -> float:
        """SVD truncation tolerance."""
        return self._epsrel

    def time_step_length(self, temperature: float) -> float:
        """The imaginary-time step 1 / (T n_steps) at ``temperature`` T > 0."""
        temperature = check.positive_number(temperature, "temperature")
        return 1.0 / (temperature * self._n_steps)

    def __str__(self) -> str:
        return f"GibbsParameters(n_steps={self.n_steps}, epsrel={self.epsrel})"

    __repr__ = __str__


def _coherence_pairs(bath: Bath) -> list[tuple[float, float]]:
    """(damping, weight) of every pair n != m of eigenvalues of S: the factors
    (s_n - s_m)^2 of G and max((s_n - s_m)^2, |s_n^2 - s_m^2|) of a change of G or P
    in the exponent of the coherence rho_nm (the independent-boson model's exact
    coherences; G - i P is ``BaseCorrelations.eta_function``)."""
    s = [float(x) for x in bath.coupling_eigenvalues]
    pairs = {
        ((a - b) ** 2, max((a - b) ** 2, abs(a * a - b * b)))
        for i, a in enumerate(s)
        for j, b in enumerate(s)
        if i != j and a != b
    }
    return sorted(pairs)


#: number of times at which C(tau) is sampled to bound the memory-cut error
_MEMORY_SAMPLES = 241


def _memory_cut_error(bath: Bath, interval: float) -> tuple[default_np.ndarray, default_np.ndarray]:
    """Candidate cuts tau_c in [0, interval] and a bound on the error that cutting the
    memory there makes in the reduced state over the interval.

    A cut drops the influence of every pair of times further apart than tau_c. Up
    to time t the dropped part of the exponent of a coherence rho_nm is at most
    w_nm D(t, tau_c), D(t, tau_c) = int_{tau_c}^{t} (t - tau) |C(tau)| dtau (the
    sum of |eta| over the dropped pairs of steps), w_nm the pair's weight
    (:func:`_coherence_pairs`); the coherence itself has decayed by
    exp(-(s_n - s_m)^2 G(t)), G(t) = int_0^t (t - tau) Re C(tau) dtau. The bound is
    max over t and pairs of w_nm exp(-(s_n - s_m)^2 G(t)) D(t, tau_c): to first
    order the exact error of an independent-boson model times 2 (|rho_nm| <= 1/2),
    and the scale of the error of a general coupling. C is sampled on a grid
    geometric near tau = 0 (where C varies on the bath's time scale) and uniform
    further out; the integrals are trapezoid sums.
    """
    correlations = bath.correlations
    scale = min(correlations.time_scale(), interval)
    half = _MEMORY_SAMPLES // 2
    taus = default_np.unique(
        default_np.concatenate(
            [
                default_np.geomspace(1e-3 * scale, interval, half),
                default_np.linspace(0.0, interval, _MEMORY_SAMPLES - half),
            ]
        )
    )
    values = default_np.asarray(correlations.correlation(taus), dtype=complex)
    # an infinite Re C(0) (J falling as 1/w: Drude-Lorentz) is an integrable singularity;
    # leaving out its first interval only lowers G (a looser bound) and cancels in D
    values = default_np.where(default_np.isfinite(values), values, 0.0)

    def cumulative(integrand: default_np.ndarray) -> default_np.ndarray:
        pieces = 0.5 * (integrand[1:] + integrand[:-1]) * default_np.diff(taus)
        return default_np.concatenate([[0.0], default_np.cumsum(pieces)])

    # int_0^x f and int_0^x tau f, so that int_a^t (t - tau) f = t (F(t) - F(a)) - (T(t) - T(a))
    magnitude, moment = cumulative(abs(values)), cumulative(taus * abs(values))
    damping = taus * cumulative(values.real) - cumulative(taus * values.real)
    damping = default_np.maximum(damping, 0.0)  # G(t) >= 0; clip quadrature noise
    t = taus[:, None]  # rows: times t; columns: cuts tau_c
    dropped = t * (magnitude[:, None] - magnitude[None, :]) - (moment[:, None] - moment[None, :])
    dropped = default_np.where(taus[None, :] < t, default_np.maximum(dropped, 0.0), 0.0)
    bound = default_np.zeros(len(taus))
    for decay, weight in _coherence_pairs(bath):
        factor = weight * default_np.exp(-decay * damping)
        bound = default_np.maximum(bound, default_np.max(factor[:, None] * dropped, axis=0))
    return taus, bound


def _memory_cut(bath: Bath, interval: float, budget: float) -> float:
    """The shortest memory time whose cut error (:func:`_memory_cut_error`) is within
    ``budget``; ``interval`` (full memory) if none shorter is; 0 for an uncoupled bath."""
    if not _coherence_pairs(bath):
        return 0.0
    taus, errors = _memory_cut_error(bath, interval)
    within = default_np.nonzero(errors <= budget)[0]
    return float(taus[within[0]]) if within.size else interval


def _correlation_resolution(bath: Bath) -> float:
    """Time over which |C(tau)| falls to half of |C(0)| (where Re C(0) is infinite, a
    J(w) falling as 1/w such as Drude-Lorentz's: of |C| at a tenth of the bath's time
    scale, beyond the integrable singularity that the discretised influence holds exactly)."""
    correlations = bath.correlations
    c0 = abs(complex(correlations.correlation(0.0)))
    if not math.isfinite(c0):
        c0 = abs(complex(correlations.correlation(0.1 * correlations.time_scale())))
    if c0 == 0.0:
        return math.inf
    taus = default_np.geomspace(1e-3, 1e2, 101) * correlations.time_scale()
    values = default_np.abs(default_np.asarray(correlations.correlation(taus)))
    below = default_np.nonzero(values <= 0.5 * c0)[0]
    return float(taus[below[0]]) if below.size else float(taus[-1])


def check_bath_interval(bath: Any, start_time: Any, end_time: Any) -> tuple[float, float]:
    """``bath`` must be a Bath and [start_time, end_time] a non-empty interval."""
    if not isinstance(bath, Bath):
        raise TypeError(f"bath must be a Bath; got {type(bath).__name__}")
    start_time = check.real_number(start_time, "start_time")
    end_time = check.real_number(end_time, "end_time")
    if end_time <= start_time:
        raise ValueError(f"end_time ({end_time}) must be after start_time ({start_time})")
    return start_time, end_time


#: The text of the ``UserWarning`` that :func:`guess_tempo_parameters` gives.
GUESS_WARNING_MSG = (
    "guess_tempo_parameters: the TEMPO parameters are estimated from the bath "
    "correlations (and the system, if given); the estimate is a starting point, "
    "not a converged choice: check the dynamics by tightening dt, epsrel and the "
    "memory cut"
)

#: Default of ``max_samples``: the most times at which the generator of a
#: time-dependent system is sampled to find its largest rate.
DEFAULT_MAX_SAMPLES = 5000

_FIRST_SAMPLES = 11


def _sample_count(value: Any) -> int:
    """``max_samples`` as an int >= 1: an int, or a float with an integer value."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return check.positive_integer(value, "max_samples")


def _system_rate(
    system: BaseSystem, start_time: float, end_time: float, tolerance: float, max_samples: int
) -> float:
    """Largest ||L_S(t)||_2 (spectral norm of the Liouvillian) over [start_time, end_time].

    A time-independent system needs one evaluation. A time-dependent one is
    sampled on nested uniform grids of 11, 21, 41, ... times, refined while
    the maximum still grows by more than ``tolerance`` relative to it and the
    next grid has at most ``max_samples`` times; a ``UserWarning`` says so if
    the limit stops the refinement first.
    """
    if not isinstance(system, TimeDependentSystem):
        return float(default_np.linalg.norm(system.liouvillian(start_time), 2))

    def largest(times: default_np.ndarray) -> float:
        return max(float(default_np.linalg.norm(system.liouvillian(t), 2)) for t in times)

    count = min(_FIRST_SAMPLES, max_samples)
    rate = largest(default_np.linspace(start_time, end_time, count))
    while True:
        refined = 2 * count - 1
        if count == 1 or refined > max_samples:
            warnings.warn(
                f"guess_tempo_parameters: the largest rate of the time-dependent system is "
                f"estimated from {count} sample times (max_samples={max_samples}) and may not "
                "have settled; raise max_samples or choose dt by hand",
                UserWarning,
                stacklevel=3,
            )
            return rate
        new_rate = largest(default_np.linspace(start_time, end_time, refined))
        count = refined
        if abs(new_rate - rate) <= tolerance * max(new_rate, 1e-300):
            return new_rate
        rate = new_rate


def truncation_epsrel(budget: float, num_steps: int, memory_steps: int) -> float:
    """The epsrel whose truncations stay within ``budget`` over a whole run.

    Each step of TEMPO truncates the bond of every one of the ``memory_steps``
    sites of the influence MPS once, each time dropping a relative weight of at
    most epsrel; over ``num_steps`` steps that is num_steps * memory_steps
    truncations whose errors add up (at worst linearly) in the reduced state, so
    epsrel = budget / (num_steps * memory_steps). (Measured on a biased
    spin-boson model with a Drude-Lorentz bath at fixed epsrel the accumulated
    error grows faster than linearly in epsrel and in the number of truncations,
    e.g. 15x for 4x the truncations at epsrel 1e-5 to 1e-6; at the epsrel of this
    rule it stays below the budget (``benchmarks/bench_guess.py``). An
    independent-boson model, whose influence is of low rank, stays far below.)
    """
    return budget / (max(1, num_steps) * max(1, memory_steps))


def check_tolerance(tolerance: Any) -> float:
    """The ``tolerance`` of :func:`guess_tempo_parameters`: a number in (0, 1), else a
    ``TypeError``/``ValueError`` naming it."""
    tolerance = check.positive_number(tolerance, "tolerance")
    if tolerance >= 1.0:
        raise ValueError(f"tolerance must be < 1; got {tolerance}")
    return tolerance


def guess_tempo_parameters(
    bath: Bath,
    start_time: float,
    end_time: float,
    system: BaseSystem | None = None,
    tolerance: float | None = config.DEFAULT_TOLERANCE,
    max_samples: int | float = DEFAULT_MAX_SAMPLES,
) -> TempoParameters:
    """Guess ``TempoParameters`` whose run is within ``tolerance`` of the exact dynamics.

    ``tolerance`` is an absolute bound on max |rho(t) - rho_exact(t)| over the
    interval and the matrix elements (None: the default,
    ``config.DEFAULT_TOLERANCE``, for callers that pass a tolerance on). It is
    shared out: a third each to the
    memory cut and the SVD truncations, the rest to the time step.

    - time step: the smallest of a hundredth of the interval, half the time
      over which |C(tau)| halves, and sqrt(tolerance) / ||L_S|| (second-order
      Trotter error ~ (dt ||L_S||)^2);
    - memory cut: the shortest tau_c for which the correlations it drops,
      w_nm exp(-(s_n - s_m)^2 G(t)) int_{tau_c}^t (t - tau) |C(tau)| dtau, stay
      below tolerance / 3 for every time t of the interval and every pair of
      eigenvalues s_n != s_m of the coupling operator (w_nm the larger of
      (s_n - s_m)^2 and |s_n^2 - s_m^2|, G(t) = int_0^t (t - tau) Re C(tau)
      dtau): to first order the error of the cut in an independent-boson
      model, whose coherences have already decayed by exp(-(s_n - s_m)^2 G);
      ``dkmax`` = N (full memory) if no shorter cut is within the budget;
    - epsrel = (tolerance / 3) / (N * dkmax), N the number of steps: every step
      truncates each of the dkmax bonds of the influence MPS once, and the
      N * dkmax relative errors of at most epsrel each add up in the state
      (:func:`truncation_epsrel`).

    ||L_S|| is the spectral norm of the system's Liouvillian (Hamiltonian and
    Lindblad terms). For a :class:`~nonmarkov.TimeDependentSystem` it is the
    largest over [start_time, end_time], sampled on grids that are refined
    (11, 21, 41, ... times) until the largest value settles to ``tolerance``;
    ``max_samples`` (a whole number >= 1; an integral float such as 1e4 is
    accepted) caps the number of sample times, with a
    ``UserWarning`` if the cap stops the refinement. A time-independent system
    needs one evaluation and ignores ``max_samples``. For a
    :class:`~nonmarkov.TimeDependentSystemWithField` the rates depend on the
    unknown field: dt comes from the bath alone, with a ``UserWarning``. A
    tolerance so small that the epsrel above is below the SVD's resolution gives
    epsrel = ``EPSREL_FLOOR`` and a ``UserWarning``. ``benchmarks/bench_guess.py``
    measures the achieved error against the tolerance.

    Every call gives a ``UserWarning`` (:data:`GUESS_WARNING_MSG`): the
    estimate is a starting point; check convergence by tightening the
    parameters. Works at zero coupling (then the memory cut is one step).
    """
    start_time, end_time = check_bath_interval(bath, start_time, end_time)
    tolerance = check_tolerance(config.DEFAULT_TOLERANCE if tolerance is None else tolerance)
    max_samples = _sample_count(max_samples)
    if system is not None:
        if not isinstance(system, BaseSystem):
            raise TypeError(
                "system must be None, a System, a TimeDependentSystem or a "
                "TimeDependentSystemWithField; got "
                f"{type(system).__name__}"
            )
        if system.dimension != bath.dimension:
            raise ValueError(
                f"system dimension {system.dimension} differs from bath dimension {bath.dimension}"
            )
    warnings.warn(GUESS_WARNING_MSG, UserWarning, stacklevel=2)
    interval = end_time - start_time
    dt_candidates = [interval / 100.0, 0.5 * _correlation_resolution(bath)]
    if isinstance(system, TimeDependentSystemWithField):
        warnings.warn(
            "guess_tempo_parameters: the rates of a TimeDependentSystemWithField depend on "
            "the field, which is not known before the run; dt is guessed from the bath "
            "alone: check it against the field's time scale",
            UserWarning,
            stacklevel=2,
        )
    elif system is not None:
        norm = _system_rate(system, start_time, end_time, tolerance, max_samples)
        if norm > 0:
            dt_candidates.append(math.sqrt(tolerance) / norm)
    dt = min(dt_candidates)
    # the tolerance is shared: a third for the memory cut, a third for the SVD
    # truncations, the rest for the time step (whose rule above is conservative)
    memory = _memory_cut(bath, interval, tolerance / 3.0)
    num_steps = max(1, int(math.ceil(interval / dt - 1e-9)))
    # a memory as long as the run is full memory: dkmax = num_steps
    dkmax = min(num_steps, max(1, int(math.ceil(memory / dt - 1e-9))))
    if dkmax > 500:
        warnings.warn(
            f"the guessed memory cut is {dkmax} steps; the computation may be slow",
            UserWarning,
            stacklevel=2,
        )
    epsrel = truncation_epsrel(tolerance / 3.0, num_steps, dkmax)
    if epsrel < EPSREL_FLOOR:
        warnings.warn(
            f"guess_tempo_parameters: tolerance={tolerance:g} over {num_steps} steps with "
            f"a memory of {dkmax} steps asks for epsrel={epsrel:.3g}, "
            f"below what a double-precision SVD resolves; using epsrel={EPSREL_FLOOR:g}",
            UserWarning,
            stacklevel=2,
        )
        epsrel = EPSREL_FLOOR
    return TempoParameters(
        dt=dt,
        epsrel=epsrel,
        dkmax=dkmax,
        name="guessed parameters",
        description=f"guess_tempo_parameters(tolerance={tolerance})",
    )
