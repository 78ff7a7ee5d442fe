"""The convergence ladder: error estimates per time from refined runs.

A TEMPO result depends on three discretisation choices: the time step dt, the
memory cut (dkmax steps, tcut = dkmax dt) and the SVD truncation epsrel. The
ladder estimates how much each contributes to the error of a run and refines
until the estimate is within a tolerance:

1. level k has a *base* setting (dt, dkmax, epsrel); it is run, and so are
   three *probes*, each refining one parameter: dt halved (the same tcut, so
   dkmax doubles), the memory cut doubled, the truncation budget lowered
   tenfold. The truncation budget b = epsrel N dkmax (N the number of steps) is
   what :func:`~nonmarkov.guess_tempo_parameters` shares out, so halving dt
   divides epsrel by the growth of N dkmax, and lowering the budget divides
   epsrel by ten;
2. each parameter's contribution to the base's error per time t is estimated
   from the difference to its probe, |f_base(t) - f_probe(t)|, scaled:

   - dt: by s r^p / (r^p - 1) (Richardson, r = 2, p the splitting's order
     :data:`~nonmarkov.methods.extrapolation.SPLITTING_ORDER`); with a third
     level at 2 dt from an earlier rung (same tcut and budget) the observed order
     is checked first (:func:`~nonmarkov.methods.extrapolation.richardson`), and
     an order below the claimed one is used instead; s = :data:`DT_SAFETY`
     covers the next orders in dt;
   - memory cut and truncation: by 1 / (1 - q), q the ratio by which one
     refinement shrinks the error: the largest of 1/2, the ratio observed
     between earlier rungs of the same parameter, and (memory cut) the ratio of
     the correlations the cut drops, int_tcut^T (T - tau) |C(tau)| dtau, at 2 tcut
     and at tcut (the first-order error of a cut); q is at most
     :data:`MAX_RATIO`;

   a memory cut as long as the run (full memory) contributes nothing;
3. the estimate of the base's error at time t is the sum of the three
   contributions; if its largest value over the times is within the tolerance,
   the base is the result; else every parameter whose contribution exceeds a
   third of the tolerance and an eighth of the largest contribution (at least the
   largest) is refined for level k + 1.

Runs are cached by setting: a probe that becomes the next base is not run
again, and runs with the same dt share the bath's correlation integrals. Before
each level the cost of its new runs is checked (:mod:`nonmarkov.cost`: site
updates N x dkmax, refused up front) against the caller's limits; a level that
would exceed them ends the ladder with a :class:`ConvergenceError`.

This module holds the ladder and its bookkeeping; it runs the dynamics through a
*runner*, a function from :class:`~nonmarkov.TempoParameters` to a list of
:class:`~nonmarkov.Dynamics` (one per system), given by
:func:`nonmarkov.converge` and by ``tempo_compute(..., converge=True)``.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as default_np

from .. import cost
from .. import validation as check
from ..io.results import Dynamics
from ..model.bath import Bath
from ..model.parameters import (
    EPSREL_FLOOR,
    GUESS_WARNING_MSG,
    TempoParameters,
    check_bath_interval,
    guess_tempo_parameters,
)
from ..model.system import BaseSystem
from ..progress import logger
from .extrapolation import SPLITTING_ORDER, on_common_times, richardson

#: the parameters of the ladder, in the order of the table
PARAMETERS = ("dt", "memory", "epsrel")
#: the largest error ratio per refinement the ladder assumes (scale factor at most 1/(1-q) = 10)
MAX_RATIO = 0.9
#: the smallest error ratio per refinement assumed for the memory cut and the truncation
DEFAULT_RATIO = 0.5
#: the Richardson estimate of the dt error is multiplied by this (the next orders in dt)
DT_SAFETY = 1.5
#: the truncation budget is divided by this at each refinement of epsrel
EPSREL_FACTOR = 10.0
#: a parameter is refined only if its contribution is above 1/LEADING_FRACTION of the largest
LEADING_FRACTION = 8.0
#: sample points of the correlation tail integral of the memory-cut ratio
_CORRELATION_SAMPLES = 101
#: the most levels of one ladder
DEFAULT_MAX_LEVELS = 6

Runner = Callable[[TempoParameters], list[Dynamics]]


class ConvergenceError(ValueError):
    """The tolerance could not be reached within the cost limit (or the levels): a
    ``ValueError``, like the refusals of :mod:`nonmarkov.cost`.

    Attributes
    ----------
    parameter : the parameter(s) that had not converged (``'dt'``, ``'memory'``,
        ``'epsrel'``, joined by ``', '``), or None before any level ran.
    best : the best result reached (a :class:`~nonmarkov.Dynamics`, or a list of
        them for several systems, with its error estimate), or None.
    estimate : the largest error estimate of ``best`` (inf without one).
    next_cost : the cost units (site updates) of the level that was refused.
    next_seconds : its predicted wall time in seconds (from the runs so far).
    ladder : the table of the levels that ran (list of dicts).
    """

    def __init__(
        self,
        message: str,
        parameter: str | None,
        best: Any,
        estimate: float,
        next_cost: int,
        next_seconds: float,
        ladder: list[dict],
    ):
        super().__init__(message)
        self.parameter = parameter
        self.best = best
        self.estimate = estimate
        self.next_cost = next_cost
        self.next_seconds = next_seconds
        self.ladder = ladder


@dataclass(frozen=True)
class Setting:
    """One point of the ladder: time step, memory cut in steps, truncation epsrel,
    and the number of steps N of the interval."""

    dt: float
    dkmax: int
    epsrel: float
    num_steps: int

    @property
    def key(self) -> tuple[float, int, float]:
        """What identifies the run (rounded against float noise)."""
        return (float(f"{self.dt:.12g}"), self.dkmax, float(f"{self.epsrel:.12g}"))

    @property
    def full_memory(self) -> bool:
        """Whether the memory cut is as long as the run."""
        return self.dkmax >= self.num_steps

    @property
    def cost_units(self) -> int:
        """Site updates of the window run (:mod:`nonmarkov.cost`): N x dkmax."""
        return self.num_steps * min(self.dkmax, self.num_steps)

    def parameters(self, template: TempoParameters | None) -> TempoParameters:
        """The TempoParameters of this setting (quadrature settings and the exponential
        tail of ``template``)."""
        extra: dict[str, Any] = {}
        if template is not None:
            extra = {
                "subdiv_limit": template.subdiv_limit,
                "liouvillian_epsrel": template.liouvillian_epsrel,
                "exponential_tail": template.exponential_tail,
            }
        return TempoParameters(
            dt=self.dt,
            epsrel=self.epsrel,
            dkmax=min(self.dkmax, self.num_steps),
            name="convergence ladder",
            **extra,
        )

    def row(self) -> dict:
        """The setting as table columns."""
        return {
            "dt": self.dt,
            "dkmax": min(self.dkmax, self.num_steps),
            "tcut": min(self.dkmax, self.num_steps) * self.dt,
            "epsrel": self.epsrel,
            "num_steps": self.num_steps,
        }


def _steps(interval: float, dt: float) -> int:
    """Steps of a run over ``interval`` (as ``Tempo.compute`` counts them)."""
    return max(1, int(round(interval / dt)))


def refine(setting: Setting, parameter: str, interval: float) -> Setting | None:
    """``setting`` with ``parameter`` refined (None: it cannot be refined further:
    full memory, or epsrel at the floor of a double-precision SVD)."""
    updates = setting.num_steps * min(setting.dkmax, setting.num_steps)
    if parameter == "dt":
        dt = setting.dt / 2.0
        steps = _steps(interval, dt)
        dkmax = min(2 * setting.dkmax, steps)
        epsrel = setting.epsrel * updates / (steps * dkmax)
        return Setting(dt, dkmax, max(epsrel, EPSREL_FLOOR), steps)
    if parameter == "memory":
        if setting.full_memory:
            return None
        dkmax = min(2 * setting.dkmax, setting.num_steps)
        epsrel = setting.epsrel * setting.dkmax / dkmax
        return Setting(setting.dt, dkmax, max(epsrel, EPSREL_FLOOR), setting.num_steps)
    if setting.epsrel <= EPSREL_FLOOR * (1.0 + 1e-9):
        return None
    epsrel = max(setting.epsrel / EPSREL_FACTOR, EPSREL_FLOOR)
    return Setting(setting.dt, setting.dkmax, epsrel, setting.num_steps)


@dataclass
class _Run:
    dynamics: list[Dynamics]
    seconds: float
    units: int
    max_bond: int | None
    warnings: list[str]


class Targets:
    """What the tolerance applies to: the states (max |element| per time) or the
    expectation values of named observables, and how differences are measured.

    ``observables``: None, or a dict label -> (d, d) matrix (a list gets labels
    ``'O0'``, ``'O1'``...). ``dimension``: the system dimension d.
    """

    def __init__(self, observables: Any, dimension: int):
        if observables is None:
            self.observables: dict[str, default_np.ndarray] = {}
        else:
            if isinstance(observables, dict):
                items = list(observables.items())
            elif isinstance(observables, (list, tuple)):
                items = [(f"O{k}", o) for k, o in enumerate(observables)]
            else:
                raise TypeError(
                    "observables must be None, a dict label -> (d, d) matrix or a list of "
                    f"(d, d) matrices; got {type(observables).__name__}"
                )
            if not items:
                raise ValueError("observables is empty: give at least one, or None (the states)")
            self.observables = {
                str(label): check.square_matrix(matrix, f"observables[{label!r}]", dimension)
                for label, matrix in items
            }

    @property
    def names(self) -> list[str]:
        """'states' and the observables' labels."""
        return ["states", *self.observables]

    @property
    def governing(self) -> list[str]:
        """The quantities the tolerance applies to: the observables if any, else the states."""
        return list(self.observables) or ["states"]

    def differences(self, states: default_np.ndarray) -> dict[str, default_np.ndarray]:
        """Per quantity, |difference| per time (M,) of a state difference (M, d, d)."""
        flat = default_np.abs(states).reshape(states.shape[0], -1)
        out = {"states": flat.max(axis=1)}
        for label, matrix in self.observables.items():
            out[label] = default_np.abs(default_np.einsum("ij,nji->n", matrix, states))
        return out


def _dropped_correlations(bath: Bath, interval: float, tcut: float) -> float:
    """int_tcut^T (T - tau) |C(tau)| dtau, T = ``interval``: to first order, the part
    of the influence exponent a memory cut at ``tcut`` drops by the end of the run
    (trapezoid sum on :data:`_CORRELATION_SAMPLES` points)."""
    if tcut >= interval:
        return 0.0
    taus = default_np.linspace(tcut, interval, _CORRELATION_SAMPLES)
    values = default_np.abs(default_np.asarray(bath.correlations.correlation(taus), dtype=complex))
    integrand = (interval - taus) * values
    return float(default_np.sum(0.5 * (integrand[1:] + integrand[:-1]) * default_np.diff(taus)))


def _correlation_ratio(bath: Bath, interval: float, tcut: float) -> float:
    """Ratio of the correlations a cut at 2 tcut drops to those a cut at tcut drops
    (:func:`_dropped_correlations`; 0 when nothing is dropped at tcut)."""
    at_cut = _dropped_correlations(bath, interval, tcut)
    if at_cut <= 0.0:
        return 0.0
    return _dropped_correlations(bath, interval, 2.0 * tcut) / at_cut


class Ladder:
    """Runs the ladder (module docstring) for one model.

    Parameters
    ----------
    runner : TempoParameters -> list of Dynamics (one per system).
    bath : the Bath (for the memory-cut ratio).
    start, interval : start time and length of the run.
    dimension : system dimension d.
    tolerance : bound on the largest error estimate (> 0).
    observables : see :class:`Targets`.
    max_cost : the most cost units (site updates, summed over every run of the
        ladder), None for no limit beyond :func:`nonmarkov.cost.affordable_run`.
    max_seconds : the most wall time (s) of the ladder's runs (a level whose
        predicted time would exceed it is refused), None for no limit.
    max_levels : the most levels.
    template : TempoParameters whose quadrature settings the runs keep.
    """

    def __init__(
        self,
        runner: Runner,
        bath: Bath,
        start: float,
        interval: float,
        dimension: int,
        tolerance: float,
        observables: Any = None,
        max_cost: float | None = None,
        max_seconds: float | None = None,
        max_levels: int = DEFAULT_MAX_LEVELS,
        template: TempoParameters | None = None,
        method: str = "converge",
        name: str | None = None,
    ):
        self.runner = runner
        self.bath = bath
        self.start = start
        self.interval = interval
        self.dimension = dimension
        self.tolerance = check.positive_number(tolerance, "tolerance")
        self.targets = Targets(observables, dimension)
        self.max_cost = None if max_cost is None else check.positive_number(max_cost, "max_cost")
        self.max_seconds = (
            None if max_seconds is None else check.positive_number(max_seconds, "max_seconds")
        )
        self.max_levels = check.positive_integer(max_levels, "max_levels")
        self.template = template
        self.method = method
        self.name = name
        self._runs: dict[tuple, _Run] = {}
        self._settings: dict[tuple, Setting] = {}
        self.table: list[dict] = []
        self.spent_units = 0
        self.spent_seconds = 0.0

    def setting_of(self, parameters: TempoParameters) -> Setting:
        """The ladder's setting of TempoParameters (full memory: dkmax = N)."""
        steps = _steps(self.interval, parameters.dt)
        dkmax = steps if parameters.dkmax is None else min(parameters.dkmax, steps)
        return Setting(parameters.dt, dkmax, parameters.epsrel, steps)

    # ------------------------------------------------------------------ runs
    def _seconds_per_unit(self) -> float:
        rates = [run.seconds / max(run.units, 1) for run in self._runs.values()]
        return max(rates) if rates else cost.UNIT_SECONDS

    def _check_cost(self, settings: list[Setting], level: int) -> tuple[int, float]:
        """Refuse a level up front; returns its (units, predicted seconds)."""
        new = [s for s in settings if s.key not in self._runs]
        units = sum(s.cost_units for s in new)
        seconds = units * self._seconds_per_unit()
        for s in new:
            cost.affordable_run(
                s.num_steps,
                self.dimension,
                s.num_steps + 1,
                self.method,
                min(s.dkmax, s.num_steps),
                cause=f"level {level}: dt={s.dt:g}, dkmax={s.dkmax}, epsrel={s.epsrel:.3g}",
            )
        if self.max_cost is not None and self.spent_units + units > self.max_cost:
            raise _Refused(
                f"level {level} needs {units:.3g} cost units (site updates) more, "
                f"{self.spent_units + units:.3g} in all, above max_cost={self.max_cost:.3g}",
                units,
                seconds,
            )
        if self.max_seconds is not None and self.spent_seconds + seconds > self.max_seconds:
            raise _Refused(
                f"level {level} would take about {seconds:.3g} s more ({units:.3g} cost units), "
                f"{self.spent_seconds + seconds:.3g} s in all, above max_seconds="
                f"{self.max_seconds:.3g}",
                units,
                seconds,
            )
        return units, seconds

    def _run(self, setting: Setting) -> tuple[_Run, bool]:
        """The run of ``setting`` (cached); (run, whether it was run now)."""
        if setting.key in self._runs:
            return self._runs[setting.key], False
        started = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dynamics = self.runner(setting.parameters(self.template))
        seconds = time.perf_counter() - started
        bonds = [
            int(d.statistics["max_bond_dimension"])
            for d in dynamics
            if d.statistics.get("max_bond_dimension") is not None
        ]
        messages = sorted({str(w.message) for w in caught})
        run = _Run(dynamics, seconds, setting.cost_units, max(bonds) if bonds else None, messages)
        self._runs[setting.key] = run
        self._settings[setting.key] = setting
        self.spent_units += run.units
        self.spent_seconds += seconds
        return run, True

    def _difference(
        self, base: _Run, other: _Run, times: default_np.ndarray
    ) -> dict[str, default_np.ndarray]:
        """Per quantity |base - other| per time (M,), max over the systems."""
        out: dict[str, default_np.ndarray] = {}
        for mine, theirs in zip(base.dynamics, other.dynamics):
            _, (a, b), _ = on_common_times([mine, theirs], times)
            for name, values in self.targets.differences(a - b).items():
                out[name] = values if name not in out else default_np.maximum(out[name], values)
        return out

    # --------------------------------------------------------- contributions
    def _ratio(self, parameter: str, setting: Setting, probe: Setting, difference: float) -> float:
        """The error ratio q per refinement of ``parameter`` (memory cut, truncation)."""
        ratios = [DEFAULT_RATIO]
        if parameter == "memory":
            tcut = min(setting.dkmax, setting.num_steps) * setting.dt
            ratios.append(_correlation_ratio(self.bath, self.interval, tcut))
        # an earlier rung: a base one coarser in this parameter
        for row in self.table:
            coarser = refine(row["_setting"], parameter, self.interval)
            if coarser is not None and coarser.key == setting.key:
                earlier = row["_differences"].get(parameter, 0.0)
                if earlier > 0.0:
                    ratios.append(difference / earlier)
        return min(max(ratios), MAX_RATIO)

    def _contributions(
        self, level: int, base: Setting, probes: dict[str, Setting | None]
    ) -> tuple[dict[str, dict[str, default_np.ndarray]], dict, dict[str, float]]:
        """Per parameter and quantity, the contribution per time (M,) on the base's
        times; the dt order check; the raw largest differences per parameter."""
        base_run = self._runs[base.key]
        times = base_run.dynamics[0].times
        contributions: dict[str, dict[str, default_np.ndarray]] = {}
        raw: dict[str, float] = {}
        order_report: dict[str, Any] = {"order": SPLITTING_ORDER}
        for parameter in PARAMETERS:
            probe = probes.get(parameter)
            if probe is None:
                contributions[parameter] = {
                    name: default_np.zeros(len(times)) for name in self.targets.names
                }
                raw[parameter] = 0.0
                continue
            difference = self._difference(base_run, self._runs[probe.key], times)
            raw[parameter] = float(difference["states"].max(initial=0.0))
            if parameter == "dt":
                factor, order_report = self._dt_factor(base, probe)
            else:
                q = self._ratio(parameter, base, probe, raw[parameter])
                factor = 1.0 / (1.0 - q)
                order_report[f"{parameter}_ratio"] = q
            contributions[parameter] = {name: factor * v for name, v in difference.items()}
        return contributions, order_report, raw

    def _dt_factor(self, base: Setting, probe: Setting) -> tuple[float, dict]:
        """Richardson's factor r^p / (r^p - 1) for the dt contribution, with the order
        checked on three levels where a run at 2 dt (same tcut, same budget) exists."""
        report: dict[str, Any] = {"order": SPLITTING_ORDER, "order_check": "unchecked"}
        order = SPLITTING_ORDER
        coarser = None
        for key, setting in self._settings.items():
            finer = refine(setting, "dt", self.interval)
            if finer is not None and finer.key == base.key:
                coarser = self._runs[key]
                break
        if coarser is not None:
            levels = [coarser, self._runs[base.key], self._runs[probe.key]]
            checks = [
                richardson([lv.dynamics[k] for lv in levels], on_failed_check="finest")
                for k in range(len(levels[0].dynamics))
            ]
            worst = min(
                checks, key=lambda e: -1.0 if e.observed_order is None else e.observed_order
            )
            report.update(order_check=worst.order_check, observed_order=worst.observed_order)
            if worst.order_check == "failed" and worst.observed_order is not None:
                order = min(order, worst.observed_order) if worst.observed_order > 0 else math.nan
        report["order_used"] = None if math.isnan(order) else order
        if math.isnan(order):
            return 1.0 / (1.0 - MAX_RATIO), report
        ratio = 2.0**order
        return min(DT_SAFETY * ratio / (ratio - 1.0), 1.0 / (1.0 - MAX_RATIO)), report

    # ---------------------------------------------------------------- ladder
    def run(self, start: Setting) -> tuple[list[Dynamics], dict]:
        """Climb the ladder from ``start``; returns (the accepted base's dynamics with
        their error estimates, the convergence record), or raises ConvergenceError."""
        base = start
        best: tuple[list[Dynamics], dict] | None = None
        refine_next: list[str] = []
        for level in range(self.max_levels):
            probes = {p: refine(base, p, self.interval) for p in PARAMETERS}
            settings = [base] + [p for p in probes.values() if p is not None]
            try:
                self._check_cost(settings, level)
            except (_Refused, ValueError) as refused:
                units = sum(s.cost_units for s in settings if s.key not in self._runs)
                seconds = units * self._seconds_per_unit()
                if isinstance(refused, _Refused):
                    units, seconds = refused.units, refused.seconds
                raise self._error(str(refused), refine_next, best, units, seconds) from None
            new_units, new_seconds = 0, 0.0
            runs = {}
            for role, setting in [("base", base)] + list(probes.items()):
                if setting is None:
                    continue
                run, fresh = self._run(setting)
                runs[role] = (setting, run, fresh)
                if fresh:
                    new_units += run.units
                    new_seconds += run.seconds
            contributions, order_report, raw = self._contributions(level, base, probes)
            totals = {
                name: default_np.sum([contributions[p][name] for p in PARAMETERS], axis=0)
                for name in self.targets.names
            }
            estimate = max(float(totals[name].max(initial=0.0)) for name in self.targets.governing)
            largest = {
                p: max(float(contributions[p][n].max(initial=0.0)) for n in self.targets.governing)
                for p in PARAMETERS
            }
            accepted = estimate <= self.tolerance
            refine_next = []
            if not accepted:
                leading = max(largest.values())
                refine_next = [
                    p
                    for p in PARAMETERS
                    if probes[p] is not None
                    and largest[p] > max(self.tolerance / 3.0, leading / LEADING_FRACTION)
                ]
                if not refine_next:
                    refinable = [p for p in PARAMETERS if probes[p] is not None]
                    refine_next = [max(refinable, key=lambda p: largest[p])] if refinable else []
            row = {
                "level": level,
                **base.row(),
                "runs": [
                    {
                        "role": role,
                        **setting.row(),
                        "seconds": run.seconds,
                        "cost_units": run.units,
                        "max_bond_dimension": run.max_bond,
                        "reused": not fresh,
                        "warnings": run.warnings,
                    }
                    for role, (setting, run, fresh) in runs.items()
                ],
                "seconds": new_seconds,
                "cost_units": new_units,
                "contributions": largest,
                "estimate": estimate,
                "dt_order": order_report,
                "accepted": accepted,
                "refine": refine_next,
                "_setting": base,
                "_probes": probes,
                "_differences": raw,
            }
            self.table.append(row)
            logger.info(
                "%s: level %d dt=%g dkmax=%d epsrel=%.3g: estimate %.3g (dt %.3g, memory %.3g, "
                "epsrel %.3g)%s",
                self.method,
                level,
                base.dt,
                base.dkmax,
                base.epsrel,
                estimate,
                largest["dt"],
                largest["memory"],
                largest["epsrel"],
                " accepted" if accepted else f"; refining {', '.join(refine_next)}",
            )
            best = self._result(base, contributions, totals, estimate)
            if accepted:
                return best
            if not refine_next:
                raise self._error(
                    "no parameter can be refined further (full memory, epsrel at the floor)",
                    [max(PARAMETERS, key=lambda p: largest[p])],
                    best,
                    0,
                    0.0,
                )
            for parameter in refine_next:
                refined = refine(base, parameter, self.interval)
                base = base if refined is None else refined
        raise self._error(
            f"the ladder reached max_levels={self.max_levels}", refine_next, best, 0, 0.0
        )

    def package(self, dynamics: list[Dynamics], record: dict) -> list[Dynamics]:
        """The base's dynamics, one per system, each with ``metadata['convergence']``
        (``record``: the estimate per time and its contributions) and the ladder in
        ``metadata['statistics']['ladder']``."""
        table = self.public_table()
        out = []
        for k, run in enumerate(dynamics):
            metadata = dict(run.metadata)
            own = dict(record)
            if len(dynamics) > 1:
                own["system_index"] = k
            metadata["convergence"] = own
            metadata["statistics"] = {
                **run.statistics,
                "ladder": table,
                "ladder_seconds": self.spent_seconds,
                "ladder_cost_units": self.spent_units,
            }
            out.append(
                Dynamics(
                    list(run.times),
                    list(run.states),
                    name="converged dynamics" if self.name is None else str(self.name),
                    description=(
                        f"{self.method}: tolerance {self.tolerance:g}, estimate "
                        f"{record['estimate']:.3g}"
                    ),
                    metadata=metadata,
                )
            )
        return out

    def public_table(self) -> list[dict]:
        """The ladder's table without its internal columns (JSON-serialisable)."""
        return [{k: v for k, v in row.items() if not k.startswith("_")} for row in self.table]

    def _result(
        self,
        base: Setting,
        contributions: dict[str, dict[str, default_np.ndarray]],
        totals: dict[str, default_np.ndarray],
        estimate: float,
    ) -> tuple[list[Dynamics], dict]:
        run = self._runs[base.key]
        record = {
            "tolerance": self.tolerance,
            "applies_to": self.targets.governing,
            "parameters": base.row(),
            "estimate": estimate,
            "times": [float(t) for t in run.dynamics[0].times],
            "errors": {name: [float(v) for v in totals[name]] for name in self.targets.names},
            "contributions": {
                p: {name: [float(v) for v in contributions[p][name]] for name in self.targets.names}
                for p in PARAMETERS
            },
            "observables": {
                label: {"real": m.real.tolist(), "imag": m.imag.tolist()}
                for label, m in self.targets.observables.items()
            },
            "seconds": self.spent_seconds,
            "cost_units": self.spent_units,
        }
        return run.dynamics, record

    def _error(
        self,
        reason: str,
        parameters: list[str],
        best: tuple[list[Dynamics], dict] | None,
        units: int,
        seconds: float,
    ) -> ConvergenceError:
        named = ", ".join(parameters) if parameters else None
        estimate = math.inf if best is None else float(best[1]["estimate"])
        packaged: Any = None if best is None else self.package(*best)
        if packaged is not None and len(packaged) == 1:
            packaged = packaged[0]
        what = f"{named} not converged" if named else "no level could run"
        message = (
            f"{self.method}: tolerance {self.tolerance:g} not reached ({what}): {reason}. "
            f"Best estimate reached: {estimate:.3g}"
            + ("" if best is None else f" (with {best[1]['parameters']})")
            + f"; the next level would cost {units:.3g} cost units (site updates), about "
            f"{seconds:.3g} s. Raise max_cost/max_seconds or loosen the tolerance."
        )
        return ConvergenceError(
            message, named, packaged, estimate, units, seconds, self.public_table()
        )


class _Refused(Exception):
    """A level over the caller's cost limit (internal to the ladder)."""

    def __init__(self, message: str, units: int, seconds: float):
        super().__init__(message)
        self.units = units
        self.seconds = seconds


def climb(
    runner: Runner,
    system: BaseSystem,
    bath: Bath,
    start_time: float,
    end_time: float,
    tolerance: float,
    *,
    parameters: TempoParameters | None = None,
    observables: Any = None,
    max_cost: float | None = None,
    max_seconds: float | None = None,
    max_levels: int = DEFAULT_MAX_LEVELS,
    name: str | None = None,
    method: str = "converge",
) -> list[Dynamics]:
    """Run the ladder for ``runner`` from ``parameters`` (None: the guess of
    :func:`~nonmarkov.guess_tempo_parameters` at ``tolerance``) and return the
    accepted dynamics, one per system of the runner, each with
    ``metadata['convergence']`` (the estimate per time and its contributions) and
    the ladder in ``metadata['statistics']['ladder']``. Raises
    :class:`ConvergenceError` (module docstring)."""
    tolerance = check.positive_number(tolerance, "tolerance")
    if tolerance >= 1.0:
        raise ValueError(
            f"tolerance must be < 1 (an absolute error of the states); got {tolerance}"
        )
    start_time, end_time = check_bath_interval(bath, start_time, end_time)
    if parameters is None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=re.escape(GUESS_WARNING_MSG[:40]))
            parameters = guess_tempo_parameters(bath, start_time, end_time, system, tolerance)
    elif not isinstance(parameters, TempoParameters):
        raise TypeError(
            f"parameters must be TempoParameters (the ladder's start) or None (the guess); got "
            f"{type(parameters).__name__}"
        )
    ladder = Ladder(
        runner,
        bath,
        start_time,
        end_time - start_time,
        system.dimension,
        tolerance,
        observables=observables,
        max_cost=max_cost,
        max_seconds=max_seconds,
        max_levels=max_levels,
        template=parameters,
        method=method,
        name=name,
    )
    return ladder.package(*ladder.run(ladder.setting_of(parameters)))


def ladder_lines(table: list[dict]) -> list[str]:
    """The ladder's table (``statistics['ladder']``) as lines of text: per level the
    base's dt, dkmax and epsrel, the new runs' seconds and cost units, each
    parameter's contribution, the estimate, the dt order check and what was refined
    (or 'accepted')."""
    lines = [
        f"{'level':>5} {'dt':>9} {'dkmax':>6} {'epsrel':>8} {'seconds':>8} {'units':>10} "
        f"{'c(dt)':>8} {'c(memory)':>9} {'c(epsrel)':>9} {'estimate':>8}  dt order / next"
    ]
    for row in table:
        contributions = row.get("contributions", {})
        order = row.get("dt_order", {})
        observed = order.get("observed_order")
        check_text = str(order.get("order_check", "-")) + (
            f" ({observed:.2f})" if isinstance(observed, float) else ""
        )
        after = "accepted" if row.get("accepted") else "refine " + ", ".join(row.get("refine", []))
        lines.append(
            f"{row.get('level', ''):>5} {row.get('dt', 0.0):9.4g} {row.get('dkmax', 0):6d} "
            f"{row.get('epsrel', 0.0):8.1e} {row.get('seconds', 0.0):8.2f} "
            f"{row.get('cost_units', 0):10d} {contributions.get('dt', 0.0):8.1e} "
            f"{contributions.get('memory', 0.0):9.1e} {contributions.get('epsrel', 0.0):9.1e} "
            f"{row.get('estimate', 0.0):8.1e}  {check_text}; {after}"
        )
    return lines
