"""Multi-time correlation functions of the system from process tensors.

An n-time correlation applies system operators O_1, ..., O_n at grid times
t_1 <= ... <= t_n (each from the left, O rho, or from the right, rho O) to the
reduced state between the steps of the process-tensor contraction and takes
the trace after the last one:

    Tr[O_n^{side} L(t_n, t_{n-1}) ... O_2^{side} L(t_2, t_1) O_1^{side} L(t_1, t_0) rho_0],

where L(t', t) is the (non-Markovian) propagation by the system and every
process tensor, exactly as in :func:`~nonmarkov.compute_dynamics`, and the
open bonds at t_n are closed with the same "future caps". An operator at grid
time t_k = start_time + k dt acts on the state that ``compute_dynamics``
records at t_k: after the pre-controls of step k (a :class:`~nonmarkov.Control`
with ``post=False``) and before its post-controls (``post=True``), which act
on every branch alike.

Two-time correlations <B(t_b) A(t_a)> are the special cases
Tr[B L A L rho_0] (A from the left, for t_a <= t_b) and Tr[A L (L rho_0) B]
(B from the right, for t_b <= t_a).

All requested combinations are computed in one forward sweep over the time
grid: the state without operators is propagated once; at each time where an
operator acts, a copy of every state that may receive it gets it ("a branch"),
and all live branches are propagated together as one batch. A branch is
dropped once no later operator can act on it, so a prefix of the propagation
is never repeated. The sweep runs on the chain engine with a member axis: one system is a
batch of one member, :func:`~nonmarkov.compute_correlations_batch` many.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from .. import config
from .. import validation as check
from .._threads import hot_loop_threads
from ..engines import chain_engine
from ..engines.base import BranchStep, ChainRun
from ..model.control import Control
from ..model.operators import left_super, right_super
from ..model.system import BaseSystem, System
from ..options import EngineOptions
from ..process_tensors.base import BaseProcessTensor
from ..progress import Progress
from .batched_dynamics import MemberPropagators, member_controls
from .dynamics import chain_controls, check_dynamics_inputs

TIME_ORDERS = ("ordered", "anti", "full")
OPERATOR_SIDES = ("left", "right")


# --------------------------------------------------------------------------
# times: step indices from the OQuPy-style specifications
# --------------------------------------------------------------------------


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, default_np.integer)) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class OutsideGridError(ValueError, IndexError):
    """A time or step of ``ops_times`` that lies outside the run's grid: bad input (a
    ValueError) that is also an index out of range (an IndexError, as scripts that
    index the grid expect)."""


class TimeGrid:
    """The time grid t_k = start_time + k dt, k = 0..num_steps, of a correlation run
    (``start_time`` and ``dt`` in the system's time unit), and the rules by which
    OQuPy-style time specifications select its steps (:meth:`steps`)."""

    def __init__(self, start_time: float, dt: float, num_steps: int):
        self.start_time = start_time
        self.dt = dt
        self.num_steps = num_steps

    def describe(self) -> str:
        """The grid in words, for error messages."""
        end = self.start_time + self.num_steps * self.dt
        return f"steps 0..{self.num_steps}, times {self.start_time:g}..{end:g} (dt={self.dt:g})"

    def index_of_step(self, value: Any, name: str) -> int:
        """``value`` as a step index of the grid; ``OutsideGridError`` naming ``name``."""
        step = int(value)
        if not 0 <= step <= self.num_steps:
            raise OutsideGridError(f"{name}: step {step} is outside the grid ({self.describe()})")
        return step

    def index_of_time(self, value: Any, name: str) -> int:
        """The step nearest the time ``value``; ``OutsideGridError`` naming ``name``."""
        time = check.real_number(value, name)
        step = int(round((time - self.start_time) / self.dt))
        if not 0 <= step <= self.num_steps:
            raise OutsideGridError(
                f"{name}: time {time:g} (nearest step {step}) is outside the grid "
                f"({self.describe()})"
            )
        return step

    def index_of_slice(self, value: slice, name: str) -> list[int]:
        """The steps a slice of range(num_steps + 1) selects (at least one)."""
        steps = list(range(self.num_steps + 1)[value])
        if not steps:
            raise ValueError(f"{name}: {value} selects no step of the grid ({self.describe()})")
        return steps

    def steps(self, spec: Any, name: str) -> default_np.ndarray:
        """Step indices (1-d int array) selected by ``spec``.

        ``spec``: an int (step), a slice, a float (time, nearest step), a
        tuple (t0, t1) (every step from the one nearest t0 to the one nearest
        t1, in that direction), or a list/1-d array of ints, slices and floats.
        """
        if _is_integer(spec):
            return default_np.array([self.index_of_step(spec, name)])
        if isinstance(spec, slice):
            return default_np.array(self.index_of_slice(spec, name))
        if _is_real(spec):
            return default_np.array([self.index_of_time(spec, name)])
        if isinstance(spec, tuple):
            if len(spec) != 2 or not all(_is_real(t) for t in spec):
                raise TypeError(
                    f"{name}: a tuple must be a time interval (t0, t1) of two real "
                    f"numbers; got {spec!r}"
                )
            first = self.index_of_time(spec[0], f"{name}[0]")
            last = self.index_of_time(spec[1], f"{name}[1]")
            direction = 1 if last >= first else -1
            return default_np.arange(first, last + direction, direction)
        if isinstance(spec, default_np.ndarray) and spec.ndim == 1:
            spec = spec.tolist()
        if isinstance(spec, list):
            steps: list[int] = []
            for i, item in enumerate(spec):
                item_name = f"{name}[{i}]"
                if _is_integer(item):
                    steps.append(self.index_of_step(item, item_name))
                elif isinstance(item, slice):
                    steps.extend(self.index_of_slice(item, item_name))
                elif _is_real(item):
                    steps.append(self.index_of_time(item, item_name))
                else:
                    raise TypeError(
                        f"{item_name} must be a step (int), a slice or a time (float); got {item!r}"
                    )
            if not steps:
                raise ValueError(f"{name} is an empty list; give at least one time")
            return default_np.array(steps)
        raise TypeError(
            f"{name} must be a step (int), a slice, a list of steps and slices, a "
            f"time (float) or a time interval (t0, t1); got {spec!r}"
        )

    def times(self, steps: default_np.ndarray) -> default_np.ndarray:
        """Times of the step indices."""
        return self.start_time + self.dt * steps.astype(float)


# --------------------------------------------------------------------------
# the sweep over the time grid
# --------------------------------------------------------------------------


class OperatorChain:
    """One sequence of n operators: the superoperators (d^2, d^2) of all but the
    last, the readout vector (d^2,) of the last (:func:`readout_vector`).

    ``steps[j]``: sorted distinct steps at which operator j acts; the values
    end up in ``values[i_0, ..., i_{n-1}]`` (indices into ``steps``, complex),
    NaN where the steps are not non-decreasing; a sweep of b members puts a
    member axis in front. ``position[j]`` maps a step to its index in
    ``steps[j]``, ``last_step[j]`` is the last step of operator j.
    """

    def __init__(
        self,
        superoperators: list[default_np.ndarray],
        readout: default_np.ndarray,
        steps: list[default_np.ndarray],
    ):
        self.superoperators = superoperators
        self.readout = readout
        self.steps = [default_np.unique(s) for s in steps]
        self.position = [{int(k): i for i, k in enumerate(s)} for s in self.steps]
        self.last_step = [int(s[-1]) for s in self.steps]
        shape = tuple(len(s) for s in self.steps)
        self.values = default_np.full(
            shape, default_np.nan + 1j * default_np.nan, dtype=default_np.complex128
        )

    @property
    def length(self) -> int:
        """The number n of operators."""
        return len(self.steps)


class _Branch:
    """Bookkeeping of one branch: its chain, level (operators applied) and steps; within a
    grid time, the branch it comes from at the start of that time (``origin``) and the
    operators applied to it since (``ops``: (chain, level) pairs, in order)."""

    __slots__ = ("chain", "level", "indices", "origin", "ops")

    def __init__(
        self,
        chain: int | None,
        level: int,
        indices: tuple[int, ...],
        origin: int = 0,
        ops: tuple[tuple[int, int], ...] = (),
    ):
        self.chain = chain
        self.level = level
        self.indices = indices
        self.origin = origin
        self.ops = ops


def _composite(chains: list[OperatorChain], ops: tuple[tuple[int, int], ...]) -> Any:
    """The product of the superoperators ``ops`` (the first applied first), (d^2, d^2)."""
    product = chains[ops[0][0]].superoperators[ops[0][1]]
    for c, level in ops[1:]:
        product = chains[c].superoperators[level] @ product
    return product


def branch_schedule(
    chains: list[OperatorChain], end: int
) -> tuple[list[BranchStep], list[list[list[tuple[int, tuple[Any, ...]]]]]]:
    """The branch sweep of ``chains`` over the grid times 0..``end`` (no array work):
    per time, the :class:`~nonmarkov.engines.base.BranchStep` for the chain engine, and
    per read-out group the (chain, value index) each value goes to. The sweep ends at
    the first time after which no branch is left."""
    root_end = max(chain.last_step[0] for chain in chains)
    branches = [_Branch(None, 0, ())]
    steps: list[BranchStep] = []
    targets: list[list[list[tuple[int, tuple[Any, ...]]]]] = []
    for k in range(end + 1):
        for i, branch in enumerate(branches):
            branch.origin, branch.ops = i, ()
        readouts: dict[tuple[Any, ...], tuple[list[int], list[tuple[int, tuple[Any, ...]]]]] = {}
        for c, chain in enumerate(chains):
            for level in range(chain.length):
                position = chain.position[level].get(k)
                if position is None:
                    continue
                if level == 0:
                    parents = [b for b in branches if b.chain is None]
                else:
                    parents = [b for b in branches if b.chain == c and b.level == level]
                if level == chain.length - 1:
                    for parent in parents:
                        sources, where = readouts.setdefault((c,) + parent.ops, ([], []))
                        sources.append(parent.origin)
                        where.append((c, parent.indices + (position,)))
                else:
                    branches = branches + [
                        _Branch(
                            c, level + 1, p.indices + (position,), p.origin, p.ops + ((c, level),)
                        )
                        for p in parents
                    ]
        step_targets = []
        groups = []
        for (c, *ops), (sources, where) in readouts.items():
            vector = chains[c].readout
            if ops:
                vector = _composite(chains, tuple(ops)).T @ vector
            groups.append((default_np.asarray(sources), vector))
            step_targets.append(where)
        alive = [b for b in branches if _alive(b, chains, k, root_end)]
        kept = [b for b in alive if not b.ops]
        grouped: dict[tuple[tuple[int, int], ...], list[_Branch]] = {}
        for branch in alive:
            if branch.ops:
                grouped.setdefault(branch.ops, []).append(branch)
        children = [
            (_composite(chains, ops), default_np.asarray([b.origin for b in group]))
            for ops, group in grouped.items()
        ]
        steps.append(BranchStep(groups, default_np.asarray([b.origin for b in kept]), children))
        targets.append(step_targets)
        branches = kept + [b for group in grouped.values() for b in group]
        if not branches:
            break
    return steps, targets


class CorrelationSweep:
    """Propagates the branches of b members over the grid and reads out the chains:
    the branch schedule (:func:`branch_schedule`) run by the chain engine's ``sweep``,
    each member with its own propagators and controls; a chain's values get a leading
    member axis. One system is a batch of one.

    ``systems`` and ``controls``: one per member (one dimension d);
    ``process_tensors``: shared by the members; ``grid``: the :class:`TimeGrid`;
    ``subdiv_limit``, ``liouvillian_epsrel``: of the systems' propagators;
    ``options``: the engine options."""

    def __init__(
        self,
        systems: list[BaseSystem],
        controls: list[Control | None],
        process_tensors: list[Any],
        grid: TimeGrid,
        subdiv_limit: int | None,
        liouvillian_epsrel: float,
        options: EngineOptions | None,
    ):
        self.grid = grid
        self.d = systems[0].dimension
        distinct: dict[int, Any] = {}
        for member in systems:
            if id(member) not in distinct:
                distinct[id(member)] = member.get_propagators(
                    grid.dt, grid.start_time, subdiv_limit, liouvillian_epsrel
                )
        self.constant = all(type(member) is System for member in systems)
        self.propagators = MemberPropagators(
            [distinct[id(member)] for member in systems],
            [type(member) is System for member in systems],
            self.d,
            grid.num_steps > 0,
        )
        made = {
            id(c): chain_controls(c, grid.dt, grid.start_time) for c in controls
        }  # (initial, controls(k)) per distinct control
        self.initial_controls = [made[id(c)][0] for c in controls]
        self.controls = member_controls(controls, made, self.d)
        self.engine = chain_engine(options, batch=True)
        self.process_tensors = process_tensors

    def run(
        self, rho0: default_np.ndarray, chains: list[OperatorChain], progress: Progress
    ) -> None:
        """Fill ``chain.values`` (b, ...) of every chain for the members' ``rho0`` (b, d, d)."""
        end = max(chain.last_step[-1] for chain in chains)
        steps, targets = branch_schedule(chains, end)
        vectors = default_np.asarray(rho0, dtype=complex).reshape(len(rho0), -1)
        for m, initial in enumerate(self.initial_controls):
            if initial is not None:  # the state recorded at t_0
                vectors[m] = initial @ vectors[m]
        run = ChainRun(
            initial=vectors,
            num_steps=len(steps) - 1,
            propagators=self.propagators,
            constant_propagators=self.constant,
            controls=self.controls,
            process_tensors=self.process_tensors,
            record_all=True,
            on_step=progress.update,
        )
        values = self.engine.sweep(run, steps)
        for step_values, step_targets in zip(values, targets):
            for group, where in zip(step_values, step_targets):
                for j, (c, index) in enumerate(where):
                    chains[c].values[(slice(None),) + index] = group[:, j]


def _alive(branch: _Branch, chains: list[OperatorChain], k: int, root_end: int) -> bool:
    """Whether an operator may still act on ``branch`` after step ``k``."""
    if branch.chain is None:
        return k < root_end
    return k < chains[branch.chain].last_step[branch.level]


def _sweep_one(
    system: BaseSystem,
    pts: list[BaseProcessTensor],
    grid: TimeGrid,
    control: Control | None,
    settings: tuple[int | None, float, EngineOptions | None],
    rho0: default_np.ndarray,
    chains: list[OperatorChain],
    progress_type: str,
) -> None:
    """Fill ``chain.values`` of every chain for one system: a batch of one member.
    ``settings``: (subdiv_limit, liouvillian_epsrel, options)."""
    subdiv_limit, liouvillian_epsrel, options = settings
    end = max(chain.last_step[-1] for chain in chains)
    for chain in chains:
        chain.values = chain.values[None]
    with hot_loop_threads(), Progress(end, progress_type, "correlations") as progress:
        sweep = CorrelationSweep(
            [system], [control], pts, grid, subdiv_limit, liouvillian_epsrel, options
        )
        sweep.run(rho0[None], chains, progress)
    for chain in chains:
        chain.values = chain.values[0]


# --------------------------------------------------------------------------
# input checks shared by the public functions
# --------------------------------------------------------------------------


def _prepare(
    system: Any,
    process_tensor: Any,
    initial_state: Any,
    start_time: Any,
    dt: Any,
    num_steps: Any,
    control: Any,
    progress_type: Any,
) -> tuple[list[BaseProcessTensor], default_np.ndarray, TimeGrid, str]:
    process_tensors, rho0, start_time, dt, num_steps, progress_type = check_dynamics_inputs(
        system, process_tensor, initial_state, start_time, dt, num_steps, control, progress_type
    )
    return process_tensors, rho0, TimeGrid(start_time, dt, num_steps), progress_type


def readout_vector(operator: default_np.ndarray) -> default_np.ndarray:
    """The (d^2,) vector r with r . vec(X) = Tr(operator X) for a (d, d) ``operator``
    (row-major vec): the read-out of the last operator of a chain."""
    return operator.T.reshape(-1)


# --------------------------------------------------------------------------
# public functions
# --------------------------------------------------------------------------


def compute_correlations(
    system: BaseSystem,
    process_tensor: Any,
    operator_a: Any,
    operator_b: Any,
    times_a: Any,
    times_b: Any,
    time_order: str = "ordered",
    initial_state: Any = None,
    start_time: float = 0.0,
    dt: float | None = None,
    progress_type: str | None = None,
    *,
    control: Control | None = None,
    num_steps: int | None = None,
    subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
    liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    options: EngineOptions | None = None,
) -> tuple[list[default_np.ndarray], default_np.ndarray]:
    """Two-time correlations <B(t_b) A(t_a)> of the system.

    Parameters
    ----------
    system : System or TimeDependentSystem (dimension d).
    process_tensor : a process tensor, a list of them (independent baths,
        each in its own basis, as in ``compute_dynamics``) or None.
    operator_a, operator_b : (d, d) system operators A and B.
    times_a, times_b : the times t_a and t_b on the grid
        t_k = start_time + k dt, k = 0..N (N = the process tensor's length):
        a step k (int), a slice of steps, a list of steps and slices, a time
        (float; the nearest grid time) or an interval (t0, t1) of times (every
        step from the one nearest t0 to the one nearest t1).
    time_order : ``'ordered'`` (only t_a <= t_b: Tr[B L(t_b, t_a) A rho(t_a)]),
        ``'anti'`` (only t_a >= t_b: Tr[A L(t_a, t_b) rho(t_b) B]) or
        ``'full'`` (every pair, each by the rule that fits it).
    initial_state : (d, d) density matrix at ``start_time``, or any (d, d)
        operator (the correlations are linear in it).
    start_time : time of step 0.
    dt : time step; taken from the process tensor(s) if None.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.
    control : optional :class:`Control`, applied as in ``compute_dynamics``;
        an operator at t_k acts after the pre-controls of step k and before
        its post-controls.
    num_steps : grid length N; required without a process tensor, at most
        the process tensor's length otherwise (default: its length).
    subdiv_limit, liouvillian_epsrel : quadrature settings for
        time-dependent systems.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).

    Returns
    -------
    times : [times_a (n_a,), times_b (n_b,)], the grid times selected.
    correlations : (n_a, n_b) complex array; entry [i, j] is
        <B(times_b[j]) A(times_a[i])>, NaN + NaN j for pairs outside
        ``time_order``.
    """
    time_order = check.choice(time_order, TIME_ORDERS, "time_order")
    pts, rho0, grid, progress_type = _prepare(
        system, process_tensor, initial_state, start_time, dt, num_steps, control, progress_type
    )
    d = system.dimension
    a = check.square_matrix(operator_a, "operator_a", d)
    b = check.square_matrix(operator_b, "operator_b", d)
    steps_a = grid.steps(times_a, "times_a")
    steps_b = grid.steps(times_b, "times_b")
    chains = []
    if time_order in ("ordered", "full"):
        chains.append(OperatorChain([left_super(a)], readout_vector(b), [steps_a, steps_b]))
    if time_order in ("anti", "full"):
        chains.append(OperatorChain([right_super(b)], readout_vector(a), [steps_b, steps_a]))
    _sweep_one(
        system,
        pts,
        grid,
        control,
        (subdiv_limit, liouvillian_epsrel, options),
        rho0,
        chains,
        progress_type,
    )
    rows = [chains[0].position[0 if time_order != "anti" else 1][int(k)] for k in steps_a]
    columns = [chains[0].position[1 if time_order != "anti" else 0][int(k)] for k in steps_b]
    if time_order == "anti":
        dense = chains[0].values.T
    else:
        dense = chains[0].values
        if time_order == "full":
            later_a = chains[0].steps[0][:, None] > chains[0].steps[1][None, :]
            dense = default_np.where(later_a, chains[1].values.T, dense)
    correlations = dense[default_np.ix_(rows, columns)]
    return [grid.times(steps_a), grid.times(steps_b)], correlations


def compute_correlations_nt(
    system: BaseSystem,
    process_tensor: Any,
    operators: Sequence[Any],
    ops_times: Sequence[Any],
    ops_order: Sequence[str],
    initial_state: Any = None,
    start_time: float = 0.0,
    dt: float | None = None,
    progress_type: str | None = None,
    *,
    control: Control | None = None,
    num_steps: int | None = None,
    subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
    liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    options: EngineOptions | None = None,
) -> tuple[list[default_np.ndarray], default_np.ndarray]:
    """n-time correlations Tr[... O_2^{side} L O_1^{side} L rho_0] of the system.

    Operator j acts at the times ``ops_times[j]`` from the side
    ``ops_order[j]`` (``'left'``: O rho, ``'right'``: rho O); operators are
    applied in list order (at equal times too), and the trace is taken after
    the last. For example <C(t_3) B(t_2) A(t_1)> with t_1 <= t_2 <= t_3 is
    ``operators=[A, B, C]``, ``ops_order=['left', 'left', 'left']``, and
    Tr[B(t_2) rho A(t_1)] is ``operators=[A, B]``, ``ops_order=['right', 'left']``.

    Parameters
    ----------
    system : System or TimeDependentSystem (dimension d).
    process_tensor : a process tensor, a list of them, or None.
    operators : n (d, d) system operators.
    ops_times : n time specifications, each as ``times_a`` of
        :func:`compute_correlations`.
    ops_order : n strings, ``'left'`` or ``'right'``.
    initial_state, start_time, dt, progress_type, control, num_steps,
    subdiv_limit, liouvillian_epsrel, options : as in :func:`compute_correlations`.

    Returns
    -------
    times : list of n arrays, the grid times selected for each operator.
    correlations : complex array of shape (n_1, ..., n_n); entries whose
        times are not non-decreasing in operator order are NaN + NaN j.
    """
    pts, rho0, grid, progress_type = _prepare(
        system, process_tensor, initial_state, start_time, dt, num_steps, control, progress_type
    )
    d = system.dimension
    for value, name in (
        (operators, "operators"),
        (ops_times, "ops_times"),
        (ops_order, "ops_order"),
    ):
        if isinstance(value, (str, default_np.ndarray)) or not isinstance(value, Sequence):
            raise TypeError(f"{name} must be a list with one entry per operator; got {value!r}")
    n = len(operators)
    if n == 0:
        raise ValueError("operators must hold at least one operator")
    if len(ops_times) != n or len(ops_order) != n:
        raise ValueError(
            f"operators, ops_times and ops_order must have the same length; got "
            f"{n}, {len(ops_times)} and {len(ops_order)}"
        )
    matrices = [check.square_matrix(op, f"operators[{j}]", d) for j, op in enumerate(operators)]
    sides = [
        check.choice(side, OPERATOR_SIDES, f"ops_order[{j}]") for j, side in enumerate(ops_order)
    ]
    steps = [grid.steps(spec, f"ops_times[{j}]") for j, spec in enumerate(ops_times)]
    superoperators = [
        left_super(m) if side == "left" else right_super(m)
        for m, side in zip(matrices[:-1], sides[:-1])
    ]
    chain = OperatorChain(superoperators, readout_vector(matrices[-1]), steps)
    _sweep_one(
        system,
        pts,
        grid,
        control,
        (subdiv_limit, liouvillian_epsrel, options),
        rho0,
        [chain],
        progress_type,
    )
    index = [[chain.position[j][int(k)] for k in s] for j, s in enumerate(steps)]
    return [grid.times(s) for s in steps], chain.values[default_np.ix_(*index)]
