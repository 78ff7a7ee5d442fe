"""``compute_dynamics``: reduced dynamics from process tensors and a system.

Step k takes rho(t_k) to rho(t_k + dt): first half step of the system, each
process tensor's step k (in its own basis), second half step. The state at
t_{k+1} is read out by closing every process tensor's open bond with a
"future cap": its remaining steps contracted with a trace-and-reprepare
(maximally mixed) future, which a causal process tensor makes independent of
the future (exactly so for the untruncated one).

Controls act as in OQuPy (:class:`~nonmarkov.Control`): for k = 0..N, pre(k),
record rho(t_k), post(k), propagate. On the chain engine's steps that is
:func:`chain_controls`: pre(0) on the initial state, then post(k) before and
pre(k+1) after the propagation of step k.

Several process tensors (independent baths) are applied one after another at
each step. A uniform process tensor serves any number of steps; a finite one
sets the number of steps (the shortest, if several).

The propagation is the chain engine's (:mod:`nonmarkov.engines`): on NumPy
step by step, with a process tensor read from a file streamed (never held in
memory whole); on JAX one compiled scan where it applies.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from .. import config
from .. import validation as check
from .._threads import hot_loop_threads
from ..engines import chain_engine
from ..engines.base import ChainRun
from ..io.results import Dynamics
from ..model.control import Control
from ..model.system import BaseSystem, System
from ..options import EngineOptions
from ..process_tensors.base import BaseProcessTensor, TrivialProcessTensor
from ..progress import Progress, check_progress_type
from . import checks
from .metadata import dynamics_metadata, run_statistics

_DT_TOLERANCE = 1e-10


def as_process_tensor_list(
    process_tensor: Any, dimension: int | None = None
) -> list[BaseProcessTensor]:
    """The non-trivial process tensors of ``process_tensor`` (None, one or a
    sequence), in order; a ``TypeError`` naming the index of an item that is not a
    process tensor. A :class:`TrivialProcessTensor` is left out. ``dimension``: the
    system's, which each must have (a ``ValueError`` names the one that has not)."""
    if process_tensor is None:
        return []
    items = list(process_tensor) if isinstance(process_tensor, Sequence) else [process_tensor]
    for i, item in enumerate(items):
        if not isinstance(item, BaseProcessTensor):
            raise TypeError(
                f"process_tensor[{i}] must be a process tensor; got {type(item).__name__}"
            )
    process_tensors = [item for item in items if not isinstance(item, TrivialProcessTensor)]
    for i, pt in enumerate(process_tensors):
        if dimension is not None and pt.dimension != dimension:
            raise ValueError(
                f"process tensor {i} has dimension {pt.dimension} but the system "
                f"has dimension {dimension}"
            )
    return process_tensors


def resolve_grid(
    process_tensors: list[BaseProcessTensor], dt: float | None, num_steps: int | None
) -> tuple[float, int]:
    """The run's (dt, num_steps): the given values checked against the process
    tensors' time steps and lengths, or taken from them where None (dt from the
    first process tensor with a grid, num_steps from the shortest). A
    ``ValueError`` names the process tensor that does not fit."""
    if dt is not None:
        dt = check.positive_number(dt, "dt")
    if num_steps is not None:
        num_steps = check.positive_integer(num_steps, "num_steps", minimum=0)
    for i, pt in enumerate(process_tensors):
        if pt.dt is None and dt is not None:
            continue  # a process tensor without a time grid runs on the given dt
        step = pt.time_step()
        if dt is None:
            dt = step
        elif abs(step - dt) > _DT_TOLERANCE * max(1.0, dt):
            raise ValueError(f"process tensor {i} has dt={step}, which does not fit dt={dt}")
    lengths = [pt.num_steps for pt in process_tensors if pt.num_steps is not None]
    if lengths:
        shortest = min(lengths)
        if num_steps is None:
            num_steps = shortest
        elif num_steps > shortest:
            raise ValueError(
                f"num_steps={num_steps} exceeds the length of the process tensor ({shortest} steps)"
            )
    if num_steps is None and process_tensors:
        raise ValueError("a UniformProcessTensor serves any number of steps: give num_steps")
    if dt is None or num_steps is None:
        raise ValueError("without a process tensor, dt and num_steps must be given")
    return dt, num_steps


def chain_controls(
    control: Control | None, dt: float, start_time: float
) -> tuple[default_np.ndarray | None, Callable[[int], tuple[Any, Any]] | None]:
    """The controls of ``control`` on the steps of a chain engine.

    A :class:`Control` acts at each grid time t_k: pre(k) before the state at
    t_k is recorded, post(k) after it. The chain engine's step k applies one
    control before and one after the propagation from t_k to t_{k+1}, and
    the state after step k is the one recorded at t_{k+1}; so

    - ``initial`` = pre(0), (d^2, d^2) or None, acts on the initial state
      before it is recorded (the first state of the dynamics includes it);
    - ``controls(k)`` = (post(k), pre(k+1)), what step k applies before and
      after its propagation (each (d^2, d^2) or None).

    post(N) of the last step N never acts. Returns (None, None) without a
    control. Over a run (k = 0..N-1) every slot is evaluated once.
    """
    if control is None:
        return None, None

    def controls(step: int) -> tuple[Any, Any]:
        return (
            control.combined(step, True, dt, start_time),
            control.combined(step + 1, False, dt, start_time),
        )

    return control.combined(0, False, dt, start_time), controls


def check_dynamics_inputs(
    system: Any,
    process_tensor: Any,
    initial_state: Any,
    start_time: Any,
    dt: Any,
    num_steps: Any,
    control: Any,
    progress_type: Any,
    parameterized: bool = False,
) -> tuple[list[BaseProcessTensor], default_np.ndarray, float, float, int, str]:
    """Check the arguments shared by the functions that propagate a system
    (``parameterized``: a :class:`ParameterizedSystem` is what is asked for).

    Returns (process tensors without trivial ones, rho0 (d, d), start_time,
    dt, num_steps, progress_type); raises TypeError/ValueError naming the
    argument otherwise. ``initial_state`` is any finite (d, d) operator: the
    propagation is linear in it (a density matrix, the identity, a traceless
    observable).
    """
    checks.system_without_field(system, parameterized)
    if initial_state is None:
        raise ValueError(
            "initial_state must be given: a (d, d) operator (a density matrix, or any "
            "operator: the map is linear)"
        )
    rho0 = check.initial_operator(initial_state, "initial_state", system.dimension)
    start_time = check.real_number(start_time, "start_time")
    progress_type = check_progress_type(progress_type)
    if control is not None and not isinstance(control, Control):
        raise TypeError(f"control must be a Control; got {type(control).__name__}")
    if control is not None and control.dimension != system.dimension:
        raise ValueError(
            f"control has dimension {control.dimension}, the system {system.dimension}"
        )
    process_tensors = as_process_tensor_list(process_tensor, system.dimension)
    dt, num_steps = resolve_grid(process_tensors, dt, num_steps)
    checks.affordable_run(num_steps, system.dimension, 0, "the run")
    checks.discretisation(dt, "the run", system)
    missed = [] if control is None else control.outside(num_steps, dt, start_time)
    if control is not None and missed:
        warnings.warn(
            f"control {control.name!r}: {', '.join(missed)} lie outside this run "
            f"(steps 0..{num_steps}, times {start_time:g}..{start_time + num_steps * dt:g}) "
            "and are not applied",
            UserWarning,
            stacklevel=3,
        )
    return process_tensors, rho0, start_time, dt, num_steps, progress_type


def start_dynamics(
    method: str,
    system: BaseSystem,
    rho0: default_np.ndarray,
    control: Control | None,
    process_tensors: Sequence[BaseProcessTensor],
    grid: tuple[float, float, int],
    record_all: bool,
) -> tuple[default_np.ndarray, Callable[[int], tuple[Any, Any]] | None, Dynamics]:
    """The start of a run of ``method`` on the chain engine, on the grid
    ``(start_time, dt, num_steps)``: ``rho0`` (d, d) after the control's pre-control at
    t_0, the controls of the steps (:func:`chain_controls`), and the :class:`Dynamics`
    with the run's provenance and the state at ``start_time``."""
    start_time, dt, num_steps = grid
    initial_control, controls = chain_controls(control, dt, start_time)
    if initial_control is not None:
        rho0 = (initial_control @ rho0.reshape(-1)).reshape(rho0.shape)
    provenance = dynamics_metadata(
        method,
        system,
        start_time=start_time,
        dt=dt,
        num_steps=num_steps,
        record_all=record_all,
        control=control is not None,
        process_tensors=[pt.metadata for pt in process_tensors],
    )
    dynamics = Dynamics(name="dynamics", metadata=provenance)
    dynamics.add(start_time, rho0)
    return rho0, controls, dynamics


def record_readouts(
    dynamics: Dynamics,
    readouts: Any,
    rho0: default_np.ndarray,
    grid: tuple[float, float, int],
    record_all: bool,
    what: str,
    control: Control | None,
) -> None:
    """Add a chain run's read-outs, (N, d^2) after every step or (1, d^2) after the
    last, to ``dynamics`` at their times on the grid ``(start_time, dt, num_steps)``,
    once :func:`checks.finite_states` has found them finite and bounded (``what``
    names the run in its messages; ``rho0`` (d, d) is the initial state; a run with
    a ``control`` may change the trace)."""
    start_time, dt, num_steps = grid
    d = rho0.shape[0]
    steps = range(1, num_steps + 1) if record_all else [num_steps] * min(num_steps, 1)
    states = default_np.asarray(readouts).reshape(-1, d, d)
    first = steps[0] if len(steps) else 0
    checks.finite_states(states, first, start_time, dt, what, control is None, initial=rho0)
    for step, rho in zip(steps, states):
        dynamics.add(start_time + step * dt, rho)


def compute_dynamics(
    system: BaseSystem,
    initial_state: Any = None,
    dt: float | None = None,
    num_steps: int | None = None,
    start_time: float = 0.0,
    process_tensor: Any = None,
    control: Control | None = None,
    record_all: bool = True,
    subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
    liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    progress_type: str | None = None,
    options: EngineOptions | None = None,
) -> Dynamics:
    """Reduced dynamics of ``system`` coupled to the baths of ``process_tensor``.

    Parameters
    ----------
    system : System or TimeDependentSystem (dimension d).
    initial_state : (d, d) density matrix at ``start_time``, or any (d, d)
        operator (the map is linear: the identity gives the sum of the dynamical
        map's action on the basis states).
    dt : time step; taken from the process tensor(s) if None.
    num_steps : number of steps; the process tensors' length if None.
    start_time : time of the initial state.
    process_tensor : a process tensor, a list of them (independent baths),
        or None (no bath: Lindblad dynamics of the system alone). A
        :class:`~nonmarkov.UniformProcessTensor` runs for ``num_steps`` (or
        the shortest finite process tensor's length), in constant memory with
        ``record_all=False``.
    control : optional :class:`Control`: pre-controls of step k act on the
        state at t_k before it is recorded (pre(0) on the initial state),
        post-controls after it, before the propagation to t_{k+1}.
    record_all : record every step (True) or only the final state.
    subdiv_limit, liouvillian_epsrel : quadrature settings for
        time-dependent systems.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).

    Returns a :class:`Dynamics` with times start_time + k dt.
    """
    record_all = check.boolean(record_all, "record_all")
    process_tensors, rho0, start_time, dt, num_steps, progress_type = check_dynamics_inputs(
        system, process_tensor, initial_state, start_time, dt, num_steps, control, progress_type
    )
    recorded = num_steps + 1 if record_all else 2
    checks.affordable_run(num_steps, system.dimension, recorded, "compute_dynamics")
    propagators = system.get_propagators(dt, start_time, subdiv_limit, liouvillian_epsrel)
    grid = (start_time, dt, num_steps)
    rho0, controls, dynamics = start_dynamics(
        "compute_dynamics", system, rho0, control, process_tensors, grid, record_all
    )
    started = time.perf_counter()
    with hot_loop_threads(), Progress(num_steps, progress_type, "dynamics") as progress:
        readouts = chain_engine(options).run(
            ChainRun(
                initial=rho0.reshape(-1),
                num_steps=num_steps,
                propagators=propagators,
                constant_propagators=type(system) is System,
                controls=controls,
                process_tensors=process_tensors,
                record_all=record_all,
                on_step=progress.update,
            )
        )
    record_readouts(dynamics, readouts, rho0, grid, record_all, "compute_dynamics", control)
    bonds = [int(max(pt.get_bond_dimensions(), default=1)) for pt in process_tensors]
    dynamics.metadata["statistics"] = run_statistics(
        time.perf_counter() - started, num_steps, max(bonds) if bonds else None
    )
    return dynamics
