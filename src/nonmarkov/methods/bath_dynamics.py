"""Bath dynamics: occupations and two-time correlations of bath modes, from the system.

A Gaussian bath linearly coupled through S (H_I = S sum_k g_k (b_k + b_k^dag), g_k
real) is driven by the system: in the interaction picture of the bath,

    b~_k(t) = b_k - i g_k int_0^t e^{i w_k s} S(s) ds ,   b_k(t) = e^{-i w_k t} b~_k(t),

with S(s) the Heisenberg coupling operator. For a thermal initial bath, the
moments of b_k that involve b_k itself reduce by the KMS relations
<b^dag X> = n <[X, b^dag]>, <X b> = -n <[X, b]> ... and the equal-time identity
[S(s), b_k(s)] = 0 to double integrals of the system correlations
F(s, u) = <S(s) S(u)> (all orderings) and D(s, u) = <[S(s), S(u)]> (u <= s), n the
Bose occupation. For two modes (w_1, g_1), (w_2, g_2), sigma = +1 for b^dag and
-1 for b (OQuPy's ``dagg`` 1 / 0), and Y = b or b^dag:

    <Y~_2(t_2) Y~_1(t_1)> = thermal term (one mode: n for b^dag b, n + 1 for b b^dag)
        + c_left(sigma_2) s g_1 g_2 T[D](-sigma_1 w_1, -sigma_2 w_2; t_1)
        + c_right(sigma_1) s g_1 g_2 T[D](-sigma_2 w_2, -sigma_1 w_1; t_2)
        - s g_1 g_2 R[F](-sigma_2 w_2, -sigma_1 w_1; t_2, t_1),

s = sigma_1 sigma_2, c_left(+1) = n_2, c_left(-1) = -(n_2 + 1), c_right(+1) = n_1 + 1,
c_right(-1) = -n_1, with the triangle T[G](a, b; t) = int_0^t ds int_0^s du
e^{i(a s + b u)} G(s, u) and the rectangle R[G](a, b; t, t') = int_0^t ds int_0^t' du
e^{i(a s + b u)} G(s, u). The occupation change is the case b^dag b, t_1 = t_2:
2 g^2 int int_{u<s} [cos(w (s-u)) Re C + (2 n + 1) sin(w (s-u)) Im C], C(s, u) = <S(s) S(u)>.

A continuum is probed through one mode per frequency band: g^2 = J(w) dw.

The system correlations come from the process tensor on its grid t_j = j dt; the
double integrals take the exponentials exactly over each grid cell and the
correlation as the mean of the cell's corners (exact for a constant correlation,
second order in dt otherwise).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as default_np

from .. import validation
from ..model.bath import Bath
from ..model.correlations import CustomSD
from ..model.system import BaseSystem
from ..options import EngineOptions
from .system_correlations import compute_correlations

_TRIANGLE_NODES, _TRIANGLE_WEIGHTS = default_np.polynomial.legendre.leggauss(16)
#: a process tensor's bath must match the bath given here in these spectral-density values
_MATCHED_KEYS = ("alpha", "zeta", "cutoff", "cutoff_type", "temperature") + (
    "reorganisation_energy",
    "frequency",
    "damping",
    "tail_width",
    "scale",
)
DAGGER_PAIRS = ((1, 0), (0, 1), (1, 1), (0, 0))


def _bose(frequency: float, temperature: float) -> float:
    """n(w) = 1 / (exp(w / T) - 1); 0 at T = 0."""
    if temperature == 0.0:
        return 0.0
    return 1.0 / math.expm1(frequency / temperature)


def _interval_integrals(a: float, dt: float, cells: int) -> default_np.ndarray:
    """int_{t_j}^{t_j + dt} e^{i a s} ds for the cells j = 0..cells-1, (cells,)."""
    starts = dt * default_np.arange(cells)
    one_cell = dt * default_np.exp(0.5j * a * dt) * default_np.sinc(a * dt / (2.0 * math.pi))
    return default_np.exp(1j * a * starts) * one_cell


def _triangle_cell(a: float, b: float, dt: float) -> complex:
    """int_0^dt ds int_0^s du e^{i (a s + b u)} (Gauss-Legendre, collapsed triangle)."""
    x = 0.5 * dt * (_TRIANGLE_NODES + 1.0)  # s
    total = 0.0j
    for s, ws in zip(x, 0.5 * dt * _TRIANGLE_WEIGHTS):
        u = 0.5 * s * (_TRIANGLE_NODES + 1.0)
        wu = 0.5 * s * _TRIANGLE_WEIGHTS
        total += (
            ws
            * default_np.exp(1j * a * s)
            * complex(default_np.sum(wu * default_np.exp(1j * b * u)))
        )
    return total


def _corner_means(values: default_np.ndarray) -> default_np.ndarray:
    """Mean of the four corners of each grid cell: (n+1, n+1) -> (n, n)."""
    return 0.25 * (values[:-1, :-1] + values[1:, :-1] + values[:-1, 1:] + values[1:, 1:])


def _rectangle_sums(
    function: default_np.ndarray, a: float, b: float, dt: float
) -> default_np.ndarray:
    """R[k2, k1] = int_0^{t_k2} ds int_0^{t_k1} du e^{i(a s + b u)} G(s, u) for all
    grid indices, (n+1, n+1), from G on the grid (n+1, n+1) [s index, u index]."""
    cells = function.shape[0] - 1
    weights = default_np.outer(_interval_integrals(a, dt, cells), _interval_integrals(b, dt, cells))
    sums = default_np.zeros((cells + 1, cells + 1), dtype=complex)
    sums[1:, 1:] = default_np.cumsum(default_np.cumsum(weights * _corner_means(function), 0), 1)
    return sums


def _triangle_sums(
    function: default_np.ndarray, a: float, b: float, dt: float
) -> default_np.ndarray:
    """T[k] = int_0^{t_k} ds int_0^s du e^{i(a s + b u)} G(s, u), (n+1,), from G on the
    grid (n+1, n+1) [s index, u index], used where s >= u."""
    cells = function.shape[0] - 1
    weights = default_np.outer(_interval_integrals(a, dt, cells), _interval_integrals(b, dt, cells))
    squares = default_np.tril(weights * _corner_means(function), -1)
    j = default_np.arange(cells)
    diagonal = (function[j, j] + function[j + 1, j] + function[j + 1, j + 1]) / 3.0
    diagonal = diagonal * default_np.exp(1j * (a + b) * dt * j) * _triangle_cell(a, b, dt)
    per_row = squares.sum(axis=1) + diagonal  # s in cell j: every u <= s
    sums = default_np.zeros(cells + 1, dtype=complex)
    sums[1:] = default_np.cumsum(per_row)
    return sums


class TwoTimeBathCorrelations:
    """Occupations and two-time correlations of the bath modes, computed from the
    system correlations <S(t') S(t'')> on a process tensor's grid.

    Parameters
    ----------
    system : System or TimeDependentSystem (dimension d).
    bath : the Bath the process tensor was made for, with a spectral density
        (CustomSD or PowerLawSD).
    process_tensor : a process tensor of that bath (time step dt, N steps).
    initial_state : (d, d) density matrix at t = 0.
    system_correlations : optional (M+1, M+1) array of earlier results
        (``system_correlations`` of another instance for the same input).
    name, description : optional text.
    options : :class:`~nonmarkov.options.EngineOptions` for the correlations.
    """

    def __init__(
        self,
        system: BaseSystem,
        bath: Bath,
        process_tensor: Any,
        initial_state: Any = None,
        system_correlations: Any = None,
        name: str | None = None,
        description: str | None = None,
        *,
        options: EngineOptions | None = None,
    ):
        if not isinstance(system, BaseSystem):
            raise TypeError(
                f"system must be a System or TimeDependentSystem; got {type(system).__name__}"
            )
        if not isinstance(bath, Bath):
            raise TypeError(f"bath must be a Bath; got {type(bath).__name__}")
        spectral_density = bath.correlations
        if not isinstance(spectral_density, CustomSD):
            raise TypeError(
                "bath dynamics needs the bath's spectral density (CustomSD or PowerLawSD) "
                f"to resolve modes by frequency; got {type(spectral_density).__name__}"
            )
        self._spectral_density = spectral_density
        _check_process_tensor(process_tensor, bath, system.dimension)
        if initial_state is None:
            raise ValueError("initial_state is required: the (d, d) system state at t = 0")
        self._initial_state = validation.density_matrix(
            initial_state, "initial_state", system.dimension
        )
        self._system = system
        self._bath = bath
        self._process_tensor = process_tensor
        self._dt = float(process_tensor.time_step())
        self._num_steps = len(process_tensor)
        self._options = options
        self.name = "Unnamed TwoTimeBathCorrelations" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._correlations = default_np.zeros((0, 0), dtype=complex)
        if system_correlations is not None:
            given = default_np.asarray(system_correlations, dtype=complex)
            if (
                given.ndim != 2
                or given.shape[0] != given.shape[1]
                or given.shape[0] > self._num_steps + 1
            ):
                raise ValueError(
                    "system_correlations must be a square (M+1, M+1) array with M at most "
                    f"the process tensor's {self._num_steps} steps; got shape {given.shape}"
                )
            self._correlations = given.copy()

    @property
    def system(self) -> BaseSystem:
        """The system."""
        return self._system

    @property
    def bath(self) -> Bath:
        """The bath."""
        return self._bath

    @property
    def initial_state(self) -> default_np.ndarray:
        """The initial system state (d, d)."""
        return self._initial_state.copy()

    @property
    def system_correlations(self) -> default_np.ndarray:
        """C[a, b] = <S(t_b) S(t_a)> for a <= b on the grid t_j = j dt, (M+1, M+1);
        NaN below the diagonal."""
        return self._correlations.copy()

    def _steps(self, time: Any, name: str) -> int:
        """The grid index of ``time`` (nearest grid point), within the process tensor."""
        time = validation.non_negative_number(time, name)
        step = int(round(time / self._dt))
        if step > self._num_steps:
            raise ValueError(
                f"{name}={time} lies beyond the process tensor's last time "
                f"{self._num_steps * self._dt} ({self._num_steps} steps of {self._dt})"
            )
        return step

    def generate_system_correlations(
        self, final_time: float, progress_type: str | None = None
    ) -> None:
        """Compute <S(t_b) S(t_a)> for all grid times t_a <= t_b <= ``final_time``
        (only the times not computed yet)."""
        last = self._steps(final_time, "final_time")
        have = self._correlations.shape[0]
        if last + 1 <= have:
            return
        coupling = self._bath.coupling_operator
        start = have
        if last == 0:
            new = default_np.array([[default_np.trace(coupling @ coupling @ self._initial_state)]])
        else:
            _, new = compute_correlations(
                self._system,
                self._process_tensor,
                coupling,
                coupling,
                slice(0, last + 1),
                slice(start, last + 1),
                initial_state=self._initial_state,
                num_steps=last,
                progress_type=progress_type,
                options=self._options,
            )
        grown = default_np.full((last + 1, last + 1), default_np.nan + 1j * default_np.nan)
        grown[:have, :have] = self._correlations
        grown[:, start:] = new
        self._correlations = grown

    def _functions(self, last: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """F[s, u] = <S(t_s) S(t_u)> (every ordering) and D[s, u] = <[S(t_s), S(t_u)]>
        (s >= u; 0 above), each (last+1, last+1)."""
        ordered = self._correlations[: last + 1, : last + 1].T  # [s, u] for s >= u
        lower = default_np.tril(default_np.ones((last + 1, last + 1), dtype=bool))
        later = default_np.where(lower, ordered, 0.0)
        function = later + default_np.where(lower, 0.0, later.T.conj())
        commutator = 2j * later.imag
        return function, commutator

    def _mode(self, frequency: Any, width: Any, name: str) -> tuple[float, float, float]:
        """(w, g, n) of the mode that stands for the band [w - dw/2, w + dw/2]."""
        w = validation.positive_number(frequency, name)
        dw = validation.positive_number(width, f"dw for {name}")
        density = float(self._spectral_density.spectral_density(w))
        if not density > 0.0:
            raise ValueError(
                f"{name}={w} lies outside the spectral density's support (J({w}) = {density}); "
                "the bath has no modes there"
            )
        return w, math.sqrt(density * dw), _bose(w, self._spectral_density.temperature)

    def _moment(
        self,
        mode_1: tuple[float, float, float],
        mode_2: tuple[float, float, float],
        steps_1: default_np.ndarray,
        steps_2: default_np.ndarray,
        dagg: tuple[int, int],
        same_mode: bool,
        change_only: bool,
    ) -> default_np.ndarray:
        """<Y~_2(t_2) Y~_1(t_1)> (interaction picture) for arrays of grid indices:
        ``mode_i`` = (frequency, coupling g_i, Bose occupation), ``steps_i`` the grid
        indices of t_i, ``dagg`` as in :meth:`correlation`."""
        (w1, g1, n1), (w2, g2, n2) = mode_1, mode_2
        sigma_2, sigma_1 = 2 * dagg[0] - 1, 2 * dagg[1] - 1
        last = int(max(default_np.max(steps_1), default_np.max(steps_2)))
        function, commutator = self._functions(last)
        dt = self._dt
        sign = sigma_1 * sigma_2 * g1 * g2
        c_left = n2 if sigma_2 == 1 else -(n2 + 1.0)
        c_right = n1 + 1.0 if sigma_1 == 1 else -n1
        left = _triangle_sums(commutator, -sigma_1 * w1, -sigma_2 * w2, dt)
        right = _triangle_sums(commutator, -sigma_2 * w2, -sigma_1 * w1, dt)
        rectangle = _rectangle_sums(function, -sigma_2 * w2, -sigma_1 * w1, dt)
        value = (
            c_left * sign * left[steps_1]
            + c_right * sign * right[steps_2]
            - sign * rectangle[steps_2, steps_1]
        )
        if same_mode and not change_only:
            if dagg == (1, 0):
                value = value + n1
            elif dagg == (0, 1):
                value = value + n1 + 1.0
        return value

    def occupation(
        self,
        freq: float,
        dw: float = 1.0,
        change_only: bool = False,
        progress_type: str | None = None,
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """Occupation <b^dag b>(t) of the mode of frequency ``freq`` with coupling
        g^2 = J(freq) ``dw`` (the band of width dw around freq, as one mode), on the
        process tensor's grid t_j = j dt, j = 0..N. ``change_only``: without the
        initial thermal occupation n(freq). Returns (times (N+1,), occupations (N+1,))."""
        change_only = validation.boolean(change_only, "change_only")
        mode = self._mode(freq, dw, "freq")
        self.generate_system_correlations(self._num_steps * self._dt, progress_type)
        steps = default_np.arange(self._num_steps + 1)
        value = self._moment(mode, mode, steps, steps, (1, 0), True, change_only)
        return self._dt * steps, default_np.real(value)

    def correlation(
        self,
        freq_1: float,
        time_1: float,
        freq_2: float | None = None,
        time_2: float | None = None,
        dw: tuple[float, float] = (1.0, 1.0),
        dagg: tuple[int, int] = (1, 0),
        interaction_picture: bool = False,
        change_only: bool = False,
        progress_type: str | None = None,
    ) -> complex:
        """<a_2(time_2) a_1(time_1)> of the modes at ``freq_1`` and ``freq_2`` (default:
        the same mode), a_2 = b^dag if dagg[0] else b, a_1 = b^dag if dagg[1] else b;
        couplings g_i^2 = J(freq_i) dw[i]. ``interaction_picture``: without the free
        phases e^{+-i w t}; ``change_only``: without the initial thermal part."""
        interaction_picture = validation.boolean(interaction_picture, "interaction_picture")
        change_only = validation.boolean(change_only, "change_only")
        if tuple(dagg) not in DAGGER_PAIRS:
            raise ValueError(f"dagg must be one of {list(DAGGER_PAIRS)}; got {dagg!r}")
        dagg = (int(dagg[0]), int(dagg[1]))
        if isinstance(dw, (int, float)) or len(dw) != 2:
            raise TypeError(f"dw must be a pair (dw_1, dw_2) of band widths; got {dw!r}")
        freq_2 = freq_1 if freq_2 is None else freq_2
        time_2 = time_1 if time_2 is None else time_2
        mode_1 = self._mode(freq_1, dw[0], "freq_1")
        mode_2 = self._mode(freq_2, dw[1], "freq_2")
        step_1, step_2 = self._steps(time_1, "time_1"), self._steps(time_2, "time_2")
        self.generate_system_correlations(max(step_1, step_2) * self._dt, progress_type)
        same_mode = mode_1[0] == mode_2[0] and dw[0] == dw[1]
        value = complex(
            self._moment(
                mode_1,
                mode_2,
                default_np.array(step_1),
                default_np.array(step_2),
                dagg,
                same_mode,
                change_only,
            )
        )
        if not interaction_picture:
            sigma_2, sigma_1 = 2 * dagg[0] - 1, 2 * dagg[1] - 1
            value *= complex(
                default_np.exp(
                    1j * (sigma_2 * mode_2[0] * step_2 + sigma_1 * mode_1[0] * step_1) * self._dt
                )
            )
        return value


def _check_process_tensor(process_tensor: Any, bath: Bath, dimension: int) -> None:
    """Raise unless ``process_tensor`` has a grid and was made for ``bath``."""
    if not hasattr(process_tensor, "get_step_tensor") or not hasattr(process_tensor, "time_step"):
        raise TypeError(
            f"process_tensor must be a process tensor; got {type(process_tensor).__name__}"
        )
    if process_tensor.dimension != dimension or bath.dimension != dimension:
        raise ValueError(
            f"dimensions differ: system {dimension}, bath {bath.dimension}, "
            f"process tensor {process_tensor.dimension}"
        )
    if process_tensor.num_steps is None:
        raise ValueError("bath dynamics needs a process tensor of finite length (its grid)")
    made_for = getattr(process_tensor, "metadata", {}).get("bath")
    if not made_for:
        return
    coupling = default_np.asarray(made_for["coupling_operator_real"]) + 1j * default_np.asarray(
        made_for["coupling_operator_imag"]
    )
    if coupling.shape != bath.coupling_operator.shape or not default_np.allclose(
        coupling, bath.coupling_operator, rtol=1e-12, atol=1e-14
    ):
        raise ValueError("the process tensor was made for a bath with another coupling operator")
    described = made_for.get("correlations", {})
    for key in _MATCHED_KEYS:
        if key in described and getattr(bath.correlations, key, None) != described[key]:
            raise ValueError(
                f"the process tensor was made for a bath with {key}={described[key]!r}, "
                f"not {getattr(bath.correlations, key, None)!r}"
            )
