"""``compute_correlations_batch``: two-time correlations of a batch of systems on
the same process tensor(s), in one batched sweep over the time grid.

Member m is what ``compute_correlations(systems[m], ..., initial_state=
initial_states[m], control=controls[m])`` gives (to rounding). The sweep is
that of :mod:`nonmarkov.methods.system_correlations` (the state without operators
propagated once, a branch for each time an operator acts, all live branches
propagated together), with one more axis in front: the members: the chain
engine's branch sweep (``sweep``, :mod:`nonmarkov.engines`), every step one batched
contraction of all members and branches, with each member's propagators and
controls. The operators and times are shared by the members.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as default_np

from .. import config
from .. import validation as check
from .._threads import hot_loop_threads
from ..model.control import Control
from ..model.operators import left_super, right_super
from ..model.system import BaseSystem
from ..options import EngineOptions
from ..progress import Progress
from . import checks
from .batched_dynamics import BATCH_BYTES, batch_members, check_member_runs
from .system_correlations import (
    TIME_ORDERS,
    CorrelationSweep,
    OperatorChain,
    TimeGrid,
    readout_vector,
)


def compute_correlations_batch(
    systems: BaseSystem | list[BaseSystem],
    process_tensor: Any,
    operator_a: Any,
    operator_b: Any,
    times_a: Any,
    times_b: Any,
    time_order: str = "ordered",
    initial_states: Any = None,
    start_time: float = 0.0,
    dt: float | None = None,
    progress_type: str | None = None,
    *,
    control: Control | list[Control | None] | None = None,
    num_steps: int | None = None,
    subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
    liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    options: EngineOptions | None = None,
    batch_bytes: int | None = None,
) -> tuple[list[default_np.ndarray], default_np.ndarray]:
    """Two-time correlations <B(t_b) A(t_a)> of B systems on the same process tensor(s).

    Parameters
    ----------
    systems : one System/TimeDependentSystem or a list of B (one dimension d).
    process_tensor, operator_a, operator_b, times_a, times_b, time_order,
    start_time, dt, progress_type, num_steps, subdiv_limit, liouvillian_epsrel,
    options : as for :func:`~nonmarkov.compute_correlations` (shared by every member).
    initial_states : one (d, d) density matrix, a list of B or a (B, d, d) array.
    control : None, one :class:`~nonmarkov.Control`, or a list of B (None for a
        member without).
    batch_bytes : bound (bytes) on the batched states of one chunk of members
        (all their branches); default 256 MiB.

    Returns
    -------
    times : [times_a (n_a,), times_b (n_b,)], the grid times selected.
    correlations : (B, n_a, n_b) complex; ``correlations[m]`` is member m's
        result of ``compute_correlations`` (NaN + NaN j outside ``time_order``).
    """
    time_order = check.choice(time_order, TIME_ORDERS, "time_order")
    systems_b, states_b, controls_b, _ = batch_members(systems, initial_states, control)
    batch = len(systems_b)
    if batch_bytes is not None:
        batch_bytes = check.positive_integer(batch_bytes, "batch_bytes")
    rho0, (pts, start, step, steps, progress_type) = check_member_runs(
        systems_b, states_b, controls_b, process_tensor, (start_time, dt, num_steps, progress_type)
    )
    grid = TimeGrid(start, step, steps)
    d = systems_b[0].dimension
    a = check.square_matrix(operator_a, "operator_a", d)
    b = check.square_matrix(operator_b, "operator_b", d)
    steps_a = grid.steps(times_a, "times_a")
    steps_b = grid.steps(times_b, "times_b")
    chains = []
    if time_order in ("ordered", "full"):
        chains.append(OperatorChain([left_super(a)], readout_vector(b), [steps_a, steps_b]))
    if time_order in ("anti", "full"):
        chains.append(OperatorChain([right_super(b)], readout_vector(a), [steps_b, steps_a]))
    branches = 1 + sum(len(chain.steps[0]) for chain in chains)
    checks.affordable_run(
        grid.num_steps,
        d,
        0,
        "compute_correlations_batch",
        members=batch * branches,
        unit="member-branch steps (at most)",
        cause=f"{grid.num_steps} steps, {batch} members, {branches} branches each",
    )
    bonds = [int(max(pt.get_bond_dimensions(), default=1)) for pt in pts]
    member_bytes = 16 * d * d * (4 * math.prod(bonds) * branches + 2 * d * d)
    chunk = max(1, min(batch, (batch_bytes or BATCH_BYTES) // member_bytes))
    values = [default_np.full((batch,) + c.values.shape, complex("nan+nanj")) for c in chains]
    with (
        hot_loop_threads(),
        Progress(grid.num_steps * math.ceil(batch / chunk), progress_type, "correlations") as bar,
    ):
        for lo in range(0, batch, chunk):
            members = range(lo, min(lo + chunk, batch))
            sweep = CorrelationSweep(
                [systems_b[m] for m in members],
                [controls_b[m] for m in members],
                pts,
                grid,
                subdiv_limit,
                liouvillian_epsrel,
                options,
            )
            for chain, chain_values in zip(chains, values):
                chain.values = default_np.full(
                    (len(members),) + chain_values.shape[1:], complex("nan+nanj")
                )
            sweep.run(default_np.asarray([rho0[m] for m in members]), chains, bar)
            for chain, chain_values in zip(chains, values):
                chain_values[members.start : members.stop] = chain.values
    rows = [chains[0].position[0 if time_order != "anti" else 1][int(k)] for k in steps_a]
    columns = [chains[0].position[1 if time_order != "anti" else 0][int(k)] for k in steps_b]
    if time_order == "anti":
        dense = values[0].transpose(0, 2, 1)
    else:
        dense = values[0]
        if time_order == "full":
            later_a = chains[0].steps[0][:, None] > chains[0].steps[1][None, :]
            dense = default_np.where(later_a[None], values[1].transpose(0, 2, 1), dense)
    correlations = dense[:, rows][:, :, columns]
    return [grid.times(steps_a), grid.times(steps_b)], correlations
