"""``compute_dynamics_batch``: the reduced dynamics of a batch of systems on the
same process tensor(s), in one batched contraction per step.

A process tensor is built once and probed by many systems: detunings, pulse
shapes, initial states, controls. Member m of a batch is what
``compute_dynamics(systems[m], initial_states[m], ..., control=controls[m])``
gives (to rounding), but every step contracts the whole batch at once (a run
with a member axis on the chain engine, :mod:`nonmarkov.engines`): one batched matrix
product per step instead of a Python loop over members. Members share the
process tensors, the time grid and the dimension; each has its own system
(time-independent or time-dependent), initial state and control. The batch is
cut into chunks whose states fit ``batch_bytes``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as default_np

from .. import config
from .. import validation as check
from .._threads import hot_loop_threads
from ..engines import chain_engine
from ..engines.base import ChainRun
from ..io.batched_results import BatchedDynamics
from ..model.control import Control
from ..model.parameterized import ParameterizedSystem
from ..model.system import BaseSystem, System
from ..options import EngineOptions
from ..progress import Progress
from . import checks
from .dynamics import chain_controls, check_dynamics_inputs
from .metadata import dynamics_metadata

#: Default bound (bytes) of the batched states of one chunk and what a step makes of them.
BATCH_BYTES = 256 * 2**20


def _as_members(value: Any, name: str, single: type | tuple[type, ...]) -> list[Any] | None:
    """``value`` as a list of members, or None for a single one (an instance of ``single``)."""
    if value is None or isinstance(value, single):
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be one or a list of them; got {type(value).__name__}")
    items = list(value)
    if not items:
        raise ValueError(f"{name} is an empty list: a batch needs at least one member")
    return items


def _batch_states(initial_states: Any) -> list[Any] | None:
    """The initial states as a list (a list, a tuple or a (B, d, d) array), or None
    for one (d, d) state shared by every member."""
    if initial_states is None:
        raise ValueError("initial_states must be given: a (d, d) density matrix or a list of them")
    if isinstance(initial_states, default_np.ndarray) and initial_states.ndim == 3:
        if initial_states.shape[0] == 0:
            raise ValueError("initial_states is empty: a batch needs at least one member")
        return list(initial_states)
    if isinstance(initial_states, list | tuple):
        if not initial_states:
            raise ValueError("initial_states is an empty list: a batch needs at least one member")
        if default_np.ndim(initial_states[0]) == 2 or hasattr(initial_states[0], "full"):
            return list(initial_states)
    return None  # one state (d, d), checked below


def _batch_parameters(parameters: Any) -> list[Any] | None:
    """The parameters as a list of B (2N, M) arrays (a list, or a (B, 2N, M) array),
    or None for one array shared by every member (or none at all)."""
    if parameters is None:
        return None
    if isinstance(parameters, default_np.ndarray) and parameters.ndim == 3:
        if parameters.shape[0] == 0:
            raise ValueError("parameters is empty: a batch needs at least one member")
        return list(parameters)
    if isinstance(parameters, list | tuple):
        if not parameters:
            raise ValueError("parameters is an empty list: a batch needs at least one member")
        if default_np.ndim(parameters[0]) == 2:
            return list(parameters)
    return None


def _batch_size(lengths: dict[str, int | None]) -> int:
    given = {name: n for name, n in lengths.items() if n is not None}
    sizes = set(given.values())
    if len(sizes) > 1:
        listed = ", ".join(f"{name}: {n}" for name, n in given.items())
        raise ValueError(
            f"the lists of a batch must have the same length (or be given once for all "
            f"members); got {listed}"
        )
    return sizes.pop() if sizes else 1


def batch_members(
    systems: Any, initial_states: Any, control: Any, parameters: Any = None
) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The members of a batch: per member its system, initial state, control and
    parameters (each given once for every member or as a list of B), checked for
    types and one shared dimension; TypeError/ValueError otherwise."""
    system_list = _as_members(systems, "systems", BaseSystem)
    state_list = _batch_states(initial_states)
    control_list = _as_members(control, "control", Control)
    parameter_list = _batch_parameters(parameters)
    batch = _batch_size(
        {
            "systems": None if system_list is None else len(system_list),
            "initial_states": None if state_list is None else len(state_list),
            "control": None if control_list is None else len(control_list),
            "parameters": None if parameter_list is None else len(parameter_list),
        }
    )
    first = system_list[0] if system_list else systems
    d = first.dimension if isinstance(first, BaseSystem) else 1
    # per member at least its state (three copies) and a pair of propagators (d^2, d^2)
    checks.affordable_run(
        1,
        d,
        0,
        "a batch",
        members=batch,
        unit="members",
        cause=f"{batch} members",
        held_bytes=batch * (3 * d**2 + 2 * d**4) * 16,
    )
    systems_b = system_list or [systems] * batch
    states_b = state_list or [initial_states] * batch
    controls_b = control_list or [control] * batch
    parameters_b = parameter_list or [parameters] * batch
    for m, member in enumerate(systems_b):
        if not isinstance(member, BaseSystem):
            raise TypeError(
                f"systems[{m}] must be a System or TimeDependentSystem; got {type(member).__name__}"
            )
        if parameters is not None and not isinstance(member, ParameterizedSystem):
            raise TypeError(
                f"parameters are given, so systems[{m}] must be a ParameterizedSystem; got "
                f"{type(member).__name__} (a batch with parameters is one of parameterized systems)"
            )
        if member.dimension != systems_b[0].dimension:
            raise ValueError(
                f"systems[{m}] has dimension {member.dimension} but systems[0] has "
                f"{systems_b[0].dimension}: the members of a batch share one dimension"
            )
    for m, member_control in enumerate(controls_b):
        if member_control is not None and not isinstance(member_control, Control):
            raise TypeError(
                f"control[{m}] must be a Control or None; got {type(member_control).__name__}"
            )
    return systems_b, states_b, controls_b, parameters_b


def check_member_runs(
    systems: list[Any],
    states: list[Any],
    controls: list[Any],
    process_tensor: Any,
    grid: tuple[Any, Any, Any, Any],
    parameterized: bool = False,
) -> tuple[list[Any], tuple[Any, ...]]:
    """Every member's run checked as ``compute_dynamics`` checks one (an error names
    the member): the initial states (d, d), and (process tensors, start_time, dt,
    num_steps, progress_type), shared by the members. ``grid``: (start_time, dt,
    num_steps, progress_type) as given."""
    start_time, dt, num_steps, progress_type = grid
    rho0 = []
    shared: tuple[Any, ...] = ()
    with hot_loop_threads():  # (the checks' eigenvalues: small matrices, one BLAS thread)
        for m, (system, state, control) in enumerate(zip(systems, states, controls)):
            try:
                pts, rho, start, step, steps, progress = check_dynamics_inputs(
                    system,
                    process_tensor,
                    state,
                    start_time,
                    dt,
                    num_steps,
                    control,
                    progress_type,
                    parameterized,
                )
            except (TypeError, ValueError) as error:
                raise type(error)(f"batch member {m}: {error}") from error
            rho0.append(rho)
            shared = shared or (pts, start, step, steps, progress)
    return rho0, shared


def compute_dynamics_batch(
    systems: BaseSystem | Sequence[BaseSystem],
    initial_states: Any = None,
    dt: float | None = None,
    num_steps: int | None = None,
    start_time: float = 0.0,
    process_tensor: Any = None,
    control: Control | Sequence[Control | None] | None = None,
    record_all: bool = True,
    subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
    liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    progress_type: str | None = None,
    options: EngineOptions | None = None,
    batch_bytes: int | None = None,
    parameters: Any = None,
) -> BatchedDynamics:
    """Reduced dynamics of a batch of B systems on the same process tensor(s).

    Parameters
    ----------
    systems : one System/TimeDependentSystem (for every member) or a list of B
        of them, all of one dimension d; time-independent and time-dependent
        systems may be mixed. With ``parameters``: one ParameterizedSystem (a
        family: every member with its own parameters) or a list of B of them.
    initial_states : one (d, d) density matrix (for every member), a list of B,
        or a (B, d, d) array.
    dt, num_steps, start_time : as for :func:`~nonmarkov.compute_dynamics`.
    process_tensor : a process tensor or a list of them (independent baths),
        shared by every member; or None (Lindblad dynamics of the systems alone).
    control : None, one :class:`~nonmarkov.Control` for every member, or a list
        of B controls (None for a member without).
    record_all : record every step (True) or only the final state.
    subdiv_limit, liouvillian_epsrel : quadrature settings for
        time-dependent systems.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).
    batch_bytes : bound (bytes) on the batched states of one chunk and their
        read-outs (default :data:`BATCH_BYTES`, 256 MiB); a larger batch runs in
        chunks, one after another.
    parameters : for ParameterizedSystem members, their control parameters:
        one (2N, M) array (row 2k: the first half of step k, 2k + 1 the second)
        for every member, a list of B such arrays, or a (B, 2N, M) array.

    The batch size B is the length of the lists given (those given once serve
    every member). Returns a :class:`~nonmarkov.io.batched_results.BatchedDynamics`:
    ``batch[m]`` is member m's :class:`~nonmarkov.Dynamics` (times start_time +
    k dt), ``batch.states`` all of them as (B, T, d, d). Raises TypeError/
    ValueError (an empty batch, lists of different lengths, systems of different
    dimensions, a state or control that does not fit) before any step.
    """
    record_all = check.boolean(record_all, "record_all")
    systems_b, states_b, controls_b, parameters_b = batch_members(
        systems, initial_states, control, parameters
    )
    batch = len(systems_b)
    if batch_bytes is not None:
        batch_bytes = check.positive_integer(batch_bytes, "batch_bytes")
    grid = (start_time, dt, num_steps, progress_type)
    # the grid from the first member, so that a batch that cannot finish is refused
    # before every member is checked
    _, (_, _, _, steps, _) = check_member_runs(
        systems_b[:1], states_b[:1], controls_b[:1], process_tensor, grid, parameters is not None
    )
    d = systems_b[0].dimension
    recorded = steps + 1 if record_all else min(steps, 1) + 1
    checks.affordable_run(
        steps,
        d,
        recorded * batch,
        "compute_dynamics_batch",
        members=batch,
        unit="member steps",
        cause=f"num_steps={steps}, {batch} members",
    )
    rho0, (process_tensors, start_time, dt, num_steps, progress_type) = check_member_runs(
        systems_b, states_b, controls_b, process_tensor, grid, parameters is not None
    )
    member_parameters: list[Any] = []
    checked_parameters: dict[int, Any] = {}
    if parameters is not None:
        for m in range(batch):
            original = id(parameters_b[m])  # a shared array is checked once
            if original not in checked_parameters:
                family = cast(ParameterizedSystem, systems_b[m])
                try:
                    checked_parameters[original] = family.check_parameters(
                        parameters_b[m], num_steps
                    )
                except (TypeError, ValueError) as error:
                    raise type(error)(f"batch member {m}: {error}") from error
            member_parameters.append(checked_parameters[original])

    with hot_loop_threads():  # (small matrices: one BLAS thread, also for the expms)
        readouts = _run_chunks(
            systems_b,
            member_parameters if parameters is not None else None,
            controls_b,
            rho0,
            process_tensors,
            start_time,
            dt,
            num_steps,
            record_all,
            progress_type,
            subdiv_limit,
            liouvillian_epsrel,
            options,
            batch_bytes or BATCH_BYTES,
        )
    initial = readouts.pop(0)
    vectors = default_np.concatenate(readouts, axis=1) if readouts else None
    states = default_np.concatenate(
        [initial[None], vectors if vectors is not None else initial[None, :0]], axis=0
    )  # (T, B, d^2)
    states = states.reshape(states.shape[0], batch, d, d).transpose(1, 0, 2, 3)
    steps_done = range(num_steps + 1) if record_all else [0] + [num_steps] * min(num_steps, 1)
    times = start_time + dt * default_np.asarray(list(steps_done), dtype=float)
    _check_states(states, steps_done, start_time, dt, controls_b)
    return BatchedDynamics(
        times,
        states,
        _metadata(systems_b, controls_b, process_tensors, start_time, dt, num_steps, record_all),
    )


def _run_chunks(
    systems_b: list[BaseSystem],
    parameters_b: list[Any] | None,
    controls_b: list[Control | None],
    rho0: list[Any],
    process_tensors: list[Any],
    start_time: float,
    dt: float,
    num_steps: int,
    record_all: bool,
    progress_type: str,
    subdiv_limit: int | None,
    liouvillian_epsrel: float,
    options: EngineOptions | None,
    batch_bytes: int,
) -> list[Any]:
    """[the initial states (B, d^2) after pre(0), then the read-outs (R, b, d^2) of
    each chunk]: the propagators of each distinct system and control once, the
    chunks one after another on the chain engine (runs with a member axis)."""
    batch = len(systems_b)
    d = systems_b[0].dimension
    distinct: dict[Any, Any] = {}
    propagators: list[Any] = []  # each member's propagators(k), one object per distinct system
    for m, member in enumerate(systems_b):
        if parameters_b is not None:
            key = (id(member), id(parameters_b[m]))
            if key not in distinct:
                family = cast(ParameterizedSystem, member)
                distinct[key] = family.get_propagators(dt, parameters_b[m])
            propagators.append(distinct[key])
            continue
        if id(member) not in distinct:
            distinct[id(member)] = member.get_propagators(
                dt, start_time, subdiv_limit, liouvillian_epsrel
            )
        propagators.append(distinct[id(member)])
    controls: dict[int, Any] = {}
    for member_control in controls_b:
        if id(member_control) not in controls:
            controls[id(member_control)] = chain_controls(member_control, dt, start_time)
    initial = default_np.asarray(rho0, dtype=complex).reshape(batch, d * d)
    for m, member_control in enumerate(controls_b):
        first_control = controls[id(member_control)][0]
        if first_control is not None:
            initial[m] = first_control @ initial[m]
    recorded = num_steps + 1 if record_all else min(num_steps, 1) + 1
    bonds = [int(max(pt.get_bond_dimensions(), default=1)) for pt in process_tensors]
    chunk = _chunk_size(batch, d, math.prod(bonds), recorded, batch_bytes)
    chunks = [range(lo, min(lo + chunk, batch)) for lo in range(0, batch, chunk)]
    engine = chain_engine(options, batch=True)
    results: list[Any] = [initial]
    with Progress(num_steps * len(chunks), progress_type, "dynamics") as bar:
        for members in chunks:
            run = ChainRun(
                initial=initial[members.start : members.stop],
                num_steps=num_steps,
                propagators=MemberPropagators(
                    [propagators[m] for m in members],
                    [type(systems_b[m]) is System for m in members],
                    d,
                    num_steps > 0,
                ),
                constant_propagators=all(type(systems_b[m]) is System for m in members),
                controls=member_controls([controls_b[m] for m in members], controls, d),
                process_tensors=process_tensors,
                record_all=record_all,
                on_step=bar.update,
            )
            results.append(engine.run(run))
    return results


def _chunk_size(batch: int, d: int, bond_product: int, recorded: int, limit: int) -> int:
    """Members per chunk: the state (B, bonds, d^2) and what a step makes of it
    (about four such arrays), the read-outs and the propagators within ``limit``."""
    member = 16 * d * d * (4 * bond_product + recorded + 2 * d * d)
    return max(1, min(batch, limit // member))


class MemberPropagators:
    """``propagators(k)`` of a chunk of members, from each member's own
    ``propagators(k)`` (one object per distinct system): (d^2, d^2) when one serves
    every member, else (b, d^2, d^2) stacks; the rows of time-independent members
    (``constant``) are computed once, the others at each step (once per distinct
    object). Returns the same arrays while nothing changes.

    ``members``: each member's ``propagators(k)`` -> (first half, second half);
    ``constant``: whether each member's system is time-independent; ``d``: the
    system dimension; ``run``: whether the run has steps at all."""

    def __init__(self, members: list[Any], constant: list[bool], d: int, run: bool):
        self._members = members
        self._shared = all(member is members[0] for member in members)
        self._varying = [m for m, fixed in enumerate(constant) if not fixed]
        self._stacks: tuple[Any, ...] | None = None
        if not self._shared and run:
            pairs = {id(member): member(0) for member, fixed in zip(members, constant) if fixed}
            identity = default_np.identity(d * d, dtype=complex)
            self._stacks = tuple(
                default_np.stack(
                    [
                        pairs[id(member)][half] if id(member) in pairs else identity
                        for member in members
                    ]
                )
                for half in (0, 1)
            )

    def __call__(self, step: int) -> tuple[Any, Any]:
        """The two half-step propagators of step ``step`` ((d^2, d^2) or stacks)."""
        if self._shared:
            return self._members[0](step)
        if self._stacks is None:
            raise ValueError("propagators of a run without steps")
        if not self._varying:
            return self._stacks[0], self._stacks[1]
        first, second = (stack.copy() for stack in self._stacks)
        pairs: dict[int, Any] = {}
        for m in self._varying:
            member = self._members[m]
            if id(member) not in pairs:
                pairs[id(member)] = member(step)
            first[m], second[m] = pairs[id(member)]
        return first, second


def member_controls(members: list[Control | None], controls: dict[int, Any], d: int) -> Any:
    """``controls(k)`` of a chunk: None without any control, the shared control's
    superoperators when one serves every member, else (b, d^2, d^2) stacks with the
    identity for members without a control at that step.

    ``members``: each member's control (or None); ``controls``: the
    :func:`~nonmarkov.methods.dynamics.chain_controls` pair of each distinct
    control by ``id``; ``d``: the system dimension."""
    if all(member is None for member in members):
        return None
    if all(member is members[0] for member in members):
        return controls[id(members[0])][1]
    identity = default_np.identity(d * d, dtype=complex)

    def stacked(step: int) -> tuple[Any, Any]:
        per_member: dict[int, Any] = {}
        for member in members:
            if member is not None and id(member) not in per_member:
                per_member[id(member)] = controls[id(member)][1](step)
        halves: list[Any] = []
        for half in (0, 1):
            rows = [None if member is None else per_member[id(member)][half] for member in members]
            if all(row is None for row in rows):
                halves.append(None)
            else:
                halves.append(default_np.stack([identity if row is None else row for row in rows]))
        return halves[0], halves[1]

    return stacked


def _check_states(
    states: Any, steps: Any, start_time: float, dt: float, controls: list[Control | None]
) -> None:
    """Each member's states through :func:`checks.finite_states` where the whole
    batch's quick test finds something (non-finite entries, a trace that drifts from
    the member's initial trace; states[:, 0] is the initial operator)."""
    if states.shape[1] < 2:
        return
    later = states[:, 1:]
    finite = default_np.all(default_np.isfinite(later.reshape(len(states), -1)), axis=1)
    initial = default_np.trace(states[:, 0], axis1=1, axis2=2)
    norms = default_np.linalg.svd(states[:, 0], compute_uv=False).sum(axis=1)
    scale = default_np.where(norms > 0, norms, 1.0)
    drift = default_np.abs(default_np.trace(later, axis1=2, axis2=3) - initial[:, None])
    suspicious = ~finite | default_np.any(
        drift > checks.TRACE_WARNING_TOLERANCE * scale[:, None], axis=1
    )
    first = list(steps)[1]
    for m in default_np.flatnonzero(suspicious):
        checks.finite_states(
            later[m],
            first,
            start_time,
            dt,
            f"compute_dynamics_batch (member {m})",
            controls[m] is None,
            initial=states[m, 0],
        )


def _metadata(
    systems: list[BaseSystem],
    controls: list[Control | None],
    process_tensors: list[Any],
    start_time: float,
    dt: float,
    num_steps: int,
    record_all: bool,
) -> list[dict]:
    """Each member's provenance (one per distinct system, copied per member)."""
    baths = [pt.metadata for pt in process_tensors]
    made: dict[int, dict] = {}
    records = []
    for m, member in enumerate(systems):
        if id(member) not in made:
            made[id(member)] = dynamics_metadata(
                "compute_dynamics_batch",
                member,
                start_time=start_time,
                dt=dt,
                num_steps=num_steps,
                record_all=record_all,
                process_tensors=baths,
                batch_size=len(systems),
            )
        records.append({**made[id(member)], "member": m, "control": controls[m] is not None})
    return records
