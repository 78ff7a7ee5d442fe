"""Richardson extrapolation in the time step, with the observed order checked.

A result computed with time step h has an error that, for a method of order p,
falls as c h^p + O(h^(p+1)). From results at h and h/r (r the refinement
ratio, usually 2) the leading term cancels in

    f_extrapolated = f(h/r) + (f(h/r) - f(h)) / (r^p - 1),

and (f(h) - f(h/r)) r^p / (r^p - 1) estimates the error of f(h) itself. This is
only right if the error really falls at order p; from three results at h, h/r,
h/r^2 the observed order is

    p_observed = log(||f(h) - f(h/r)|| / ||f(h/r) - f(h/r^2)||) / log(r),

and :func:`richardson` extrapolates only if it lies within ``order_tolerance``
of the order claimed for the method (TEMPO's symmetric splitting of system and
bath propagators: :data:`SPLITTING_ORDER` = 2). The outcome of that check is
part of the result (:class:`Extrapolation`).

With three levels that pass the check, the two extrapolations (from h, h/r and
from h/r, h/r^2) still differ by the next order q of the error; a second
(Romberg) stage ``next_order=q`` cancels it too,

    f_twice = e(h/r, h/r^2) + (e(h/r, h/r^2) - e(h, h/r)) / (r^q - 1),

so that three runs at dt, dt/2, dt/4 give a result of order q + 1 or more. The
symmetric splitting's error is even in dt (q = 4, :data:`NEXT_ORDER`) where the
bath's discretisation adds no odd term; the second stage is not checked (that
would take a fourth level), its error estimate is the size of its correction.

The results are compared on the times of the coarsest one; every finer result
must contain those times (a run with dt/2 from the same start time does). The
inputs are :class:`~nonmarkov.Dynamics` objects (their states) or plain
``(times, values)`` pairs of arrays; everything here runs on the host (NumPy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as default_np

from .. import validation as check
from ..io.results import Dynamics

#: order in dt of the TEMPO family (symmetric splitting of system and bath propagators)
SPLITTING_ORDER = 2.0
#: the next order of the symmetric splitting (its error is even in dt): Romberg's second stage
NEXT_ORDER = 4.0
#: default largest |observed order - claimed order| that still counts as the claimed order
ORDER_TOLERANCE = 0.5
#: differences below this (max norm) are rounding: the results agree, no order is observed
NOISE_FLOOR = 1e-12
#: relative slack on the times of finer levels matching the coarsest grid (in units of its step)
_TIME_SLACK = 1e-6

#: the outcomes of the order check (``Extrapolation.order_check``)
ORDER_CHECKS = ("passed", "failed", "unchecked", "converged")


class OrderCheckError(ValueError):
    """The observed order in dt differs from the claimed one: Richardson
    extrapolation would be wrong. ``extrapolation`` holds the result with the
    finest level's values (not extrapolated) and the observed order."""

    def __init__(self, message: str, extrapolation: Extrapolation):
        super().__init__(message)
        self.extrapolation = extrapolation


@dataclass(frozen=True)
class Extrapolation:
    """Richardson extrapolation of results at time steps dt, dt/r (, dt/r^2).

    Attributes
    ----------
    times : (M,) the common times (those of the coarsest level).
    values : (M, ...) the extrapolated values, or the finest level's values
        where no extrapolation was made (``extrapolated`` False).
    finest : (M, ...) the finest level's values on the common times.
    error : (M,) estimate of the error of ``values`` per time (max over the
        trailing axes): for an extrapolation from three levels, the difference of
        the two extrapolations (from levels 0, 1 and from 1, 2), with a second
        stage (``next_order``) the size of its correction; from two levels,
        the Richardson estimate of the finest level's error (a bound for the
        extrapolated values, not a sharp estimate); without extrapolation, that of
        the finest level with the observed order where it is known.
    finest_error : (M,) estimate of the finest level's error: ||f_fine - f_coarse||
        / (r^p - 1) per time, p the claimed order (the observed one after a failed
        check, where it is positive).
    dts : the time steps of the levels, coarsest first.
    ratio : the refinement ratio r between consecutive levels.
    order : the claimed order p.
    observed_order : the order measured from three levels (None with two levels or
        when the differences are rounding, ``order_check`` 'converged').
    order_check : 'passed' (|observed - claimed| <= ``order_tolerance``),
        'failed', 'unchecked' (two levels only) or 'converged' (the finer
        differences are below ``noise_floor``: the results agree to rounding).
    extrapolated : whether ``values`` are extrapolated.
    differences : max-norm differences between consecutive levels, coarsest first.
    next_order : the order q cancelled by a second (Romberg) stage, or None (one
        stage: the values are the extrapolation from the two finest levels).
    """

    times: default_np.ndarray
    values: default_np.ndarray
    finest: default_np.ndarray
    error: default_np.ndarray
    finest_error: default_np.ndarray
    dts: tuple[float, ...]
    ratio: float
    order: float
    observed_order: float | None
    order_check: str
    extrapolated: bool
    differences: tuple[float, ...] = field(default=())
    next_order: float | None = None

    @property
    def max_error(self) -> float:
        """The largest error estimate over the times."""
        return float(default_np.max(self.error)) if self.error.size else 0.0

    def report(self) -> dict:
        """The check and the estimates as a JSON-serialisable dict (for metadata)."""
        return {
            "dts": list(self.dts),
            "ratio": self.ratio,
            "order": self.order,
            "observed_order": self.observed_order,
            "order_check": self.order_check,
            "extrapolated": self.extrapolated,
            "differences": list(self.differences),
            "next_order": self.next_order,
            "max_error": self.max_error,
        }

    def to_dynamics(self, name: str | None = None, metadata: dict | None = None) -> Dynamics:
        """The values as a :class:`~nonmarkov.Dynamics` (values must be (M, d, d)
        states), with this report under ``metadata['extrapolation']`` and the
        error estimate per time under ``metadata['extrapolation']['error']``."""
        if self.values.ndim != 3 or self.values.shape[1] != self.values.shape[2]:
            raise ValueError(
                f"to_dynamics needs states (M, d, d); the values have shape {self.values.shape}"
            )
        info = dict(metadata or {})
        report = self.report()
        report["error"] = [float(e) for e in self.error]
        info["extrapolation"] = report
        return Dynamics(
            list(self.times),
            list(self.values),
            name="extrapolated dynamics" if name is None else name,
            metadata=info,
        )


def _as_level(result: Any, index: int) -> tuple[default_np.ndarray, default_np.ndarray]:
    """(times (N,), values (N, ...)) of a Dynamics or a (times, values) pair."""
    if isinstance(result, Dynamics):
        if len(result) == 0:
            raise ValueError(f"results[{index}] is an empty Dynamics")
        return result.times, result.states
    if isinstance(result, (tuple, list)) and len(result) == 2:
        times = default_np.asarray(result[0], dtype=float)
        values = default_np.asarray(result[1])
        if times.ndim != 1 or values.ndim < 1 or values.shape[0] != times.shape[0]:
            raise ValueError(
                f"results[{index}] must be (times (N,), values (N, ...)) with the same N; got "
                f"shapes {times.shape} and {values.shape}"
            )
        if not default_np.all(default_np.isfinite(times)):
            raise ValueError(f"results[{index}]: the times must be finite")
        return times, values
    raise TypeError(
        f"results[{index}] must be a Dynamics or a (times, values) pair of arrays; got "
        f"{type(result).__name__}"
    )


def _time_step(times: default_np.ndarray, index: int) -> float:
    """The (uniform) step of ``times``."""
    if times.size < 2:
        raise ValueError(f"results[{index}] has fewer than two times: its time step is unknown")
    steps = default_np.diff(times)
    step = float(default_np.median(steps))
    if step <= 0 or default_np.max(default_np.abs(steps - step)) > 1e-6 * step:
        raise ValueError(f"results[{index}] must have uniformly increasing times")
    return step


def on_common_times(
    results: Sequence[Any], times: Any = None
) -> tuple[default_np.ndarray, list[default_np.ndarray], list[float]]:
    """The values of every result at common times.

    ``results``: Dynamics objects or (times, values) pairs, on uniform grids.
    ``times``: the common times (M,); None: those of the result with the largest
    step that lie within every result's interval. Each result must contain each
    common time (to 1e-6 of its own step).

    Returns (times (M,), [values (M, ...) per result], [time step per result]).
    """
    levels = [_as_level(result, i) for i, result in enumerate(results)]
    dts = [_time_step(t, i) for i, (t, _) in enumerate(levels)]
    if times is None:
        coarsest = int(default_np.argmax(dts))
        grid = levels[coarsest][0]
        low = max(float(t[0]) for t, _ in levels)
        high = min(float(t[-1]) for t, _ in levels)
        slack = _TIME_SLACK * dts[coarsest]
        grid = grid[(grid >= low - slack) & (grid <= high + slack)]
    else:
        grid = default_np.asarray(times, dtype=float).reshape(-1)
    if grid.size == 0:
        raise ValueError("the results have no times in common")
    sampled = []
    for i, ((t, values), dt) in enumerate(zip(levels, dts)):
        position = (grid - t[0]) / dt
        index = default_np.rint(position).astype(int)
        if (
            default_np.any(default_np.abs(position - index) > _TIME_SLACK * max(1.0, dt))
            or index.min() < 0
            or index.max() >= t.size
        ):
            raise ValueError(
                f"results[{i}] (dt={dt:g}, t = {t[0]:g}..{t[-1]:g}) does not contain every "
                "common time: the levels must share a start time and their steps must divide "
                "the coarsest one"
            )
        sampled.append(values[index])
    shapes = {v.shape[1:] for v in sampled}
    if len(shapes) != 1:
        raise ValueError(f"the results hold values of different shapes: {sorted(shapes)}")
    return grid, sampled, dts


def _per_time(difference: default_np.ndarray) -> default_np.ndarray:
    """max |.| over the trailing axes: (M, ...) -> (M,)."""
    flat = default_np.abs(difference).reshape(difference.shape[0], -1)
    return flat.max(axis=1) if flat.shape[1] else default_np.zeros(difference.shape[0])


def observed_order(
    coarse: Any, middle: Any, fine: Any, ratio: float = 2.0, noise_floor: float = NOISE_FLOOR
) -> float | None:
    """The order p with ||coarse - middle|| / ||middle - fine|| = ratio^p (max norms);
    three arrays of one shape, at steps h, h/ratio, h/ratio^2. None when the finer
    difference is below ``noise_floor`` (the results agree to rounding)."""
    coarse, middle, fine = (default_np.asarray(a) for a in (coarse, middle, fine))
    first = float(default_np.max(default_np.abs(coarse - middle), initial=0.0))
    second = float(default_np.max(default_np.abs(middle - fine), initial=0.0))
    if second <= noise_floor:
        return None
    if first <= noise_floor:
        return -math.inf
    return math.log(first / second) / math.log(ratio)


def richardson(
    results: Sequence[Any],
    *,
    order: float = SPLITTING_ORDER,
    times: Any = None,
    order_tolerance: float = ORDER_TOLERANCE,
    noise_floor: float = NOISE_FLOOR,
    on_failed_check: str = "raise",
    next_order: float | None = None,
) -> Extrapolation:
    """Richardson-extrapolate results at time steps dt, dt/r (, dt/r^2) to dt -> 0.

    Parameters
    ----------
    results : two or three results, coarsest first: :class:`~nonmarkov.Dynamics`
        objects (their states (N, d, d)) or ``(times (N,), values (N, ...))`` pairs,
        on uniform grids from a common start, each step a fixed ratio r > 1 of the
        next (r = 2 for dt, dt/2, dt/4).
    order : the order p in dt claimed for the method (TEMPO and process tensors:
        :data:`SPLITTING_ORDER`).
    times : the common times (M,); None: those of the coarsest result.
    order_tolerance : with three levels, extrapolate only if
        |observed order - order| <= order_tolerance.
    noise_floor : differences (max norm) below this are rounding: with three
        levels whose finer difference is below it, the check is 'converged' and the
        finest values are returned (the results agree; nothing to extrapolate).
    on_failed_check : ``'raise'`` (default): an :class:`OrderCheckError` when the
        observed order is not the claimed one; ``'finest'``: return the finest
        level's values, not extrapolated, with ``order_check`` 'failed'.
    next_order : with three levels that pass the order check, the order q (> ``order``)
        of the next error term, cancelled by a second (Romberg) stage from the two
        extrapolations (:data:`NEXT_ORDER` for TEMPO and process tensors: the
        splitting's error is even in dt); None (default): one stage. Ignored with
        two levels and where the check does not pass (nothing is extrapolated twice).

    With two levels the order cannot be observed: the extrapolation is made with
    the claimed order and reported 'unchecked'.

    Returns an :class:`Extrapolation`.
    """
    results = list(results)
    if len(results) not in (2, 3):
        raise ValueError(
            f"richardson needs two or three results (dt, dt/r[, dt/r^2]); got {len(results)}"
        )
    order = check.positive_number(order, "order")
    order_tolerance = check.positive_number(order_tolerance, "order_tolerance")
    noise_floor = check.non_negative_number(noise_floor, "noise_floor")
    on_failed_check = check.choice(on_failed_check, ("raise", "finest"), "on_failed_check")
    if next_order is not None:
        next_order = check.positive_number(next_order, "next_order")
        if next_order <= order:
            raise ValueError(
                f"next_order must exceed the order ({order:g}) it follows; got {next_order:g}"
            )
    grid, values, dts = on_common_times(results, times)
    ratios = [dts[k] / dts[k + 1] for k in range(len(dts) - 1)]
    ratio = ratios[0]
    if ratio <= 1.0 + 1e-9 or any(abs(r - ratio) > 1e-6 * ratio for r in ratios):
        raise ValueError(
            "the results must be ordered coarsest first with one refinement ratio r > 1 "
            f"between consecutive time steps; got time steps {dts}"
        )
    differences = tuple(
        float(default_np.max(default_np.abs(values[k] - values[k + 1]), initial=0.0))
        for k in range(len(values) - 1)
    )
    finest = values[-1]
    last = _per_time(values[-1] - values[-2])
    factor = ratio**order - 1.0

    def extrapolate(coarse: default_np.ndarray, fine: default_np.ndarray) -> default_np.ndarray:
        return fine + (fine - coarse) / factor

    common = {"times": grid, "finest": finest, "dts": tuple(dts), "ratio": ratio}
    common.update(order=order, differences=differences)
    if len(values) == 2:
        return Extrapolation(
            values=extrapolate(values[0], values[1]),
            error=last / factor,
            finest_error=last / factor,
            observed_order=None,
            order_check="unchecked",
            extrapolated=True,
            **common,  # type: ignore[arg-type]
        )
    observed = observed_order(values[0], values[1], values[2], ratio, noise_floor)
    if observed is None:
        return Extrapolation(
            values=finest,
            error=last,
            finest_error=last / factor,
            observed_order=None,
            order_check="converged",
            extrapolated=False,
            **common,  # type: ignore[arg-type]
        )
    if abs(observed - order) > order_tolerance:
        # the finest level's error with the observed order where it is positive,
        # else the last difference itself (no convergence rate is known)
        rate = ratio**observed - 1.0 if observed > 0 else 1.0
        failed = Extrapolation(
            values=finest,
            error=last / rate,
            finest_error=last / rate,
            observed_order=observed,
            order_check="failed",
            extrapolated=False,
            **common,  # type: ignore[arg-type]
        )
        if on_failed_check == "raise":
            raise OrderCheckError(
                f"richardson: the observed order in dt is {observed:.3g}, not the claimed "
                f"{order:g} (+- {order_tolerance:g}; differences between levels "
                f"{', '.join(f'{d:.3g}' for d in differences)}): the time step is not yet in "
                "the asymptotic range, or another error (memory cut, truncation) dominates; "
                "refine dt further or tighten the other parameters",
                failed,
            )
        return failed
    first = extrapolate(values[0], values[1])
    second = extrapolate(values[1], values[2])
    if next_order is None:
        result, error = second, _per_time(second - first)
    else:
        correction = (second - first) / (ratio**next_order - 1.0)
        result, error = second + correction, _per_time(correction)
    return Extrapolation(
        values=result,
        error=error,
        finest_error=last / factor,
        observed_order=observed,
        order_check="passed",
        extrapolated=True,
        next_order=next_order,
        **common,  # type: ignore[arg-type]
    )
