"""Bath correlation functions and their discretised double integrals.

Convention (the library's, docs/index.md "Conventions"), with J(w) the spectral density:

    C(tau) = int_0^inf J(w) [coth(w / 2T) cos(w tau) - i sin(w tau)] dw,

and in imaginary time, for 0 <= tau <= 1/T,

    C_M(tau) = int_0^inf J(w) cosh(w (1/2T - tau)) / sinh(w / 2T) dw.

TEMPO needs the integrals of C(t' - t'') over squares and triangles of the
time grid (``correlation_2d_integral``). They are computed once, on the host,
with ``scipy.integrate.quad`` and cached per parameter set.

For a spectral density the integral over the time region is done in closed
form inside the frequency integral, so each value costs one adaptive 1-D
quadrature (with an oscillatory weight for distant regions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as default_np
import scipy.integrate

from .. import config
from .. import validation as check
from . import guards
from .api import BaseAPIClass

CUTOFF_TYPES = ("exponential", "gaussian", "hard")
SHAPES = ("square", "upper-triangle", "lower-triangle", "rectangle")

# Frequency range of the quadratures, in units of the cutoff: beyond it the
# cutoff function is below 1e-26 (exponential) or 1e-43 (gaussian).
_UPPER_LIMIT_IN_CUTOFFS = {"exponential": 60.0, "gaussian": 10.0, "hard": 1.0}
_GAUSS_NODES, _GAUSS_WEIGHTS = default_np.polynomial.legendre.leggauss(48)


def weight_segments(
    delta: float, time_1: float, time_2: float | None, shape: str
) -> list[tuple[float, float, float, float]]:
    """Piecewise-linear weight w(tau) of a time region.

    int_region f(t' - t'') dt'' dt' = int w(tau) f(tau) dtau. Returned as
    segments (tau_a, tau_b, w(tau_a), w(tau_b)).
    """
    if shape == "square":
        time_2 = time_1 + delta
    if shape in ("square", "rectangle"):
        if time_2 is None:
            raise ValueError("shape='rectangle' needs time_2")
        length = time_2 - time_1
        short, long_ = sorted((length, delta))
        # convolution of two boxes: rises over `short`, flat, falls over `short`
        start = time_1 - delta
        points = [start, start + short, start + long_, start + long_ + short]
        return [
            (points[0], points[1], 0.0, short),
            (points[1], points[2], short, short),
            (points[2], points[3], short, 0.0),
        ]
    if shape == "upper-triangle":
        return [(time_1, time_1 + delta, delta, 0.0)]
    return [(time_1 - delta, time_1, 0.0, delta)]  # lower-triangle


def _sinc(x: float) -> float:
    """sin(x) / x for a float."""
    return 1.0 - x * x / 6.0 if abs(x) < 1e-4 else math.sin(x) / x


def _one_minus_cos_over_square(x: float) -> float:
    """(1 - cos x) / x^2 for a float (the integrands call it per frequency)."""
    if abs(x) < 1e-4:
        return 0.5 - x * x / 24.0
    return 2.0 * (math.sin(0.5 * x) / x) ** 2


def _x_minus_sin_over_cube(x: float) -> float:
    """(x - sin x) / x^3 for a float."""
    if abs(x) < 1e-2:
        x2 = x * x
        return 1.0 / 6.0 - x2 / 120.0 + x2 * x2 / 5040.0
    return (x - math.sin(x)) / x**3


class BaseCorrelations(BaseAPIClass):
    """Interface of all bath correlation functions.

    Subclasses implement ``correlation(tau)`` and ``correlation_2d_integral``.
    """

    _default_name = "Unnamed Correlations"

    def __init__(self, name: str | None = None, description: str | None = None):
        super().__init__(name, description)
        self._cache: dict[tuple, complex] = {}

    def correlation(
        self,
        tau: Any,
        epsrel: float = config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit: int = config.DEFAULT_SUBDIV_LIMIT,
        matsubara: bool = False,
    ) -> Any:
        """C(tau) for a scalar or an array of times (complex); ``matsubara=True``:
        the imaginary-time correlation C_M(tau) (real, 0 <= tau <= 1/T)."""
        raise NotImplementedError

    def eta_function(
        self,
        tau: Any,
        epsrel: float = config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit: int = config.DEFAULT_SUBDIV_LIMIT,
        matsubara: bool = False,
    ) -> Any:
        """The double integral Phi(tau) = int_0^tau dt' int_0^t' dt'' C(t' - t'') for a
        scalar or an array of times tau >= 0 (complex; for a spectral density
        Phi = G - i P with G(t) = int J(w) coth(w/2T) (1 - cos wt) / w^2 dw and
        P(t) = int J(w) (wt - sin wt) / w^2 dw, the functions of the independent-boson
        model's exact coherences); ``matsubara=True``: the same of C_M (real)."""
        taus = default_np.asarray(tau, dtype=float)
        values = []
        for t in taus.reshape(-1):
            if t < 0.0:
                raise ValueError(f"eta_function needs tau >= 0; got {t}")
            values.append(
                self.correlation_2d_integral(
                    float(t),
                    0.0,
                    shape="upper-triangle",
                    epsrel=epsrel,
                    subdiv_limit=subdiv_limit,
                    matsubara=matsubara,
                )
            )
        result = default_np.array(values, dtype=complex)
        if matsubara:
            result = result.real
        return result.reshape(taus.shape) if taus.ndim else result.reshape(-1)[0].item()

    def square_integrals(
        self,
        delta: float,
        lags: Any,
        epsrel: float = config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit: int = config.DEFAULT_SUBDIV_LIMIT,
    ) -> default_np.ndarray:
        """``correlation_2d_integral(delta, j delta)`` ('square') for an array of whole
        lags j (complex array, the shape of ``lags``): the couplings eta_j of a time
        grid of step ``delta``. Here one integral after the other; a correlation in
        closed form may do them at once."""
        lags_array = default_np.asarray(lags, dtype=float)
        values = [
            self.correlation_2d_integral(
                delta, float(j) * delta, epsrel=epsrel, subdiv_limit=subdiv_limit
            )
            for j in lags_array.reshape(-1)
        ]
        return default_np.array(values, dtype=complex).reshape(lags_array.shape)

    def correlation_2d_integral(
        self,
        delta: float,
        time_1: float,
        time_2: float | None = None,
        shape: str = "square",
        epsrel: float = config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit: int = config.DEFAULT_SUBDIV_LIMIT,
        matsubara: bool = False,
    ) -> complex:
        """Double integral of C(t' - t'') over a region of the time plane.

        With d = ``delta``, t1 = ``time_1``, t2 = ``time_2``:

        - ``'square'``:         t' in [t1, t1 + d], t'' in [0, d]
        - ``'upper-triangle'``: t' in [t1, t1 + d], t'' in [0, t' - t1]
        - ``'lower-triangle'``: t' in [t1, t1 + d], t'' in [t' - t1, d]
        - ``'rectangle'``:      t' in [t1, t2],     t'' in [0, d]; t2 may be
          ``math.inf`` (for t1 >= d: the integral of C over all later times)

        ``matsubara=True`` integrates the imaginary-time correlation C_M
        instead (times are then imaginary times in [0, 1/T]). A region of zero
        width (``delta`` = 0) integrates to 0. The result is cached per
        argument set. On the interface itself (a subclass that does not implement the
        integral) it is a NotImplementedError, whatever the arguments.
        """
        if type(self)._finite_region_integral is BaseCorrelations._finite_region_integral:
            raise NotImplementedError(
                f"{type(self).__name__} does not implement correlation_2d_integral; use "
                "PowerLawSD, CustomSD or CustomCorrelations"
            )
        delta = check.non_negative_number(delta, "delta")
        time_1 = check.real_number(time_1, "time_1")
        shape = check.choice(shape, SHAPES, "shape")
        if shape == "rectangle":
            if time_2 is None:
                raise ValueError("shape='rectangle' needs time_2")
            time_2 = check.real_number(time_2, "time_2", allow_infinity=True)
            if time_2 < time_1:
                raise ValueError(f"time_2 ({time_2}) must be >= time_1 ({time_1})")
            if math.isinf(time_2) and (matsubara or time_1 < delta):
                raise ValueError(
                    "an infinite rectangle (time_2=inf) needs real times and "
                    f"time_1 >= delta; got time_1={time_1}, delta={delta}"
                )
        if delta == 0.0:
            return 0.0j
        matsubara = check.boolean(matsubara, "matsubara")
        key = (delta, time_1, time_2, shape, epsrel, subdiv_limit, matsubara)
        if key not in self._cache:
            self._cache[key] = complex(
                self._region_integral(delta, time_1, time_2, shape, epsrel, subdiv_limit, matsubara)
            )
        return self._cache[key]

    def _region_integral(
        self, delta, time_1, time_2, shape, epsrel, subdiv_limit, matsubara
    ) -> complex:
        """The integral of checked arguments: in imaginary time, or an infinite
        rectangle as its lower triangle and the tail beyond, or a finite region."""
        if matsubara:
            return self._matsubara_region_integral(
                delta, time_1, time_2, shape, epsrel, subdiv_limit
            )
        if shape == "rectangle" and math.isinf(time_2):
            # a ramp over [time_1 - delta, time_1], then the weight delta to infinity
            return self._finite_region_integral(
                delta, time_1, None, "lower-triangle", epsrel, subdiv_limit
            ) + delta * self._tail_integral(time_1, epsrel, subdiv_limit)
        return self._finite_region_integral(delta, time_1, time_2, shape, epsrel, subdiv_limit)

    def _finite_region_integral(
        self, delta, time_1, time_2, shape, epsrel, subdiv_limit
    ) -> complex:
        """The real-time integral over a finite region (a subclass gives it)."""
        raise NotImplementedError

    def _matsubara_region_integral(
        self, delta, time_1, time_2, shape, epsrel, subdiv_limit
    ) -> complex:
        """The imaginary-time integral over a region (a subclass gives it)."""
        raise NotImplementedError

    def _tail_integral(self, time: float, epsrel: float, subdiv_limit: int) -> complex:
        """int_time^inf C(tau) dtau (a subclass gives it)."""
        raise NotImplementedError

    def max_correlation_time_estimate(self, tolerance: float = 1e-3) -> float:
        """Smallest time tau_c with |C(tau)| <= tolerance * |C(0)| from tau_c on.

        Found on a geometric grid of times; used to guess a memory cut.
        """
        c0 = abs(complex(self.correlation(0.0)))
        if c0 == 0.0:
            return 0.0
        taus = default_np.geomspace(1e-3, 1e4, 161) * self.time_scale()
        values = default_np.abs(default_np.asarray(self.correlation(taus))) / c0
        above = default_np.nonzero(values > tolerance)[0]
        if len(above) == 0:
            return float(taus[0])
        index = min(above[-1] + 1, len(taus) - 1)
        return float(taus[index])

    def time_scale(self) -> float:
        """The time on which C(tau) varies (the bath's 1 / cutoff; 1 for correlations
        given as a function): the unit of the time grids that estimate a correlation
        time or a time step."""
        return 1.0


class CustomCorrelations(BaseCorrelations):
    """Correlations given directly by a function C(tau), tau >= 0.

    ``correlation_function`` maps a float tau >= 0 to a complex number;
    C(-tau) = C(tau)^* is used for negative times.
    """

    def __init__(
        self,
        correlation_function: Callable[[float], complex],
        name: str | None = None,
        description: str | None = None,
    ):
        if not callable(correlation_function):
            raise TypeError("correlation_function must be a callable tau -> complex")
        self.correlation_function = correlation_function
        self._scalar(0.0)
        super().__init__(name, description)

    def _scalar(self, tau: float) -> complex:
        """C(tau) for one float tau (C(-tau) = C(tau)^*), checked finite."""
        label = f"correlation_function({abs(tau)!r})"
        value = guards.complex_value(guards.call(self.correlation_function, label, abs(tau)), label)
        return value if tau >= 0 else value.conjugate()

    def correlation(
        self,
        tau,
        epsrel=config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit=config.DEFAULT_SUBDIV_LIMIT,
        matsubara=False,
    ):
        """C(tau) for a scalar or array of times (``epsrel``, ``subdiv_limit`` unused)."""
        if matsubara:
            raise ValueError(
                "CustomCorrelations has no imaginary-time correlation "
                "(matsubara=True needs a spectral density)"
            )
        taus = default_np.asarray(tau, dtype=float)
        values = default_np.array([self._scalar(t) for t in taus.reshape(-1)], dtype=complex)
        return values.reshape(taus.shape) if taus.ndim else complex(values[0])

    def _tail_integral(self, time: float, epsrel: float, subdiv_limit: int) -> complex:
        """int_time^inf C(tau) dtau."""
        parts = [
            scipy.integrate.quad(
                lambda t, part=part: self._scalar(t).real if part == 0 else self._scalar(t).imag,
                time,
                math.inf,
                epsrel=epsrel,
                limit=subdiv_limit,
            )[0]
            for part in (0, 1)
        ]
        return complex(parts[0], parts[1])

    def _matsubara_region_integral(self, delta, time_1, time_2, shape, epsrel, subdiv_limit):
        raise ValueError(
            "CustomCorrelations has no imaginary-time correlation "
            "(matsubara=True needs a spectral density)"
        )

    def _finite_region_integral(self, delta, time_1, time_2, shape, epsrel, subdiv_limit):
        total = 0.0j
        for tau_a, tau_b, w_a, w_b in weight_segments(delta, time_1, time_2, shape):
            if tau_b <= tau_a:
                continue
            # split at tau = 0, where C(tau) may have a kink
            cuts = [tau_a] + ([0.0] if tau_a < 0.0 < tau_b else []) + [tau_b]
            for a, b in zip(cuts[:-1], cuts[1:]):

                def weight(t, a=tau_a, b=tau_b, wa=w_a, wb=w_b):
                    return wa + (wb - wa) * (t - a) / (b - a)

                for part in (0, 1):

                    def integrand(t, part=part, weight=weight):
                        value = weight(t) * self._scalar(t)
                        return value.real if part == 0 else value.imag

                    result, _ = scipy.integrate.quad(
                        integrand, a, b, epsrel=epsrel, limit=subdiv_limit
                    )
                    total += result if part == 0 else 1j * result
        return total


class CustomSD(BaseCorrelations):
    """Correlations of a bath with spectral density J(w) = j_function(w) X(w).

    Convention (docs/index.md "Conventions"): for H = H_S + S sum_k (g_k b_k + g_k^* b_k^dag)
    + sum_k w_k b_k^dag b_k,

        J(w) = sum_k |g_k|^2 delta(w - w_k),
        C(tau) = int_0^inf J(w) [coth(w / 2T) cos(w tau) - i sin(w tau)] dw,

    with no factor pi or 2 pi in either. Other codes differ: QuTiP's HEOM
    documentation writes J_QuTiP(w) = pi sum_k g_k^2 delta(w - w_k) for the
    same coupling S sum_k g_k (b_k + b_k^dag), so J = J_QuTiP / pi (and
    codes with 2 pi sum_k |g_k|^2 delta(w - w_k) need J = J_them / (2 pi)).

    Worked conversion, QuTiP's Drude-Lorentz J_QuTiP(w) = 2 lambda gamma w /
    (gamma^2 + w^2) (reorganisation energy lambda, width gamma)::

        lam, gamma = 0.25, 1.0
        sd = CustomSD(lambda w: 2 * lam * gamma * w / (np.pi * (gamma**2 + w**2)),
                      cutoff=50 * gamma, cutoff_type="exponential", temperature=1.0)

    Check: int_0^inf J(w) / w dw = (2 lambda gamma / pi) (pi / 2 gamma) = lambda,
    the same reorganisation energy as QuTiP's (1 / pi) int J_QuTiP(w) / w dw.
    Passing QuTiP's J unchanged makes the coupling pi times too strong. The
    cutoff X must be far above gamma, since J falls only as 1/w: at wc = 50 gamma
    the reorganisation energy keeps 98.7 % of lambda with a 'hard' cutoff
    (1 - (2 / pi) arctan(wc / gamma) is lost), 97.8 % with a 'gaussian' and
    94.5 % with an 'exponential' one.

    Parameters
    ----------
    j_function : callable w -> J(w) without cutoff, w > 0, in the convention
        above (units of energy: J(w) dw is a squared coupling).
    cutoff : cutoff frequency wc > 0.
    cutoff_type : ``'exponential'`` (X = exp(-w/wc)), ``'gaussian'``
        (exp(-(w/wc)^2)) or ``'hard'`` (Theta(wc - w)).
    temperature : T >= 0 (k_B = 1).
    """

    def __init__(
        self,
        j_function: Callable[[Any], Any],
        cutoff: float,
        cutoff_type: str = "exponential",
        temperature: float = 0.0,
        name: str | None = None,
        description: str | None = None,
    ):
        if not callable(j_function):
            raise TypeError("j_function must be a callable w -> J(w)")
        self.cutoff = check.positive_number(cutoff, "cutoff")
        self.cutoff_type = check.choice(cutoff_type, CUTOFF_TYPES, "cutoff_type")
        self.temperature = check.non_negative_number(temperature, "temperature")
        super().__init__(name, description)
        self.j_function = j_function
        self._upper_limit = _UPPER_LIMIT_IN_CUTOFFS[self.cutoff_type] * self.cutoff

    def time_scale(self) -> float:
        """1 / cutoff."""
        return 1.0 / self.cutoff

    def _cutoff_function(self, omega):
        x = default_np.asarray(omega, dtype=float) / self.cutoff
        if self.cutoff_type == "exponential":
            return default_np.exp(-x)
        if self.cutoff_type == "gaussian":
            return default_np.exp(-(x**2))
        return default_np.where(x <= 1.0, 1.0, 0.0)

    def spectral_density(self, omega: Any) -> Any:
        """J(w) for a scalar or array of frequencies (0 for w <= 0)."""
        omega_array = default_np.asarray(omega, dtype=float)
        positive = default_np.where(omega_array > 0, omega_array, 1.0)
        raw = guards.call(self.j_function, "j_function(w)", positive)
        values = guards.real_array(raw, "j_function({})", positive, non_negative=True)
        values = values * self._cutoff_function(positive)
        values = default_np.where(omega_array > 0, values, 0.0)
        return values if values.ndim else float(values)

    def _spectral_density_scalar(self, omega: float) -> float:
        """J(w) for one float w: the quadratures call it per frequency."""
        if omega <= 0.0:
            return 0.0
        x = omega / self.cutoff
        if self.cutoff_type == "exponential":
            cutoff = math.exp(-x)
        elif self.cutoff_type == "gaussian":
            cutoff = math.exp(-x * x)
        else:
            cutoff = 1.0 if x <= 1.0 else 0.0
        return float(self._j_scalar(omega)) * cutoff

    def _j_scalar(self, omega: float) -> float:
        """j_function(w) for one float w, checked real, finite and >= 0."""
        label = f"j_function({omega!r})"
        return guards.real_value(
            guards.call(self.j_function, label, omega), label, non_negative=True
        )

    def _coth_scalar(self, omega: float) -> float:
        """coth(w / 2T) for one float w > 0; 1 at T = 0."""
        if self.temperature == 0.0:
            return 1.0
        return 1.0 / math.tanh(max(omega / (2.0 * self.temperature), 1e-300))

    def _quad(self, function, epsrel, subdiv_limit, weight=None, wvar=None) -> float:
        """int_0^upper function(w) dw, optionally with a cos/sin(wvar * w) weight."""
        breakpoints = [0.0, min(self.cutoff, self._upper_limit), self._upper_limit]
        total = 0.0
        for a, b in zip(breakpoints[:-1], breakpoints[1:]):
            if b <= a:
                continue
            if weight is None:
                value, _ = scipy.integrate.quad(
                    function, a, b, epsrel=epsrel, epsabs=0.0, limit=subdiv_limit
                )
            else:
                value, _ = scipy.integrate.quad(
                    function,
                    a,
                    b,
                    weight=weight,
                    wvar=wvar,
                    epsrel=epsrel,
                    epsabs=0.0,
                    limit=subdiv_limit,
                )
            total += value
        return total

    def _oscillating_integral(
        self, amplitude_cos, amplitude_sin, centre, epsrel, subdiv_limit
    ) -> float:
        """int [amplitude_cos(w) cos(w c) + amplitude_sin(w) sin(w c)] dw."""
        if abs(centre) * self._upper_limit < 20.0:

            def integrand(w):
                return amplitude_cos(w) * math.cos(w * centre) + amplitude_sin(w) * math.sin(
                    w * centre
                )

            return self._quad(integrand, epsrel, subdiv_limit)
        return self._quad(amplitude_cos, epsrel, subdiv_limit, "cos", centre) + self._quad(
            amplitude_sin, epsrel, subdiv_limit, "sin", centre
        )

    def correlation(
        self,
        tau,
        epsrel=config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit=config.DEFAULT_SUBDIV_LIMIT,
        matsubara=False,
    ):
        """C(tau) for a scalar or an array of real times (complex); ``matsubara=True``:
        :meth:`matsubara_correlation` (real)."""
        if matsubara:
            return self.matsubara_correlation(tau, epsrel, subdiv_limit)
        taus = default_np.asarray(tau, dtype=float)
        values = []
        for t in taus.reshape(-1):
            real = self._oscillating_integral(
                lambda w: self._spectral_density_scalar(w) * self._coth_scalar(w),
                lambda w: 0.0,
                float(t),
                epsrel,
                subdiv_limit,
            )
            imag = -self._oscillating_integral(
                lambda w: 0.0, self._spectral_density_scalar, float(t), epsrel, subdiv_limit
            )
            values.append(complex(real, imag))
        values = default_np.array(values, dtype=complex)
        return values.reshape(taus.shape) if taus.ndim else complex(values[0])

    def matsubara_correlation(
        self,
        tau: Any,
        epsrel=config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit=config.DEFAULT_SUBDIV_LIMIT,
    ) -> Any:
        """Imaginary-time correlation C_M(tau), 0 <= tau <= 1/T (real)."""
        self._check_thermal()
        taus = default_np.asarray(tau, dtype=float)
        values = default_np.array(
            [
                self._quad(lambda w, t=t: float(self._matsubara_kernel(w, t)), epsrel, subdiv_limit)
                for t in taus.reshape(-1)
            ]
        )
        return values.reshape(taus.shape) if taus.ndim else float(values[0])

    def _check_thermal(self) -> None:
        if self.temperature == 0.0:
            raise ValueError("imaginary-time (matsubara) correlations need temperature > 0")

    def _matsubara_kernel(self, omega, tau):
        """J(w) cosh(w (beta/2 - tau)) / sinh(w beta / 2), in an overflow-free form."""
        beta = 1.0 / self.temperature
        omega = default_np.asarray(omega, dtype=float)
        tau = default_np.asarray(tau, dtype=float)
        numerator = default_np.exp(-omega * tau) + default_np.exp(-omega * (beta - tau))
        denominator = -default_np.expm1(-omega * beta)
        safe = default_np.where(denominator > 0, denominator, 1.0)
        return self.spectral_density(omega) * numerator / safe

    def _zero_frequency_limit(self) -> float:
        """lim_{w -> 0+} J(w) coth(w / 2T), or ValueError where it diverges."""

        def f(w):
            return self._spectral_density_scalar(w) * self._coth_scalar(w)

        values = [f(self.cutoff * 1e-7), f(self.cutoff * 1e-8)]
        # a regular f changes by ~1e-7 of its scale between the two; w^(zeta-1) much more
        scale = max(abs(values[0]), abs(f(self.cutoff)))
        if not all(math.isfinite(v) for v in values) or abs(values[0] - values[1]) > 1e-5 * scale:
            raise ValueError(
                "the integral of C(tau) to infinite times diverges for this bath "
                "(J(w) coth(w / 2T) has no finite limit at w -> 0, e.g. a sub-Ohmic "
                "bath at T > 0): use a finite add_correlation_time"
            )
        return values[1] - (values[0] - values[1]) / 9.0  # linear extrapolation to w = 0

    def _tail_integral(self, time: float, epsrel: float, subdiv_limit: int) -> complex:
        """int_time^inf C(tau) dtau for time > 0:

        Re = (pi/2) f(0+) - int f(w) sin(w t) / w dw,  Im = -int J(w) cos(w t) / w dw,

        f = J coth(w/2T); the 1/w of f(0+) is integrated in closed form
        (int_0^inf exp(-w/wc) sin(w t) / w dw = arctan(wc t)).
        """
        f0 = self._zero_frequency_limit()
        j = self._spectral_density_scalar
        wc = self.cutoff

        def regular(w):
            if w == 0.0:
                return 0.0
            return (j(w) * self._coth_scalar(w) - f0 * math.exp(-w / wc)) / w

        real = f0 * math.atan2(1.0, wc * time) - self._oscillating_integral(
            lambda w: 0.0, regular, time, epsrel, subdiv_limit
        )
        imag = -self._oscillating_integral(
            lambda w: j(w) / w if w > 0.0 else 0.0, lambda w: 0.0, time, epsrel, subdiv_limit
        )
        return complex(real, imag)

    def _finite_region_integral(self, delta, time_1, time_2, shape, epsrel, subdiv_limit):
        # int_region e^{i w (t'-t'')} = e^{i w c} g(w), with g slowly varying
        if shape in ("square", "rectangle"):
            length = delta if shape == "square" else time_2 - time_1
            centre = time_1 + 0.5 * length - 0.5 * delta

            def g_real(w):
                return length * delta * _sinc(0.5 * w * length) * _sinc(0.5 * w * delta)

            def g_imag(w):
                return 0.0
        else:
            centre = time_1
            sign = 1.0 if shape == "upper-triangle" else -1.0

            def g_real(w):
                return delta**2 * _one_minus_cos_over_square(w * delta)

            def g_imag(w):
                return sign * w * delta**3 * _x_minus_sin_over_cube(w * delta)

        j = self._spectral_density_scalar

        def j_coth(w):
            return j(w) * self._coth_scalar(w)

        # Re C part: coth * Re(e^{iwc} g) = coth (cos g_r - sin g_i)
        real = self._oscillating_integral(
            lambda w: j_coth(w) * g_real(w),
            lambda w: -j_coth(w) * g_imag(w),
            centre,
            epsrel,
            subdiv_limit,
        )
        # Im C part: -Im(e^{iwc} g) = -(sin g_r + cos g_i)
        imag = -self._oscillating_integral(
            lambda w: j(w) * g_imag(w), lambda w: j(w) * g_real(w), centre, epsrel, subdiv_limit
        )
        return complex(real, imag)

    def _matsubara_region_integral(self, delta, time_1, time_2, shape, epsrel, subdiv_limit):
        self._check_thermal()
        segments = []
        for tau_a, tau_b, w_a, w_b in weight_segments(delta, time_1, time_2, shape):
            if tau_b <= tau_a:
                continue
            if tau_a < 0.0 < tau_b:  # C_M(|tau|) has a kink at tau = 0: split there
                w_0 = w_a + (w_b - w_a) * (0.0 - tau_a) / (tau_b - tau_a)
                segments += [(tau_a, 0.0, w_a, w_0), (0.0, tau_b, w_0, w_b)]
            else:
                segments.append((tau_a, tau_b, w_a, w_b))
        nodes, weights = [], []
        for tau_a, tau_b, w_a, w_b in segments:
            half = 0.5 * (tau_b - tau_a)
            taus = tau_a + half * (_GAUSS_NODES + 1.0)
            region_weight = w_a + (w_b - w_a) * (taus - tau_a) / (tau_b - tau_a)
            nodes.append(taus)
            weights.append(half * _GAUSS_WEIGHTS * region_weight)
        nodes = default_np.concatenate(nodes)
        weights = default_np.concatenate(weights)

        # C_M is even in tau (beta-periodic and symmetric about beta/2): regions
        # that reach tau < 0 use C_M(|tau|)
        nodes = default_np.abs(nodes)

        def integrand(w):
            return float(default_np.sum(weights * self._matsubara_kernel(w, nodes)))

        return complex(self._quad(integrand, epsrel, subdiv_limit), 0.0)

    def imaginary_time_integrals(
        self,
        n_steps: int,
        epsrel: float = config.DEFAULT_INTEGRAL_EPSREL,
        subdiv_limit: int = config.DEFAULT_SUBDIV_LIMIT,
    ) -> default_np.ndarray:
        """eta_lag, lag = 0 .. n_steps // 2 (real array): the integrals of C_M over the
        triangle (lag 0, ``'upper-triangle'``) and the squares (``'square'`` at lag delta)
        of the imaginary-time grid delta = 1 / (T n_steps). Here one integral after the
        other; a bath in closed form may do them at once."""
        self._check_thermal()
        n_steps = check.positive_integer(n_steps, "n_steps", minimum=2)
        delta = 1.0 / (self.temperature * n_steps)
        values = [
            self.correlation_2d_integral(
                delta,
                lag * delta,
                shape="upper-triangle" if lag == 0 else "square",
                epsrel=epsrel,
                subdiv_limit=subdiv_limit,
                matsubara=True,
            )
            for lag in range(n_steps // 2 + 1)
        ]
        return default_np.real(default_np.array(values, dtype=complex))

    def __str__(self) -> str:
        return (
            f"{type(self).__name__}(cutoff={self.cutoff}, cutoff_type="
            f"{self.cutoff_type!r}, temperature={self.temperature})"
        )


class PowerLawSD(CustomSD):
    """Power-law spectral density J(w) = 2 alpha w^zeta wc^(1 - zeta) X(w).

    J(w) = sum_k |g_k|^2 delta(w - w_k) for the coupling S sum_k (g_k b_k +
    g_k^* b_k^dag), and C(tau) = int_0^inf J(w) [coth(w / 2T) cos(w tau)
    - i sin(w tau)] dw (docs/index.md "Conventions"; no factor pi). A spectral density from a
    code whose J carries a factor pi, such as QuTiP's (J_QuTiP = pi sum_k
    g_k^2 delta(w - w_k)), is divided by pi first: QuTiP's Ohmic
    J_QuTiP = a w^zeta wc^(1 - zeta) X(w) is ``PowerLawSD(alpha=a / (2 pi), ...)``.
    :class:`CustomSD` works through the Drude-Lorentz case.

    Parameters
    ----------
    alpha : dimensionless coupling >= 0.
    zeta : exponent > 0 (1: Ohmic, < 1 sub-, > 1 super-Ohmic).
    cutoff, cutoff_type, temperature : as for :class:`CustomSD`.
    """

    def __init__(
        self,
        alpha: float,
        zeta: float,
        cutoff: float,
        cutoff_type: str = "exponential",
        temperature: float = 0.0,
        name: str | None = None,
        description: str | None = None,
    ):
        self.alpha = check.non_negative_number(alpha, "alpha")
        self.zeta = check.positive_number(zeta, "zeta")
        cutoff_value = check.positive_number(cutoff, "cutoff")

        def j_function(omega, alpha=self.alpha, zeta=self.zeta, wc=cutoff_value):
            # 2 alpha w^zeta wc^(1 - zeta), written so that no power overflows
            return 2.0 * alpha * wc * default_np.power(default_np.asarray(omega) / wc, zeta)

        super().__init__(j_function, cutoff, cutoff_type, temperature, name, description)

    def _j_scalar(self, omega: float) -> float:
        return 2.0 * self.alpha * self.cutoff * (omega / self.cutoff) ** self.zeta

    def __str__(self) -> str:
        return (
            f"PowerLawSD(alpha={self.alpha}, zeta={self.zeta}, cutoff={self.cutoff}, "
            f"cutoff_type={self.cutoff_type!r}, temperature={self.temperature})"
        )
