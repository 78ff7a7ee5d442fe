"""``compute_dynamics``: reduced dynamics from process tensors and a system.

Step k takes rho(t_k) to rho(t_k + dt): pre-control, first half step of the
system, each process tensor's step k (in its own basis), second half step,
post-control. The state at t_{k+1} is read out by closing every process
tensor's open bond with a "future cap": its remaining steps contracted with
a trace-and-reprepare (maximally mixed) future, which a causal process tensor
makes independent of the future (exactly so for the untruncated one).

Several process tensors (independent baths) are applied one after another at
each step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as default_np

from . import _validation as check
from . import config
from ._threads import hot_loop_threads
from .backends.host import to_backend
from .backends.numerical_backend import np
from .control import Control
from .process_tensor import BaseProcessTensor, TrivialProcessTensor
from .progress import Progress, check_progress_type
from .results import Dynamics
from .system import BaseSystem
from .tn.chain import apply_step_tensor, apply_superoperator, close_bonds, future_caps

_DT_TOLERANCE = 1e-10


def _as_process_tensor_list(process_tensor: Any) -> list[BaseProcessTensor]:
    if process_tensor is None:
        return []
    items = list(process_tensor) if isinstance(process_tensor, Sequence) else [process_tensor]
    for i, item in enumerate(items):
        if not isinstance(item, BaseProcessTensor):
            raise TypeError(f"process_tensor[{i}] must be a process tensor; "
                            f"got {type(item).__name__}")
    return [item for item in items if not isinstance(item, TrivialProcessTensor)]


def _resolve_grid(process_tensors: list[BaseProcessTensor], dt: float | None,
                  num_steps: int | None) -> tuple[float, int]:
    """Check that the process tensors fit the requested dt and num_steps."""
    if dt is not None:
        dt = check.positive_number(dt, "dt")
    if num_steps is not None:
        num_steps = check.positive_integer(num_steps, "num_steps", minimum=0)
    for i, pt in enumerate(process_tensors):
        if dt is None:
            dt = pt.dt
        elif abs(pt.dt - dt) > _DT_TOLERANCE * max(1.0, dt):
            raise ValueError(f"process tensor {i} has dt={pt.dt}, which does not fit dt={dt}")
    if process_tensors:
        shortest = min(len(pt) for pt in process_tensors)
        if num_steps is None:
            num_steps = shortest
        elif num_steps > shortest:
            raise ValueError(f"num_steps={num_steps} exceeds the length of the process tensor "
                             f"({shortest} steps)")
    if dt is None or num_steps is None:
        raise ValueError("without a process tensor, dt and num_steps must be given")
    return dt, num_steps


class _ProcessTensorOnBackend:
    """A process tensor's steps, transforms and caps as backend arrays."""

    def __init__(self, pt: BaseProcessTensor, num_steps: int):
        d = pt.dimension
        self.transform_in = to_backend(pt.transform_in)
        self.transform_out = to_backend(pt.transform_out)
        tensors, classes = [], None
        for step in range(len(pt)):
            tensor, classes = pt.get_step_tensor(step)
            tensors.append(to_backend(tensor))
        self.tensors = tensors[:num_steps]
        self.classes = np.asarray(classes)
        # trace-and-reprepare future: weight 1/d on each diagonal index (a, a)
        weights = default_np.zeros(int(classes.max()) + 1)
        for a in range(d):
            weights[classes[a * d + a]] += 1.0 / d
        self.caps = future_caps(tensors, to_backend(weights))[:num_steps]


class _PropagatorTransfer:
    """Moves half-step propagators to the backend, once for a constant system.

    ``System`` returns the same arrays at every step; they are transferred
    once instead of twice per step.
    """

    def __init__(self):
        self._host: tuple[Any, Any] | None = None
        self._device: tuple[Any, Any] | None = None

    def __call__(self, first: Any, second: Any) -> tuple[Any, Any]:
        if self._host is None or first is not self._host[0] or second is not self._host[1]:
            self._host = (first, second)
            self._device = (to_backend(first), to_backend(second))
        return self._device


def compute_dynamics(system: BaseSystem, initial_state: Any = None, dt: float | None = None,
                     num_steps: int | None = None, start_time: float = 0.0,
                     process_tensor: Any = None, control: Control | None = None,
                     record_all: bool = True,
                     subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
                     liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
                     progress_type: str | None = None) -> Dynamics:
    """Reduced dynamics of ``system`` coupled to the baths of ``process_tensor``.

    Parameters
    ----------
    system : System or TimeDependentSystem (dimension d).
    initial_state : (d, d) density matrix at ``start_time``.
    dt : time step; taken from the process tensor(s) if None.
    num_steps : number of steps; the process tensors' length if None.
    start_time : time of the initial state.
    process_tensor : a process tensor, a list of them (independent baths),
        or None (no bath: Lindblad dynamics of the system alone).
    control : optional :class:`Control`.
    record_all : record every step (True) or only the final state.
    subdiv_limit, liouvillian_epsrel : quadrature settings for
        time-dependent systems.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.

    Returns a :class:`Dynamics` with times start_time + k dt.
    """
    if not isinstance(system, BaseSystem):
        raise TypeError(f"system must be a System or TimeDependentSystem; "
                        f"got {type(system).__name__}")
    if initial_state is None:
        raise ValueError("initial_state must be given: a (d, d) density matrix")
    rho0 = check.density_matrix(initial_state, "initial_state", system.dimension)
    start_time = check.real_number(start_time, "start_time")
    progress_type = check_progress_type(progress_type)
    if control is not None and not isinstance(control, Control):
        raise TypeError(f"control must be a Control; got {type(control).__name__}")
    if control is not None and control.dimension != system.dimension:
        raise ValueError(f"control has dimension {control.dimension}, the system "
                         f"{system.dimension}")
    process_tensors = _as_process_tensor_list(process_tensor)
    for i, pt in enumerate(process_tensors):
        if pt.dimension != system.dimension:
            raise ValueError(f"process tensor {i} has dimension {pt.dimension} but the system "
                             f"has dimension {system.dimension}")
    dt, num_steps = _resolve_grid(process_tensors, dt, num_steps)
    propagators = system.get_propagators(dt, start_time, subdiv_limit, liouvillian_epsrel)
    on_backend = [_ProcessTensorOnBackend(pt, num_steps) for pt in process_tensors]
    num_bonds = len(on_backend)
    d = system.dimension

    on_device = _PropagatorTransfer()
    dynamics = Dynamics(name="dynamics")
    dynamics.add(start_time, rho0)
    state = to_backend(rho0.reshape((1,) * num_bonds + (d * d,)))
    with hot_loop_threads(), Progress(num_steps, progress_type, "dynamics") as progress:
        for step in range(num_steps):
            pre, post = (None, None) if control is None else control.get_controls(
                step, dt, start_time)
            first, second = on_device(*propagators(step))
            if pre is not None:
                state = apply_superoperator(state, to_backend(pre))
            state = apply_superoperator(state, first)
            for axis, pt in enumerate(on_backend):
                state = apply_superoperator(state, pt.transform_in)
                state = apply_step_tensor(state, pt.tensors[step], pt.classes, axis)
                state = apply_superoperator(state, pt.transform_out)
            state = apply_superoperator(state, second)
            if post is not None:
                state = apply_superoperator(state, to_backend(post))
            if record_all or step == num_steps - 1:
                vector = close_bonds(state, [pt.caps[step] for pt in on_backend])
                rho = default_np.asarray(np.to_host(vector)).reshape(d, d)
                dynamics.add(start_time + (step + 1) * dt, rho)
            progress.update()
    return dynamics
