"""Spectral densities of the field: Drude-Lorentz, underdamped (Brownian oscillator), tabulated.

Convention (docs/index.md, "Conventions"): for the coupling S sum_k (g_k b_k + g_k^* b_k^dag),

    J(w) = sum_k |g_k|^2 delta(w - w_k),
    C(tau) = int_0^inf J(w) [coth(w / 2T) cos(w tau) - i sin(w tau)] dw,

with no factor 1/pi in C. The HEOM literature and QuTiP write the same physics
with J_them = pi J and a factor 1/pi in C(t), so the correlation functions agree
when J = J_them / pi. The reorganisation energy is lambda = int_0^inf J(w) / w dw
here, (1/pi) int_0^inf J_them(w) / w dw there: the same number.

Drude-Lorentz and underdamped baths have rational J(w), so C(tau) is a finite sum
of exponentials from the poles of J (the resonant terms) plus the Matsubara
series sum_k a_k exp(-nu_k tau), nu_k = 2 pi k T, from the poles of coth. The
discretised influence (integrals of C over squares and triangles of the time grid)
then has a closed form per exponential; the Matsubara series is summed exactly to
k = M and its tail by the Euler-Maclaurin formula (the integral of the summand from
M + 1/2 plus the first derivative correction), which converges the series to double
precision whatever the temperature (the Drude-Lorentz terms of a triangle integral
fall only as 1/k^2).
"""

from __future__ import annotations

import bisect
import math
import os
from typing import Any

import numpy as default_np
import scipy.integrate

from .. import config
from .. import validation as check
from .correlations import BaseCorrelations, CustomSD, weight_segments

#: Matsubara terms summed one by one; the rest by Euler-Maclaurin
_MIN_MATSUBARA_TERMS = 2000
#: at most this many (beyond every pole of J, which needs T >~ 6e-7 times the poles' size)
_MAX_MATSUBARA_TERMS = 1_000_000
#: square_integrals keeps the Matsubara terms with nu_k tau below this (e^-40 ~ 4e-18)
_SERIES_EXPONENT = 40.0
#: Matsubara terms per block of square_integrals' sum
_SERIES_BLOCK = 256
#: Taylor order of (1 - e^-x) / x and (1 - (1 + x) e^-x) / x^2 for |x| < 1/2
_SERIES_TERMS = 20
_SERIES_RADIUS = 0.5
_FACTORIALS = default_np.array([math.factorial(n) for n in range(_SERIES_TERMS + 2)], dtype=float)
_GL_NODES, _GL_WEIGHTS = default_np.polynomial.legendre.leggauss(32)
#: panels of s in (0, 1] for the tail integral over k = (M + 1/2) / s: [2^-j-1, 2^-j] for
#: j < 40 (a summand exp(-c k) gives exp(-c (M + 1/2) / s), smooth in each panel whatever
#: c), and [0, 2^-40]
_TAIL_PANELS = ((0.0, 2.0**-40),) + tuple((2.0 ** -(j + 1), 2.0**-j) for j in range(40))
_TAIL_GL_NODES, _TAIL_GL_WEIGHTS = default_np.polynomial.legendre.leggauss(16)
#: terms per residue class of the imaginary-time series summed one by one
_RESIDUE_TERMS = 64
#: relative distance of a real pole rate from a Matsubara frequency below which the two
#: terms are summed as one pair (each alone would be large and cancel)
_RESONANCE_WINDOW = 0.05


def _tail_nodes() -> tuple[default_np.ndarray, default_np.ndarray]:
    """Gauss-Legendre nodes and weights of the panels ``_TAIL_PANELS`` of (0, 1]."""
    nodes, weights = [], []
    for a, b in _TAIL_PANELS:
        nodes.append(a + 0.5 * (b - a) * (_TAIL_GL_NODES + 1.0))
        weights.append(0.5 * (b - a) * _TAIL_GL_WEIGHTS)
    return default_np.concatenate(nodes), default_np.concatenate(weights)


_TAIL_S, _TAIL_W = _tail_nodes()


def _phi_psi(x: Any) -> tuple[default_np.ndarray, default_np.ndarray]:
    """phi(x) = int_0^1 e^{-x s} ds and psi(x) = int_0^1 s e^{-x s} ds, elementwise for a
    real or complex array with Re x >= 0; a Taylor series near x = 0 (no cancellation)."""
    x = default_np.asarray(x)
    small = default_np.abs(x) < _SERIES_RADIUS
    xl = default_np.where(small, 1.0, x)
    decay = default_np.exp(-xl)
    phi = (1.0 - decay) / xl
    psi = (phi - decay) / xl
    if default_np.any(small):
        minus_x = -x[small]
        phi_series = default_np.zeros_like(minus_x)
        psi_series = default_np.zeros_like(minus_x)
        for n in range(_SERIES_TERMS - 1, -1, -1):  # Horner: sum_n (-x)^n c_n
            phi_series = phi_series * minus_x + 1.0 / _FACTORIALS[n + 1]
            psi_series = psi_series * minus_x + 1.0 / (_FACTORIALS[n] * (n + 2))
        phi[small] = phi_series
        psi[small] = psi_series
    return phi, psi


def _segment_integral(rates: Any, start: float, length: float, w_a: float, w_b: float) -> Any:
    """int_start^{start + length} w(tau) exp(-z tau) dtau for each rate z (array), with w
    linear from w_a at ``start`` to w_b at the end; start >= 0, Re z >= 0."""
    rates = default_np.asarray(rates)
    phi, psi = _phi_psi(rates * length)
    return length * default_np.exp(-rates * start) * (w_a * phi + (w_b - w_a) * psi)


Segment = tuple[float, float, float, float, bool]


def _segments(delta: float, time_1: float, time_2: float | None, shape: str) -> list[Segment]:
    """The region's weight w(tau) (``weight_segments``) as pieces on tau >= 0:
    (start, length, w_start, w_end, reflected); a reflected piece stands for
    [-start - length, -start], where C(tau) = C(-tau)^*."""
    pieces: list[Segment] = []
    for tau_a, tau_b, w_a, w_b in weight_segments(delta, time_1, time_2, shape):
        if tau_b <= tau_a:
            continue
        cuts = [(tau_a, w_a)]
        if tau_a < 0.0 < tau_b:
            cuts.append((0.0, w_a + (w_b - w_a) * (0.0 - tau_a) / (tau_b - tau_a)))
        cuts.append((tau_b, w_b))
        for (a, wa), (b, wb) in zip(cuts[:-1], cuts[1:]):
            if b <= 0.0:
                pieces.append((-b, b - a, wb, wa, True))
            else:
                pieces.append((a, b - a, wa, wb, False))
    return pieces


class ExponentialSD(CustomSD):
    """Base of spectral densities whose J(w) is rational (odd in w), so that C(tau) is a
    finite sum of exponentials plus the Matsubara series (module docstring).

    A subclass gives J(w) (``_j_values``), the poles w_p of J in the lower half plane
    with their residues (``_poles``), and the Matsubara amplitudes a(nu) =
    -2 pi i T J(-i nu) (``_matsubara_amplitude``). Then, for tau >= 0,

        C(tau) = sum_p c_p exp(-z_p tau) + sum_{k >= 1} a(nu_k) exp(-nu_k tau),

    z_p = i w_p, c_p = -i pi Res_p J (coth(w_p / 2T) + 1), nu_k = 2 pi k T, and
    C(-tau) = C(tau)^*. At T = 0 the series becomes the integral int_0^inf b(nu)
    e^{-nu tau} dnu, b(nu) = -i J(-i nu) (the integral of J(w) e^{-i w tau} turned onto
    the negative imaginary axis), and c_p = -2 pi i Res_p for Re w_p > 0, -i pi Res_p on
    the axis (the principal value of the integral takes the other half), 0 for Re w_p < 0.
    """

    def __init__(
        self,
        temperature: float,
        frequency_scale: float,
        name: str | None = None,
        description: str | None = None,
    ):
        BaseCorrelations.__init__(self, name, description)
        self.temperature = check.non_negative_number(temperature, "temperature")
        self._frequency_scale = float(frequency_scale)
        self._upper_limit = math.inf
        self.j_function = self.spectral_density
        rates, amplitudes = [], []
        for pole, residue in self._poles():
            rates.append(1j * pole)
            if self.temperature > 0.0:
                coth = 1.0 / complex(default_np.tanh(pole / (2.0 * self.temperature)))
            else:  # coth(w / 2T) -> sign(Re w); 0 on the imaginary axis
                coth = float(default_np.sign(round(pole.real / abs(pole), 14)))
            amplitudes.append(-1j * math.pi * residue * (coth + 1.0))
        self._rates = default_np.array(rates, dtype=complex)
        self._amplitudes = default_np.array(amplitudes, dtype=complex)
        self._nu_1 = 2.0 * math.pi * self.temperature
        #: (k, coefficient, rate, delta) of a Matsubara term summed with a resonant one
        self._pair: tuple[int, float, float, float] | None = None
        self._num_terms = 0
        self._axis_cache: tuple[default_np.ndarray, default_np.ndarray] | None = None
        if self.temperature == 0.0:
            return
        largest = max(float(default_np.max(default_np.abs(self._rates))), frequency_scale)
        terms = 4.0 * largest / self._nu_1
        if terms > _MAX_MATSUBARA_TERMS:
            raise ValueError(
                f"temperature={self.temperature} is too low for this bath (below "
                f"{4.0 * largest / (2.0 * math.pi * _MAX_MATSUBARA_TERMS):.3g}, where the "
                f"Matsubara series needs more than {_MAX_MATSUBARA_TERMS} terms); use a "
                "higher temperature (far below the system's energies is enough) or T = 0"
            )
        self._num_terms = max(_MIN_MATSUBARA_TERMS, int(math.ceil(terms)))

    # --- what a subclass provides -------------------------------------------------
    def _j_values(self, omega: default_np.ndarray) -> default_np.ndarray:
        """J(w) for an array of w > 0."""
        raise NotImplementedError

    def _poles(self) -> list[tuple[complex, complex]]:
        """(w_p, residue of J at w_p) for the poles of J with Im w_p < 0."""
        raise NotImplementedError

    def _axis_density(self, nu: Any) -> Any:
        """b(nu) = -i J(-i nu) (real) for an array of nu > 0."""
        raise NotImplementedError

    def _matsubara_amplitude(self, nu: Any) -> Any:
        """a(nu) = -2 pi i T J(-i nu) = nu_1 b(nu) (real) for an array of nu > 0."""
        return self._nu_1 * self._axis_density(nu)

    def _imaginary_axis_response(self, nu: Any) -> Any:
        """chi(i nu) = int_0^inf J(w) 2 w / (w^2 + nu^2) dw (real) for an array of
        nu >= 0: the bath's response function on the imaginary axis, chi(0) = 2 lambda."""
        raise NotImplementedError

    def _axis_refinements(self) -> list[tuple[float, float]]:
        """(nu_r, delta) of the poles nu_r +- i delta of b near the positive axis, around
        which the quadrature panels of ``_axis_rule`` are refined; none here."""
        return []

    def _axis_rule(self) -> tuple[default_np.ndarray, default_np.ndarray]:
        """Nodes and weights of int_0^inf dnu: Gauss-Legendre (16 points) on panels with
        edges at s 2^j (s the frequency scale, |j| <= 60) and nu_r +- delta 2^j around
        the poles of b (``_axis_refinements``); the integrands fall at least as 1/nu^2."""
        if self._axis_cache is None:
            scale = self._frequency_scale
            edges = {0.0} | {scale * 2.0**j for j in range(-60, 61)}
            for centre, width in self._axis_refinements():
                for j in range(41):
                    edges |= {centre + width * 2.0**j, centre - width * 2.0**j}
            points = default_np.array(sorted(e for e in edges if 0.0 <= e <= scale * 2.0**60))
            nodes, weights = _TAIL_GL_NODES, _TAIL_GL_WEIGHTS
            a, b = points[:-1, None], points[1:, None]
            self._axis_cache = (
                (a + 0.5 * (b - a) * (nodes + 1.0)).reshape(-1),
                (0.5 * (b - a) * weights).reshape(-1),
            )
        return self._axis_cache

    def _axis_integral(self, transform) -> float:
        """int_0^inf b(nu) F(nu) dnu (T = 0; b without poles on nu > 0)."""
        nodes, weights = self._axis_rule()
        values = self._axis_density(nodes) * default_np.real(transform(nodes))
        return float(default_np.sum(weights * values))

    # --- the spectral density ------------------------------------------------------
    def spectral_density(self, omega: Any) -> Any:
        """J(w) for a scalar or an array of frequencies (0 for w <= 0)."""
        omega_array = default_np.asarray(omega, dtype=float)
        positive = default_np.where(omega_array > 0, omega_array, 1.0)
        values = default_np.where(omega_array > 0, self._j_values(positive), 0.0)
        return values if values.ndim else float(values)

    def _spectral_density_scalar(self, omega: float) -> float:
        return float(self.spectral_density(omega))

    def _j_scalar(self, omega: float) -> float:
        return float(self.spectral_density(omega))

    def time_scale(self) -> float:
        """1 / the frequency scale of J (Drude-Lorentz: its cutoff; underdamped: the
        larger of its frequency and damping)."""
        return 1.0 / self._frequency_scale

    def _quad(self, function, epsrel, subdiv_limit, weight=None, wvar=None) -> float:
        """int_0^inf function(w) dw (no oscillatory weight: the closed forms need none)."""
        if weight is not None:
            raise ValueError(f"{type(self).__name__} integrates no oscillatory weight")
        scale = self._frequency_scale
        total = 0.0
        for a, b in ((0.0, scale), (scale, 10.0 * scale), (10.0 * scale, math.inf)):
            value, _ = scipy.integrate.quad(
                function, a, b, epsrel=epsrel, epsabs=0.0, limit=subdiv_limit
            )
            total += value
        return total

    # --- the Matsubara series ------------------------------------------------------
    def _matsubara_sum(self, transform) -> complex:
        """sum_{k >= 1} a(nu_k) F(nu_k) for ``transform`` F (array of nu -> array): the
        first M terms one by one, the rest as int_{M + 1/2}^inf f(k) dk + f'(M + 1/2) / 24
        (Euler-Maclaurin, f(k) = a(k nu_1) F(k nu_1) smooth in k beyond M); at T = 0 the
        integral int_0^inf b(nu) F(nu) dnu it tends to (F real)."""
        if self.temperature == 0.0:
            return complex(self._axis_integral(transform))
        nu_1 = self._nu_1
        count = self._num_terms
        k = default_np.arange(1, count + 1, dtype=float)
        if self._pair is not None:
            k = k[k != self._pair[0]]  # summed with the resonant term
        terms = self._matsubara_amplitude(nu_1 * k) * transform(nu_1 * k)
        total = complex(default_np.sum(terms))

        def summand(x: Any) -> Any:
            x = default_np.asarray(x, dtype=float)
            return self._matsubara_amplitude(nu_1 * x) * transform(nu_1 * x)

        centre = count + 0.5
        tail = default_np.sum(_TAIL_W * centre / _TAIL_S**2 * summand(centre / _TAIL_S))
        ends = summand(default_np.array([centre - 1.0, centre + 1.0]))
        return total + complex(tail) + complex(ends[1] - ends[0]) / 48.0

    # --- correlations --------------------------------------------------------------
    def correlation(
        self,
        tau,
        epsrel=config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit=config.DEFAULT_SUBDIV_LIMIT,
        matsubara=False,
    ):
        """C(tau) for a scalar or an array of real times (complex), in closed form
        (``epsrel``, ``subdiv_limit`` unused); ``matsubara=True``: the imaginary-time
        correlation (real, by quadrature over w). Re C(0) is infinite where J(w) falls
        as slowly as 1/w (Drude-Lorentz)."""
        if matsubara:
            return self.matsubara_correlation(tau, epsrel, subdiv_limit)
        taus = default_np.asarray(tau, dtype=float)
        values = default_np.array(
            [self._correlation_scalar(float(t)) for t in taus.reshape(-1)], dtype=complex
        )
        return values.reshape(taus.shape) if taus.ndim else complex(values[0])

    def _correlation_scalar(self, tau: float) -> complex:
        t = abs(tau)
        if t == 0.0 and self._diverges_at_zero():
            value = complex(math.inf, float(default_np.sum(self._amplitudes.imag)))
        else:
            value = complex(default_np.sum(self._amplitudes * default_np.exp(-self._rates * t)))
            value += self._matsubara_sum(lambda nu: default_np.exp(-nu * t))
            if self._pair is not None:
                value += _pair_values(self._pair, default_np.array([t]))[0]
        return value if tau >= 0 else value.conjugate()

    def _diverges_at_zero(self) -> bool:
        """Whether sum_k a(nu_k) diverges (a(nu) ~ 1/nu: J(w) falls as 1/w)."""
        return False

    @staticmethod
    def _pair_integral(pair: tuple[int, float, float, float], pieces: list[Segment]) -> float:
        """int w(tau) pair(|tau|) dtau over the pieces (Gauss-Legendre, panels <= 1/rate)."""
        rate = pair[2]
        total = 0.0
        for start, length, w_a, w_b, _ in pieces:
            panels = max(1, int(math.ceil(length * rate)))
            for p in range(panels):
                a = start + length * p / panels
                h = length / panels
                taus = a + 0.5 * h * (_GL_NODES + 1.0)
                weights = w_a + (w_b - w_a) * (taus - start) / length
                total += float(
                    default_np.sum(0.5 * h * _GL_WEIGHTS * weights * _pair_values(pair, taus))
                )
        return total

    def square_integrals(
        self,
        delta: float,
        lags: Any,
        epsrel: float = config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit: int = config.DEFAULT_SUBDIV_LIMIT,
    ) -> default_np.ndarray:
        """eta_j for an array of whole lags j >= 2 at once (T > 0): on such a square every
        tau = t' - t'' >= (j - 1) delta > 0, where C(tau) = sum_p c_p e^{-z_p tau} +
        sum_k a(nu_k) e^{-nu_k tau}, so eta_j = sum over the terms of
        c e^{-z (j - 1) delta} (1 - e^{-z delta})^2 / z^2, the Matsubara series to
        nu_k (j_min - 1) delta = 40. Lags below 2, T = 0 and a resonant pair: one
        integral after the other."""
        lags_array = default_np.asarray(lags, dtype=float)
        if self.temperature == 0.0 or self._pair is not None or lags_array.size == 0:
            return super().square_integrals(delta, lags, epsrel, subdiv_limit)
        nearest = (float(default_np.min(lags_array)) - 1.0) * delta
        if nearest < delta - 1e-12 * delta:
            return super().square_integrals(delta, lags, epsrel, subdiv_limit)
        count = int(math.ceil(_SERIES_EXPONENT / (self._nu_1 * nearest)))
        if count > _MAX_MATSUBARA_TERMS:
            return super().square_integrals(delta, lags, epsrel, subdiv_limit)
        nu = self._nu_1 * default_np.arange(1, count + 1, dtype=float)
        shifts = (lags_array.reshape(-1) - 1.0) * delta

        def weight(rate: Any) -> Any:  # (1 - e^{-z delta})^2 / z^2
            return default_np.expm1(-rate * delta) ** 2 / rate**2

        direct = default_np.exp(-default_np.outer(shifts, self._rates)) @ (
            self._amplitudes * weight(self._rates)
        )
        series = default_np.zeros(len(shifts), dtype=complex)
        for block in range(0, count, _SERIES_BLOCK):  # bounded memory for many terms
            part = nu[block : block + _SERIES_BLOCK]
            series += default_np.exp(-default_np.outer(shifts, part)) @ (
                self._matsubara_amplitude(part) * weight(part)
            )
        return (direct + series).reshape(lags_array.shape)

    def _finite_region_integral(self, delta, time_1, time_2, shape, epsrel, subdiv_limit):
        pieces = _segments(delta, time_1, time_2, shape)
        direct, reflected = 0.0j, 0.0j
        for start, length, w_a, w_b, mirrored in pieces:
            value = complex(
                default_np.sum(
                    self._amplitudes * _segment_integral(self._rates, start, length, w_a, w_b)
                )
            )
            if mirrored:
                reflected += value
            else:
                direct += value

        def transform(nu):
            return sum(_segment_integral(nu, p[0], p[1], p[2], p[3]) for p in pieces)

        total = direct + reflected.conjugate() + self._matsubara_sum(transform)
        if self._pair is not None:
            total += self._pair_integral(self._pair, pieces)
        return total

    def _tail_integral(self, time: float, epsrel: float, subdiv_limit: int) -> complex:
        """int_time^inf C(tau) dtau, time > 0, in closed form."""
        value = complex(
            default_np.sum(self._amplitudes * default_np.exp(-self._rates * time) / self._rates)
        )
        value += self._matsubara_sum(lambda nu: default_np.exp(-nu * time) / nu)
        if self._pair is not None:
            _, coefficient, rate, delta = self._pair
            # int_t^inf e^{-r tau} (e^{-delta tau} - 1) / delta = e^{-r t} (...) in a stable form
            decay = math.exp(-rate * time)
            if delta == 0.0:
                value += -coefficient * decay * (time / rate + 1.0 / rate**2)
            else:
                inner = math.expm1(-delta * time) / delta / (rate + delta)
                value += coefficient * decay * (inner - 1.0 / (rate * (rate + delta)))
        return value

    def imaginary_time_integrals(
        self,
        n_steps: int,
        epsrel: float = config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit: int = config.DEFAULT_SUBDIV_LIMIT,
    ) -> default_np.ndarray:
        """eta_lag, lag = 0 .. n_steps // 2, of the imaginary-time grid delta = beta /
        n_steps in closed form (``epsrel``, ``subdiv_limit`` unused). C_M is beta-periodic,

            C_M(tau) = T sum_{n in Z} chi(i nu_n) e^{i nu_n tau},  nu_n = 2 pi n T,

        so a square at lag j integrates to T [chi(0) delta^2 + 4 sum_{n >= 1} chi(i nu_n)
        (1 - cos nu_n delta) cos(nu_n j delta) / nu_n^2] and the triangle to T [chi(0)
        delta^2 / 2 + 2 sum_{n >= 1} chi(i nu_n) (1 - cos nu_n delta) / nu_n^2]. The angles
        nu_n delta = 2 pi n / n_steps repeat with n mod n_steps: per residue r the sum over
        n = r + m n_steps is smooth in m, summed to m = 63 and its tail by Euler-Maclaurin
        (as :meth:`_matsubara_sum`); the lags are then one cosine transform."""
        self._check_thermal()
        n = check.positive_integer(n_steps, "n_steps", minimum=2)
        beta = 1.0 / self.temperature
        delta = beta / n
        residues = default_np.arange(1, n, dtype=float)  # r = 0: 1 - cos = 0

        def summand(k: Any) -> Any:  # chi(i nu_k) / nu_k^2 at (real) k
            nu = self._nu_1 * k
            return self._imaginary_axis_response(nu) / nu**2

        count = _RESIDUE_TERMS
        sums = summand(residues[:, None] + n * default_np.arange(count)).sum(axis=1)
        start = residues + (count - 0.5) * n  # int_{count - 1/2}^inf dm = int_start^inf dk / n
        nodes = start[:, None] / _TAIL_S
        tail = default_np.sum(_TAIL_W * nodes / _TAIL_S * summand(nodes), axis=1) / n
        slope = (summand(start + n) - summand(start - n)) / 48.0  # h'(count - 1/2) / 24
        angles = 2.0 * math.pi * residues / n
        weights = 2.0 * default_np.sin(0.5 * angles) ** 2 * (sums + tail + slope)
        chi_0 = float(self._imaginary_axis_response(default_np.array([0.0]))[0])
        lags = default_np.arange(n // 2 + 1, dtype=float)
        squares = chi_0 * delta**2 + 4.0 * default_np.cos(default_np.outer(lags, angles)) @ weights
        squares[0] = 0.5 * chi_0 * delta**2 + 2.0 * float(default_np.sum(weights))
        return squares / beta

    def _matsubara_region_integral(self, delta, time_1, time_2, shape, epsrel, subdiv_limit):
        """Region integral of C_M(tau) = int J(w) [e^{-w tau} + e^{-w (beta - tau)}] /
        (1 - e^{-w beta}) dw: the tau integral in closed form, then quadrature over w."""
        beta = 1.0 / self.temperature
        pieces = _segments(delta, time_1, time_2, shape)

        def integrand(w: float) -> float:
            if w <= 0.0:
                return 0.0
            rate = default_np.array([w])
            total = 0.0
            for start, length, w_a, w_b, _ in pieces:
                total += float(_segment_integral(rate, start, length, w_a, w_b)[0])
                # e^{-w (beta - tau)}: tau from start to start + length is u = beta - tau
                total += float(_segment_integral(rate, beta - start - length, length, w_b, w_a)[0])
            return float(self.spectral_density(w)) * total / -math.expm1(-w * beta)

        return complex(self._quad(integrand, epsrel, subdiv_limit), 0.0)

    def max_correlation_time_estimate(self, tolerance: float = 1e-3) -> float:
        """Smallest time tau_c with |C(tau)| <= tolerance * max |C| from tau_c on, on a
        geometric grid of times from 1e-3 / (frequency scale) (where Re C(0) is
        infinite, the maximum is over that grid)."""
        taus = default_np.geomspace(1e-3, 1e4, 161) * self.time_scale()
        values = default_np.abs(default_np.asarray(self.correlation(taus)))
        reference = max(float(default_np.max(values)), abs(complex(self.correlation(0.0))))
        if not math.isfinite(reference):
            reference = float(default_np.max(values))
        above = default_np.nonzero(values > tolerance * reference)[0]
        if len(above) == 0:
            return float(taus[0])
        return float(taus[min(above[-1] + 1, len(taus) - 1)])


class DrudeLorentzSD(ExponentialSD):
    """Drude-Lorentz (overdamped Brownian) spectral density with its exact correlation.

        J(w) = (2 lambda / pi) gamma w / (gamma^2 + w^2),

    lambda = ``reorganisation_energy`` = int_0^inf J(w) / w dw, gamma = ``cutoff``
    (the width of the Lorentzian), with the library's C(tau) = int_0^inf J(w)
    [coth(w / 2T) cos(w tau) - i sin(w tau)] dw (no 1/pi). No extra high-frequency
    cutoff: the correlation is the exact Matsubara series (T = 1/beta, nu_k = 2 pi k T)

        C(tau) = lambda gamma (cot(beta gamma / 2) - i) e^{-gamma tau}
                 + 4 lambda gamma T sum_{k >= 1} nu_k / (nu_k^2 - gamma^2) e^{-nu_k tau},

    tau >= 0 (where gamma meets a nu_k the two terms are summed together, finite).
    Re C(0) is infinite (J falls as 1/w); its integrals, which the methods use, are
    finite.

    Conventions of the field: QuTiP's ``DrudeLorentzBath(Q, lam, gamma, T)`` /
    ``DrudeLorentzEnvironment(T, lam, gamma)`` and the HEOM literature write
    J_them(w) = 2 lam gamma w / (gamma^2 + w^2) = pi J(w) and C(t) = (1/pi) int
    J_them [...] dw: the same C(t), so ``DrudeLorentzSD(lam, gamma, T)`` is their bath
    with the same numbers (their "coupling strength" lam is this reorganisation
    energy, (1/pi) int J_them / w dw = lam). At low frequency J = 2 alpha w with the
    Ohmic alpha = lambda / (pi gamma) of :class:`~nonmarkov.PowerLawSD`.

    Parameters
    ----------
    reorganisation_energy : lambda >= 0 (energy).
    cutoff : gamma > 0 (frequency: the correlation decays at rate gamma).
    temperature : T >= 0 (energy, k_B = 1). At T = 0 the Matsubara series is the
        integral (2 lambda gamma / pi) PV int_0^inf nu e^{-nu tau} / (nu^2 - gamma^2) dnu
        and the resonant term -i lambda gamma e^{-gamma tau} (the discretised influence
        by a Gauss-Legendre rule over nu).
    """

    def __init__(
        self,
        reorganisation_energy: float,
        cutoff: float,
        temperature: float = 0.0,
        name: str | None = None,
        description: str | None = None,
    ):
        self.reorganisation_energy = check.non_negative_number(
            reorganisation_energy, "reorganisation_energy"
        )
        self.cutoff = check.positive_number(cutoff, "cutoff")
        super().__init__(temperature, self.cutoff, name, description)
        gamma, lam, temp = self.cutoff, self.reorganisation_energy, self.temperature
        n = int(round(gamma / self._nu_1)) if temp > 0.0 else 0
        if n >= 1 and abs(gamma - n * self._nu_1) < _RESONANCE_WINDOW * self._nu_1:
            # gamma ~ nu_n: lambda gamma cot(gamma / 2T) e^{-gamma tau} + a_n e^{-nu_n tau}
            # = (lambda gamma (cot y - 1/y) + 2 lambda gamma T / (gamma + nu_n)) e^{-gamma tau}
            #   + a_n (nu_n - gamma) e^{-gamma tau} expm1(-(nu_n - gamma) tau) / (nu_n - gamma)
            nu_n = n * self._nu_1
            y = (gamma - nu_n) / (2.0 * temp)
            combined = lam * gamma * (_cot_minus_inverse(y) + 2.0 * temp / (gamma + nu_n))
            self._amplitudes = default_np.array([combined - 1j * lam * gamma])
            self._pair = (n, 4.0 * lam * gamma * temp * nu_n / (nu_n + gamma), gamma, nu_n - gamma)

    def _diverges_at_zero(self) -> bool:
        return self.reorganisation_energy > 0.0

    def _j_values(self, omega):
        gamma = self.cutoff
        return (2.0 * self.reorganisation_energy / math.pi) * gamma * omega / (gamma**2 + omega**2)

    def _poles(self):
        gamma = self.cutoff
        return [(-1j * gamma, self.reorganisation_energy * gamma / math.pi)]

    def _axis_density(self, nu):
        gamma = self.cutoff
        return (2.0 * self.reorganisation_energy * gamma / math.pi) * nu / (nu**2 - gamma**2)

    def _imaginary_axis_response(self, nu):
        return 2.0 * self.reorganisation_energy * self.cutoff / (self.cutoff + nu)

    def _axis_integral(self, transform) -> float:
        """int_0^inf b(nu) F(nu) dnu at T = 0, b = (lambda gamma / pi) (1/(nu - gamma)
        + 1/(nu + gamma)): the pole at nu = gamma as a principal value, F(gamma) subtracted
        over [0, 2 gamma] (where PV int dnu / (nu - gamma) = 0; gamma and 2 gamma are panel
        edges of ``_axis_rule``, so no node is closer to gamma than ~1e-3 gamma)."""
        gamma = self.cutoff
        nodes, weights = self._axis_rule()
        values = default_np.real(transform(nodes))
        at_pole = float(default_np.real(transform(default_np.array([gamma])))[0])
        inside = nodes < 2.0 * gamma
        minus = default_np.where(inside, values - at_pole, values) / (nodes - gamma)
        total = default_np.sum(weights * (minus + values / (nodes + gamma)))
        return float(self.reorganisation_energy * gamma / math.pi * total)

    def __str__(self) -> str:
        return (
            f"DrudeLorentzSD(reorganisation_energy={self.reorganisation_energy}, "
            f"cutoff={self.cutoff}, temperature={self.temperature})"
        )


class UnderdampedSD(ExponentialSD):
    """Underdamped Brownian-oscillator spectral density with its exact correlation.

        J(w) = (2 lambda / pi) Gamma w0^2 w / ((w0^2 - w^2)^2 + Gamma^2 w^2),

    lambda = ``reorganisation_energy`` = int_0^inf J(w) / w dw, w0 = ``frequency``
    (the oscillator's), Gamma = ``damping`` (< 2 w0), with the library's C(tau)
    (no 1/pi). With Omega = sqrt(w0^2 - Gamma^2 / 4) the poles w = +-Omega - i Gamma/2
    give the resonant terms (rates Gamma/2 +- i Omega) and T > 0 the Matsubara terms
    (at T = 0 their integral, :class:`ExponentialSD`)

        a_k = -4 lambda Gamma w0^2 T nu_k / ((w0^2 + nu_k^2)^2 - Gamma^2 nu_k^2).

    Conventions of the field: the HEOM literature writes the Brownian oscillator
    J_them(w) = 2 lam Gamma w0^2 w / ((w0^2 - w^2)^2 + Gamma^2 w^2) = pi J(w) with
    (1/pi) in C(t) and reorganisation energy lam: ``UnderdampedSD(lam, w0, Gamma,
    T)``. QuTiP's ``UnderDampedBath(Q, T, lam, gamma, w0)`` /
    ``UnderDampedEnvironment(T, lam, gamma, w0)`` writes J_them = lam^2 Gamma w /
    ((w0^2 - w^2)^2 + Gamma^2 w^2) with a coupling lam: :meth:`from_coupling`
    (reorganisation energy lam^2 / (2 w0^2)).

    Parameters
    ----------
    reorganisation_energy : lambda >= 0 (energy).
    frequency : w0 > 0.
    damping : Gamma with 0 < Gamma < 2 w0 (an underdamped oscillator; Omega >= 1e-3
        w0, below which the two resonant terms cancel to too few digits).
    temperature : T >= 0 (energy, k_B = 1).
    """

    def __init__(
        self,
        reorganisation_energy: float,
        frequency: float,
        damping: float,
        temperature: float = 0.0,
        name: str | None = None,
        description: str | None = None,
    ):
        self.reorganisation_energy = check.non_negative_number(
            reorganisation_energy, "reorganisation_energy"
        )
        self.frequency = check.positive_number(frequency, "frequency")
        self.damping = check.positive_number(damping, "damping")
        omega_sq = self.frequency**2 - 0.25 * self.damping**2
        if omega_sq < (1e-3 * self.frequency) ** 2:
            raise ValueError(
                f"UnderdampedSD needs damping < 2 * frequency (an underdamped oscillator, "
                f"sqrt(frequency^2 - damping^2 / 4) >= 1e-3 frequency); got damping="
                f"{self.damping}, frequency={self.frequency}: for stronger damping use "
                "DrudeLorentzSD or CustomSD"
            )
        self._omega = math.sqrt(omega_sq)
        super().__init__(temperature, max(self.frequency, self.damping), name, description)

    @classmethod
    def from_coupling(
        cls,
        coupling: float,
        frequency: float,
        damping: float,
        temperature: float,
        name: str | None = None,
        description: str | None = None,
    ) -> UnderdampedSD:
        """The bath of QuTiP's ``UnderDampedBath``/``UnderDampedEnvironment`` with
        coupling ``coupling`` (their lam): reorganisation energy lam^2 / (2 w0^2)."""
        coupling = check.real_number(coupling, "coupling")
        frequency = check.positive_number(frequency, "frequency")
        return cls(
            coupling**2 / (2.0 * frequency**2), frequency, damping, temperature, name, description
        )

    def _j_values(self, omega):
        w0, damping = self.frequency, self.damping
        prefactor = 2.0 * self.reorganisation_energy * damping * w0**2 / math.pi
        return prefactor * omega / ((w0**2 - omega**2) ** 2 + damping**2 * omega**2)

    def _poles(self):
        w0, damping = self.frequency, self.damping
        k = 2.0 * self.reorganisation_energy * damping * w0**2 / math.pi
        residue = 1j * k / (4.0 * damping * self._omega)
        half = -0.5j * damping
        return [(self._omega + half, residue), (-self._omega + half, -residue)]

    def _axis_refinements(self):
        # b has poles at nu = Gamma/2 +- i Omega
        return [(0.5 * self.damping, self._omega)]

    def _axis_density(self, nu):
        w0, damping = self.frequency, self.damping
        prefactor = -2.0 * self.reorganisation_energy * damping * w0**2 / math.pi
        return prefactor * nu / ((w0**2 + nu**2) ** 2 - damping**2 * nu**2)

    def _imaginary_axis_response(self, nu):
        w0 = self.frequency
        return 2.0 * self.reorganisation_energy * w0**2 / (w0**2 + nu**2 + self.damping * nu)

    def __str__(self) -> str:
        return (
            f"UnderdampedSD(reorganisation_energy={self.reorganisation_energy}, "
            f"frequency={self.frequency}, damping={self.damping}, "
            f"temperature={self.temperature})"
        )


def _pair_values(pair: tuple[int, float, float, float], taus: default_np.ndarray) -> Any:
    """The pair term coefficient * exp(-rate tau) expm1(-delta tau) / delta (the resonant
    and the Matsubara term summed, ``ExponentialSD._pair``) for taus >= 0."""
    _, coefficient, rate, delta = pair
    ratio = -taus if delta == 0.0 else default_np.expm1(-delta * taus) / delta
    return coefficient * default_np.exp(-rate * taus) * ratio


def _cot_minus_inverse(y: float) -> float:
    """cot(y) - 1/y without cancellation near y = 0."""
    if abs(y) < 0.2:
        y2 = y * y
        return -y * (
            1 / 3
            + y2
            * (1 / 45 + y2 * (2 / 945 + y2 * (1 / 4725 + y2 * (2 / 93555 + y2 * 1382 / 638512875))))
        )
    return 1.0 / math.tan(y) - 1.0 / y


#: the exponential tail is cut where it has fallen by e^-40 (~4e-18)
_TAIL_LENGTH_IN_WIDTHS = 40.0


class TabulatedSD(CustomSD):
    """A spectral density given as a table of J(w), interpolated, with an explicit tail.

    J(w) is in the library's convention (module docstring: C(tau) = int_0^inf J(w)
    [coth(w / 2T) cos(w tau) - i sin(w tau)] dw, no 1/pi); ``scale`` multiplies the
    table, e.g. ``scale=1/pi`` for a J in QuTiP's or the HEOM literature's convention
    (J_them = pi J).

    - Between the points: monotone cubic (PCHIP) interpolation, which keeps J >= 0 and
      adds no overshoot. A table that starts above w = 0 gets the point J(0) = 0 (J
      must vanish at w = 0 for C(tau) to exist at T > 0); a table that starts at w = 0
      must have J(0) = 0.
    - Beyond the last point w_n: J(w) = J(w_n) exp(-(w - w_n) / w_t), a smooth decay
      instead of a hard cut (which would make C(tau) ring as sin(w_n tau) / tau). The
      width w_t is ``tail_width``; by default the decay of the last interval continued
      (w_t = (w_n - w_{n-1}) / ln(J_{n-1} / J_n), at most w_n) where the table falls at
      its end, 0.05 w_n where it does not, and no tail where J(w_n) = 0. The integrals
      stop at w_n + 40 w_t.

    The correlations are computed as for :class:`CustomSD` (quadrature over w; any
    T >= 0).

    Parameters
    ----------
    frequencies : (n,) strictly increasing frequencies w >= 0, n >= 2.
    values : (n,) J(w) >= 0 at those frequencies (finite).
    temperature : T >= 0.
    tail_width : w_t > 0 of the exponential tail, or None (the rule above).
    scale : factor > 0 applied to ``values``.
    """

    def __init__(
        self,
        frequencies: Any,
        values: Any,
        temperature: float = 0.0,
        tail_width: float | None = None,
        scale: float = 1.0,
        name: str | None = None,
        description: str | None = None,
    ):
        import scipy.interpolate

        w, j = _checked_table(frequencies, values)
        self.scale = check.positive_number(scale, "scale")
        j = j * self.scale
        if w[0] > 0.0:
            w, j = default_np.concatenate([[0.0], w]), default_np.concatenate([[0.0], j])
        self.frequencies = w
        self.values = j
        BaseCorrelations.__init__(self, name, description)
        self.temperature = check.non_negative_number(temperature, "temperature")
        self.tail_width = _tail_width(w, j, tail_width)
        self.cutoff = float(w[-1])
        self._upper_limit = self.cutoff + _TAIL_LENGTH_IN_WIDTHS * self.tail_width
        self.j_function = self.spectral_density
        self._interpolant = scipy.interpolate.PchipInterpolator(w, j, extrapolate=False)
        coefficients = self._interpolant.c  # (4, n - 1), cubic in (w - w_i)
        self._pieces = [tuple(float(c) for c in coefficients[:, i]) for i in range(len(w) - 1)]

    @classmethod
    def from_file(
        cls,
        path: Any,
        temperature: float = 0.0,
        tail_width: float | None = None,
        scale: float = 1.0,
        name: str | None = None,
        description: str | None = None,
    ) -> TabulatedSD:
        """Read the table from a file: two columns w, J(w).

        - ``.npy``: an array of shape (n, 2) (or (2, n));
        - ``.npz``: arrays ``w`` and ``J``, or a single (n, 2) array;
        - anything else: text, one point per line, columns separated by white space or
          commas (``.csv``); lines starting with ``#`` and a first line that is not
          numbers (a header) are skipped.

        The other parameters are those of :class:`TabulatedSD`; ``name`` defaults to the
        file's name.
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise ValueError(f"TabulatedSD.from_file: no such file: {path!r}")
        table = _read_table(path)
        return cls(
            table[:, 0],
            table[:, 1],
            temperature=temperature,
            tail_width=tail_width,
            scale=scale,
            name=os.path.basename(path) if name is None else name,
            description=description,
        )

    def spectral_density(self, omega: Any) -> Any:
        """J(w) for a scalar or an array of frequencies (0 for w <= 0)."""
        omega_array = default_np.asarray(omega, dtype=float)
        last, width = self.cutoff, self.tail_width
        inside = default_np.nan_to_num(self._interpolant(default_np.clip(omega_array, 0.0, last)))
        with default_np.errstate(over="ignore"):
            tail = self.values[-1] * default_np.exp(-(omega_array - last) / width)
        values = default_np.where(omega_array <= last, default_np.maximum(inside, 0.0), tail)
        values = default_np.where(omega_array > 0.0, values, 0.0)
        return values if values.ndim else float(values)

    def _spectral_density_scalar(self, omega: float) -> float:
        if omega <= 0.0:
            return 0.0
        if omega >= self.cutoff:
            return float(self.values[-1]) * math.exp(-(omega - self.cutoff) / self.tail_width)
        index = min(bisect.bisect_right(self.frequencies, omega) - 1, len(self._pieces) - 1)
        c3, c2, c1, c0 = self._pieces[index]
        x = omega - float(self.frequencies[index])
        return max(((c3 * x + c2) * x + c1) * x + c0, 0.0)

    def _j_scalar(self, omega: float) -> float:
        return self._spectral_density_scalar(omega)

    def __str__(self) -> str:
        return (
            f"TabulatedSD({len(self.frequencies)} points up to w={self.cutoff:g}, "
            f"tail_width={self.tail_width:g}, scale={self.scale:g}, "
            f"temperature={self.temperature})"
        )


def _checked_table(frequencies: Any, values: Any) -> tuple[default_np.ndarray, default_np.ndarray]:
    """(w, J) as float arrays, checked: 1-D, same length >= 2, finite, w >= 0 strictly
    increasing, J >= 0, J(0) = 0."""
    try:
        w = default_np.asarray(frequencies, dtype=float)
        j = default_np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise TypeError(f"TabulatedSD: frequencies and values must be numbers ({error})") from None
    if w.ndim != 1 or j.ndim != 1 or len(w) != len(j):
        raise ValueError(
            f"TabulatedSD: frequencies and values must be 1-D of the same length; got shapes "
            f"{w.shape} and {j.shape}"
        )
    if len(w) < 2:
        raise ValueError(f"TabulatedSD needs at least 2 points; got {len(w)}")
    for label, array in (("frequencies", w), ("values", j)):
        bad = default_np.nonzero(~default_np.isfinite(array))[0]
        if bad.size:
            raise ValueError(
                f"TabulatedSD: {label} must be finite; entry {bad[0]} is {array[bad[0]]}"
            )
    if w[0] < 0.0:
        raise ValueError(f"TabulatedSD: frequencies must be >= 0; the first is {w[0]}")
    steps = default_np.nonzero(default_np.diff(w) <= 0.0)[0]
    if steps.size:
        i = steps[0]
        raise ValueError(
            "TabulatedSD: frequencies must be strictly increasing (sort the table, remove "
            f"repeated points); entries {i} and {i + 1} are {w[i]} and {w[i + 1]}"
        )
    negative = default_np.nonzero(j < 0.0)[0]
    if negative.size:
        i = negative[0]
        raise ValueError(f"TabulatedSD: J(w) must be >= 0; J({w[i]}) = {j[i]} (entry {i})")
    if w[0] == 0.0 and j[0] != 0.0:
        raise ValueError(
            f"TabulatedSD: J(0) must be 0 (got {j[0]}): with J(0) > 0 the correlation "
            "diverges at T > 0 (J(w) coth(w / 2T) ~ 1/w)"
        )
    return w, j


def _tail_width(w: default_np.ndarray, j: default_np.ndarray, tail_width: Any) -> float:
    """The width w_t of the exponential tail (``TabulatedSD``)."""
    if tail_width is not None:
        return check.positive_number(tail_width, "tail_width")
    last = float(w[-1])
    if j[-1] == 0.0:
        return 1e-3 * last  # J is 0 at the end: the tail carries nothing
    if j[-2] > j[-1]:
        return min((last - float(w[-2])) / math.log(float(j[-2]) / float(j[-1])), last)
    return 0.05 * last


def _read_table(path: str) -> default_np.ndarray:
    """The (n, 2) table of w, J(w) in the file (``TabulatedSD.from_file``)."""
    lower = path.lower()
    if lower.endswith(".npy") or lower.endswith(".npz"):
        try:
            loaded = default_np.load(path, allow_pickle=False)
        except (OSError, ValueError) as error:
            raise ValueError(f"TabulatedSD.from_file: cannot read {path!r}: {error}") from None
        if lower.endswith(".npz"):
            names = list(loaded.files)
            if "w" in names and "J" in names:
                table = default_np.stack([loaded["w"], loaded["J"]], axis=-1)
            elif len(names) == 1:
                table = default_np.asarray(loaded[names[0]])
            else:
                raise ValueError(
                    f"TabulatedSD.from_file: {path!r} must hold arrays 'w' and 'J' or a "
                    f"single (n, 2) array; it holds {names}"
                )
        else:
            table = default_np.asarray(loaded)
        if table.ndim == 2 and table.shape[0] == 2 and table.shape[1] != 2:
            table = table.T
    else:
        table = _read_text_table(path)
    if table.ndim != 2 or table.shape[1] != 2:
        raise ValueError(
            f"TabulatedSD.from_file: {path!r} must hold two columns (w, J); got an array of "
            f"shape {table.shape}"
        )
    return table.astype(float)


def _read_text_table(path: str) -> default_np.ndarray:
    """Rows of numbers from a text file: white space or commas, '#' comments, at most one
    header line before the numbers."""
    rows: list[list[float]] = []
    header_allowed = True
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split("#", 1)[0].replace(",", " ").split()
            if not fields:
                continue
            try:
                rows.append([float(x) for x in fields])
            except ValueError:
                if header_allowed:
                    header_allowed = False
                    continue
                raise ValueError(
                    f"TabulatedSD.from_file: {path!r} line {number} is not numbers: "
                    f"{line.strip()!r}"
                ) from None
            header_allowed = False
    if not rows:
        raise ValueError(f"TabulatedSD.from_file: {path!r} holds no numbers")
    widths = sorted({len(row) for row in rows})
    if widths != [2]:
        raise ValueError(
            f"TabulatedSD.from_file: every line of {path!r} must have two numbers (w, J); "
            f"found lines with {widths} numbers"
        )
    return default_np.array(rows, dtype=float)
