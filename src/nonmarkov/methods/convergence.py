"""``converge``: dynamics with an error estimate per time, converged to a tolerance.

The ladder itself (how dt, the memory cut and epsrel are refined and how each
one's contribution to the error is estimated) is :mod:`nonmarkov.methods.error_ladder`;
this module runs it with TEMPO or with process tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import validation
from ..io.results import Dynamics
from ..model.bath import Bath
from ..model.parameters import TempoParameters
from ..model.system import BaseSystem
from ..options import EngineOptions
from ..progress import check_progress_type
from . import checks
from .dynamics import compute_dynamics
from .error_ladder import DEFAULT_MAX_LEVELS, ConvergenceError, climb
from .pt_construction import pt_tempo_compute
from .tempo import tempo_compute

#: the routes of :func:`converge`
METHODS = ("tempo", "process_tensor")

__all__ = ["ConvergenceError", "converge"]


def converge(
    system: BaseSystem | Sequence[BaseSystem],
    bath: Bath,
    initial_state: Any,
    start_time: float,
    end_time: float,
    tolerance: float = 1e-3,
    *,
    observables: Any = None,
    max_cost: float | None = None,
    max_seconds: float | None = None,
    parameters: TempoParameters | None = None,
    method: str = "tempo",
    unique: bool = False,
    max_levels: int = DEFAULT_MAX_LEVELS,
    progress_type: str | None = "silent",
    name: str | None = None,
    options: EngineOptions | None = None,
) -> Any:
    """Dynamics converged in dt, the memory cut and epsrel to ``tolerance``, with an
    error estimate per time.

    Starting from ``parameters`` (None: :func:`~nonmarkov.guess_tempo_parameters`
    at ``tolerance``), each level runs the dynamics and three probes (dt halved,
    memory cut doubled, truncation budget lowered tenfold), estimates each
    parameter's contribution to the error per time from the differences (Richardson
    in dt with the observed order checked), and refines the parameters whose
    contribution exceeds a third of the tolerance, until the estimate is within
    it (docs/convergence.md; :mod:`nonmarkov.methods.error_ladder`).

    Parameters
    ----------
    system : System or TimeDependentSystem (dimension d); with
        ``method='process_tensor'`` also a list of them, which share every process
        tensor of the ladder (built once per level).
    bath : the Bath.
    initial_state : (d, d) density matrix at ``start_time`` (a list, one per
        system, for several systems).
    start_time, end_time : the interval.
    tolerance : bound on the estimated error, in (0, 1): max over times of
        max |rho_ij(t) - rho_ij,exact(t)|, or of |<O>(t) - <O>_exact(t)| for
        every observable O if ``observables`` are given.
    observables : None (the tolerance is on the states), or a dict label -> (d, d)
        matrix (or a list of matrices): errors are estimated for them too, and the
        tolerance applies to them.
    max_cost : the most cost units (window site updates N x dkmax,
        :mod:`nonmarkov.cost`) of all runs of the ladder together; None: no limit
        beyond the per-run rule of :func:`nonmarkov.cost.affordable_run`.
    max_seconds : the most wall time of the ladder's runs (s): a level whose time,
        predicted from the runs so far, would exceed it is refused; None: no limit.
    parameters : the TempoParameters to start from (None: the guess).
    method : ``'tempo'`` (:func:`~nonmarkov.tempo_compute`) or
        ``'process_tensor'`` (:func:`~nonmarkov.pt_tempo_compute` then
        :func:`~nonmarkov.compute_dynamics`).
    unique : merge Liouville indices with equal coupling eigenvalue pairs.
    max_levels : the most levels of the ladder.
    progress_type : of each run (default ``'silent'``; the ladder logs one line
        per level to the ``nonmarkov`` logger at level INFO).
    name : name of the returned dynamics.
    options : :class:`~nonmarkov.options.EngineOptions` of the runs.

    Returns
    -------
    A :class:`~nonmarkov.Dynamics` (a list of them for a list of systems, whose
    error estimates are the largest over the systems) computed
    with the accepted parameters (``metadata['convergence']['parameters']``), with
    :attr:`~nonmarkov.Dynamics.error_estimate` (N,) per time for the states,
    :meth:`~nonmarkov.Dynamics.observable_errors` for the observables, and the
    ladder's table (parameters, seconds, cost units, bond dimensions, contribution
    of each parameter, the dt order check) in ``statistics['ladder']``; all of it is
    kept in the file of :meth:`~nonmarkov.Dynamics.export`.

    Raises
    ------
    ConvergenceError : the tolerance was not reached within ``max_cost``,
        ``max_seconds`` or ``max_levels``; it names the parameter that had not
        converged, holds the best result reached with its estimate
        (``error.best``, ``error.estimate``) and the cost of the refused level
        (``error.next_cost``, ``error.next_seconds``).
    """
    method = validation.choice(method, METHODS, "method")
    progress_type = check_progress_type(progress_type)
    several = isinstance(system, Sequence) and not isinstance(system, (str, bytes))
    if several and method != "process_tensor":
        raise ValueError(
            "a list of systems shares the process tensors of each level: use "
            "method='process_tensor' (or call converge once per system)"
        )
    systems: list[BaseSystem] = list(system) if several else [system]  # type: ignore[arg-type,list-item]
    if not systems:
        raise ValueError("system is an empty list; give at least one system")
    initials = list(initial_state) if several else [initial_state]
    if len(initials) != len(systems):
        raise ValueError(
            f"give one initial state per system: {len(systems)} systems, "
            f"{len(initials)} initial states"
        )
    for item in systems:
        checks.model(item, bath)
    initials = [
        validation.initial_operator(rho, f"initial_state[{k}]", s.dimension)
        for k, (rho, s) in enumerate(zip(initials, systems))
    ]
    unique = validation.boolean(unique, "unique")

    def run_tempo(params: TempoParameters) -> list[Dynamics]:
        return [
            tempo_compute(
                systems[0],
                bath,
                initials[0],
                start_time,
                end_time,
                params,
                unique=unique,
                progress_type=progress_type,
                options=options,
            )
        ]

    def run_process_tensor(params: TempoParameters) -> list[Dynamics]:
        pt = pt_tempo_compute(
            bath,
            start_time,
            end_time,
            params,
            unique=unique,
            progress_type=progress_type,
            options=options,
        )
        return [
            compute_dynamics(
                item,
                rho,
                start_time=start_time,
                process_tensor=pt,
                progress_type=progress_type,
                options=options,
            )
            for item, rho in zip(systems, initials)
        ]

    results = climb(
        run_tempo if method == "tempo" else run_process_tensor,
        systems[0],
        bath,
        start_time,
        end_time,
        tolerance,
        parameters=parameters,
        observables=observables,
        max_cost=max_cost,
        max_seconds=max_seconds,
        max_levels=max_levels,
        name=name,
        method=f"converge ({method})",
    )
    return results if several else results[0]
