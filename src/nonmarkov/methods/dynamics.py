"""``compute_dynamics``: reduced dynamics from process tensors and a system.

Step k takes rho(t_k) to rho(t_k + dt): pre-control, first half step of the
system, each process tensor's step k (in its own basis), second half step,
post-control. The state at t_{k+1} is read out by closing every process
tensor's open bond with a "future cap": its remaining steps contracted with
a trace-and-reprepare (maximally mixed) future, which a causal process tensor
makes independent of the future (exactly so for the untruncated one).

Several process tensors (independent baths) are applied one after another at
each step.

Step tensors reach the backend one step at a time: the caps are computed in
one backward pass over the process tensor that keeps only the cap vectors
(and, up to a fixed budget, the earliest step tensors), and the forward pass
fetches each step tensor when it needs it, so a process tensor read from a
file never has to fit in memory. A :class:`SimpleProcessTensor`, already in
memory, is moved to the backend whole instead (one transfer per tensor).

With the JAX backend, a time-independent :class:`System` without control and
in-memory process tensors run as one compiled ``lax.scan`` over the steps
(:func:`nonmarkov.engines.jax.chain.run_chain`): the step tensors are padded
to one bond dimension and stacked, moved to the device once, and the
read-outs come back in one transfer at the end. Anything else (a
time-dependent system, a control, a process tensor read from a file) runs
the step loop below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as default_np

from .. import config
from .. import validation as check
from .._threads import hot_loop_threads
from ..backends.host import to_backend
from ..backends.numerical_backend import np
from ..io.results import Dynamics
from ..kernels.chain import (
    apply_step_tensor,
    apply_superoperator,
    cap_before,
    close_bonds,
    future_caps,
)
from ..model.control import Control
from ..model.system import BaseSystem, System
from ..process_tensors.base import (
    BaseProcessTensor,
    SimpleProcessTensor,
    TrivialProcessTensor,
    trace_weights,
)
from ..process_tensors.uniform import UniformProcessTensor
from ..progress import Progress, check_progress_type

_DT_TOLERANCE = 1e-10
# step tensors of a streamed process tensor kept on the host between the
# backward (caps) and the forward pass, so that a small one is read only once
_STREAM_CACHE_BYTES = 64 * 2**20
# largest stacked, padded step tensors (all process tensors) run by the compiled scan
_SCAN_BYTES = 2 * 2**30

def _as_process_tensor_list(process_tensor: Any, num_steps: Any) -> list[BaseProcessTensor]:
    """The non-trivial process tensors, a :class:`UniformProcessTensor` made finite.

    A uniform process tensor has no length: it runs for ``num_steps``, or
    for the length of the shortest finite process tensor next to it.
    """

    if process_tensor is None:
        return []
    items = list(process_tensor) if isinstance(process_tensor, Sequence) else [process_tensor]
    for i, item in enumerate(items):
        if not isinstance(item, (BaseProcessTensor, UniformProcessTensor)):
            raise TypeError(f"process_tensor[{i}] must be a process tensor; "
                            f"got {type(item).__name__}")
    items = [item for item in items if not isinstance(item, TrivialProcessTensor)]
    if not any(isinstance(item, UniformProcessTensor) for item in items):
        return items
    if num_steps is None:
        finite = [len(item) for item in items if isinstance(item, BaseProcessTensor)]
        if not finite:
            raise ValueError("a UniformProcessTensor runs for any number of steps: give "
                             "num_steps")
        num_steps = min(finite)
    num_steps = check.positive_integer(num_steps, "num_steps", minimum=1)
    return [item.to_process_tensor(num_steps) if isinstance(item, UniformProcessTensor)
            else item for item in items]

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

def check_dynamics_inputs(system: Any, process_tensor: Any, initial_state: Any, start_time: Any,
                          dt: Any, num_steps: Any, control: Any, progress_type: Any
                          ) -> tuple[list[BaseProcessTensor], default_np.ndarray, float, float,
                                     int, str]:
    """Check the arguments shared by the functions that propagate a system.

    Returns (process tensors without trivial ones, rho0 (d, d), start_time,
    dt, num_steps, progress_type); raises TypeError/ValueError naming the
    argument otherwise.
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
    process_tensors = _as_process_tensor_list(process_tensor, num_steps)
    for i, pt in enumerate(process_tensors):
        if pt.dimension != system.dimension:
            raise ValueError(f"process tensor {i} has dimension {pt.dimension} but the system "
                             f"has dimension {system.dimension}")
    dt, num_steps = _resolve_grid(process_tensors, dt, num_steps)
    return process_tensors, rho0, start_time, dt, num_steps, progress_type

class ProcessTensorOnBackend:
    """A process tensor's transforms and caps on the backend, step tensors on request.

    ``caps[k]`` closes the bond after step k (for the steps that are read
    out). A :class:`SimpleProcessTensor` is moved to the backend whole, once;
    any other process tensor is read step by step, backward for the caps and
    forward for the dynamics, never held whole: the earliest steps read by
    the backward pass (up to ``_STREAM_CACHE_BYTES``) are kept for the forward
    pass, the others are read again.
    """

    def __init__(self, pt: BaseProcessTensor, num_steps: int, record_all: bool):
        self._pt = pt
        self.transform_in = to_backend(pt.transform_in)
        self.transform_out = to_backend(pt.transform_out)
        self._tensors: list[Any] | None = None
        self._cache: dict[int, default_np.ndarray] = {}
        self.caps: dict[int, Any] = {}
        self.classes = None
        length = len(pt)
        if num_steps == 0 or length == 0:
            return
        last, classes = pt.get_step_tensor(length - 1)
        self.classes = np.asarray(classes)
        weights = to_backend(trace_weights(classes, pt.dimension))
        if isinstance(pt, SimpleProcessTensor):
            tensors = [to_backend(pt.get_step_tensor(step)[0]) for step in range(length)]
            self._tensors = tensors[:num_steps]
            self.caps = dict(enumerate(future_caps(tensors, weights)[:num_steps]))
            return
        lowest = 0 if record_all else num_steps - 1
        cap = np.ones((last.shape[1],), dtype=np.dtype_complex)
        cached_bytes = 0
        for step in range(length - 1, lowest - 1, -1):
            if step < num_steps and (record_all or step == lowest):
                self.caps[step] = cap
            if step > lowest:
                tensor = last if step == length - 1 else pt.get_step_tensor(step)[0]
                cap = cap_before(to_backend(tensor), weights, cap)
                if step < num_steps:  # keep the earliest steps (dict order: descending)
                    self._cache[step] = tensor
                    cached_bytes += tensor.nbytes
                    while cached_bytes > _STREAM_CACHE_BYTES and self._cache:
                        cached_bytes -= self._cache.pop(next(iter(self._cache))).nbytes

    def tensor(self, step: int) -> Any:
        """Step tensor T[b, b', c] of ``step`` on the backend."""
        if self._tensors is not None:
            return self._tensors[step]
        tensor = self._cache.pop(step, None)
        if tensor is None:
            tensor = self._pt.get_step_tensor(step)[0]
        return to_backend(tensor)

def propagate_step(state: Any, step: int, first: Any, second: Any,
                   process_tensors: list[ProcessTensorOnBackend], pre: Any = None,
                   post: Any = None) -> Any:
    """Take ``state`` (bonds..., [batch,] d^2) from t_step to t_step+1.

    Pre-control, first half step, each process tensor's step ``step`` in its
    own basis (bond axis = its position in the list), second half step,
    post-control. ``first``/``second`` are backend arrays; ``pre``/``post``
    host (d^2, d^2) arrays or None.
    """
    if pre is not None:
        state = apply_superoperator(state, to_backend(pre))
    state = apply_superoperator(state, first)
    for axis, pt in enumerate(process_tensors):
        state = apply_superoperator(state, pt.transform_in)
        state = apply_step_tensor(state, pt.tensor(step), pt.classes, axis)
        state = apply_superoperator(state, pt.transform_out)
    state = apply_superoperator(state, second)
    if post is not None:
        state = apply_superoperator(state, to_backend(post))
    return state

class PropagatorTransfer:
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
        or None (no bath: Lindblad dynamics of the system alone). A
        :class:`~nonmarkov.UniformProcessTensor` runs for ``num_steps`` (or
        the shortest finite process tensor's length); for very long runs
        :func:`~nonmarkov.compute_uniform_dynamics` keeps memory constant.
    control : optional :class:`Control`.
    record_all : record every step (True) or only the final state.
    subdiv_limit, liouvillian_epsrel : quadrature settings for
        time-dependent systems.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.

    Returns a :class:`Dynamics` with times start_time + k dt.
    """
    process_tensors, rho0, start_time, dt, num_steps, progress_type = check_dynamics_inputs(
        system, process_tensor, initial_state, start_time, dt, num_steps, control,
        progress_type)
    propagators = system.get_propagators(dt, start_time, subdiv_limit, liouvillian_epsrel)
    if _scan_applies(system, control, process_tensors, num_steps):
        return _compute_scanned(system, rho0, dt, num_steps, start_time, process_tensors,
                                propagators, record_all, progress_type)
    on_backend = [ProcessTensorOnBackend(pt, num_steps, record_all) for pt in process_tensors]
    num_bonds = len(on_backend)
    d = system.dimension

    on_device = PropagatorTransfer()
    dynamics = Dynamics(name="dynamics")
    dynamics.add(start_time, rho0)
    state = to_backend(rho0.reshape((1,) * num_bonds + (d * d,)))
    with hot_loop_threads(), Progress(num_steps, progress_type, "dynamics") as progress:
        for step in range(num_steps):
            pre, post = (None, None) if control is None else control.get_controls(
                step, dt, start_time)
            first, second = on_device(*propagators(step))
            state = propagate_step(state, step, first, second, on_backend, pre, post)
            if record_all or step == num_steps - 1:
                vector = close_bonds(state, [pt.caps[step] for pt in on_backend])
                rho = default_np.asarray(np.to_host(vector)).reshape(d, d)
                dynamics.add(start_time + (step + 1) * dt, rho)
            progress.update()
    return dynamics

def _scan_applies(system: BaseSystem, control: Control | None,
                  process_tensors: list[BaseProcessTensor], num_steps: int) -> bool:
    """Whether the compiled scan over steps can run this computation (JAX backend)."""
    if np.backend_name != "jax" or control is not None or type(system) is not System:
        return False
    if num_steps < 1 or not process_tensors:
        return False
    if not all(isinstance(pt, SimpleProcessTensor) and len(pt) > 0 for pt in process_tensors):
        return False
    size = default_np.dtype(np.dtype_complex).itemsize
    total = 0
    for pt in process_tensors:
        bonds = pt.get_bond_dimensions()
        classes = int(default_np.asarray(pt.classes).max()) + 1
        total += num_steps * int(bonds.max()) ** 2 * classes * size
    return total <= _SCAN_BYTES

def _compute_scanned(system: BaseSystem, rho0: Any, dt: float, num_steps: int,
                     start_time: float, process_tensors: list[BaseProcessTensor],
                     propagators: Any, record_all: bool, progress_type: str) -> Dynamics:
    """``compute_dynamics`` as one compiled scan (see the module docstring)."""
    from ..engines.jax.chain import run_chain, stack_padded

    dtype = np.dtype_complex
    d = system.dimension
    first, second = propagators(0)
    baths = []
    for pt in process_tensors:
        tensors = [default_np.asarray(pt.get_step_tensor(k)[0]) for k in range(len(pt))]
        classes = default_np.asarray(pt.get_step_tensor(0)[1], dtype=int)
        weights = default_np.asarray(np.to_host(trace_weights(classes, pt.dimension)))
        caps = [default_np.ones((tensors[-1].shape[1],), dtype=dtype)]
        for tensor in tensors[:0:-1]:  # cap before step k from the cap after it
            caps.append(default_np.einsum("bcp,p,c->b", tensor, weights, caps[-1]))
        caps = caps[::-1][:num_steps]
        stacked, stacked_caps = stack_padded(tensors[:num_steps], caps, dtype)
        baths.append((pt.transform_in, pt.transform_out, classes, stacked, stacked_caps))
    dynamics = Dynamics(name="dynamics")
    dynamics.add(start_time, rho0)
    with hot_loop_threads(), Progress(num_steps, progress_type, "dynamics") as progress:
        readouts = run_chain(rho0.reshape(-1), first, second, baths, record_all)
        progress.update(num_steps)
    steps = range(1, num_steps + 1) if record_all else [num_steps]
    for step, vector in zip(steps, readouts):
        dynamics.add(start_time + step * dt, vector.reshape(d, d))
    return dynamics
