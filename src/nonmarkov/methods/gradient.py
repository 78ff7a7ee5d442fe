"""Gradients of an objective of the final state with respect to control parameters,
by the adjoint method, through any number of process tensors.

The objective is Z = sum_ij T_ij rho_ij(t_N), linear in the final state, with
``target_derivative`` T (d, d) = dZ/drho(t_N) (for a fidelity Tr(sigma rho),
T = sigma^T; a callable T(rho) gives the derivative of a nonlinear objective at
the computed final state, e.g. 2 rho^T for the purity).

Step k of the chain engine takes the state s_k (bonds..., d^2) to
s_{k+1} = A_k S_k P_k F_k B_k s_k: the control before (B_k), the first half step
(F_k), the process tensors' step (P_k), the second half step (S_k), the control
after (A_k). A forward pass stores every s_k; a backward pass carries the
adjoint lambda_{k} = dZ/ds_k from lambda_N = caps (x) T back with the transposed
steps; both are the chain engine's (:meth:`~nonmarkov.engines.base.ChainEngine.adjoint`:
step by step on NumPy, two compiled scans on JAX). At each step
the derivative of Z with respect to the system's two half steps is the rank-4
tensor

    D_k[a, b, c, e] = sum over bonds of (B_k s_k)[a] P_k[(c), (b)] (A_k^T lambda_{k+1})[e],

(indices: a into F_k, b out of F_k into the process tensors, c out of them
into S_k, e out of S_k), so that Z = sum D_k[a, b, c, e] F_k[b, a] S_k[e, c]
for every k. The chain rule with the half-step propagator derivatives gives
dZ/dp, shape (2N, M).

Cost: one forward pass, one backward pass, and per step one batched process-
tensor step of d^4 unit states (the open system legs of D_k). Memory: the N
forward states, sum_k prod(bonds before step k) d^2 complex numbers, and the
N tensors D_k (d^8 each).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as default_np

from .. import validation as check
from .._threads import hot_loop_threads
from ..engines import chain_engine
from ..engines.base import ChainRun
from ..io.results import Dynamics
from ..model.control import Control
from ..model.parameterized import ParameterizedSystem
from ..options import EngineOptions
from ..process_tensors.base import BaseProcessTensor
from ..progress import Progress, check_progress_type
from . import checks
from .dynamics import (
    as_process_tensor_list,
    check_dynamics_inputs,
    record_readouts,
    start_dynamics,
)


def _target(target_derivative: Any, final_state: default_np.ndarray) -> default_np.ndarray:
    """dZ/drho at the final state, (d, d): the array, or the callable's value there."""
    d = final_state.shape[0]
    if callable(target_derivative):
        label = "target_derivative(final_state)"
        try:
            value = target_derivative(final_state.copy())
        except Exception as error:  # the user's callable: name it, keep the cause
            raise ValueError(
                f"{label} raised {type(error).__name__}: {error} (final_state = "
                f"{final_state.tolist()})"
            ) from error
    else:
        value = target_derivative
        label = "target_derivative"
    try:
        array = default_np.asarray(value, dtype=complex)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{label} must be a ({d}, {d}) matrix; got {value!r}") from error
    if array.shape != (d, d):
        raise ValueError(f"{label} must be a ({d}, {d}) matrix; got shape {array.shape}")
    if not default_np.all(default_np.isfinite(array)):
        raise ValueError(f"{label} has NaN or infinite entries")
    return array


def _check_target(target_derivative: Any, d: int) -> None:
    """Refuse a missing or malformed target before anything runs."""
    if target_derivative is None:
        raise ValueError(
            "target_derivative must be given: a (d, d) matrix dZ/drho (e.g. the transposed "
            "target state) or a callable rho -> (d, d)"
        )
    if not callable(target_derivative):
        _target(target_derivative, default_np.zeros((d, d)))


def _forward_bytes(process_tensors: Sequence[BaseProcessTensor], num_steps: int, d: int) -> int:
    """Bytes of the stored forward states and the derivative tensors."""
    bonds = [default_np.asarray(pt.get_bond_dimensions(), dtype=float) for pt in process_tensors]
    total = 0.0
    for k in range(num_steps):
        size = float(d * d)
        for b in bonds:
            size *= b[min(k, b.size - 1)] if b.size else 1.0
        total += size
    return int(16 * (total + num_steps * d**8))


def compute_gradient_and_dynamics(
    system: ParameterizedSystem,
    initial_state: Any,
    target_derivative: Callable[[Any], Any] | Any,
    process_tensors: Any,
    parameters: Any,
    start_time: float = 0.0,
    dt: float | None = None,
    num_steps: int | None = None,
    control: Control | None = None,
    record_all: bool = True,
    progress_type: str | None = None,
    *,
    options: EngineOptions | None = None,
) -> tuple[list[default_np.ndarray], Dynamics]:
    """The dynamics and dZ/d(half-step propagators) of Z = sum T_ij rho_ij(t_N).

    Parameters
    ----------
    system : :class:`ParameterizedSystem` of M parameters, dimension d.
    initial_state : (d, d) density matrix at ``start_time``, or any (d, d)
        operator (the map is linear; the identity turns Z into a linear
        functional of the dynamical map).
    target_derivative : (d, d) T = dZ/drho(t_N), or a callable rho -> T evaluated
        at the computed final state.
    process_tensors : a process tensor or a list of them (independent baths);
        an empty list for a system without bath (then give ``dt``).
    parameters : (2N, M) real, the parameters of each half step.
    start_time, dt, num_steps : the grid; dt and N from the process tensors when
        None (N from the parameters where no process tensor has a length).
    control : optional :class:`Control` (as in :func:`compute_dynamics`).
    record_all : record every state (else the initial and the final one).
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.
    options : :class:`~nonmarkov.options.EngineOptions`.

    Returns (D, dynamics): D a list of N arrays (d^2, d^2, d^2, d^2), with
    Z = sum D[k][a, b, c, e] first_k[b, a] second_k[e, c] (module docstring), and
    the :class:`Dynamics` (times start_time + k dt).
    """
    gradprop, dynamics, _, _ = _adjoint(
        system,
        initial_state,
        target_derivative,
        process_tensors,
        parameters,
        start_time,
        dt,
        num_steps,
        control,
        record_all,
        progress_type,
        options,
        derivatives=False,
    )
    return gradprop, dynamics


def state_gradient(
    system: ParameterizedSystem,
    initial_state: Any,
    target_derivative: Callable[[Any], Any] | Any,
    process_tensors: Any,
    parameters: Any,
    start_time: float = 0.0,
    progress_type: str | None = None,
    *,
    dt: float | None = None,
    num_steps: int | None = None,
    control: Control | None = None,
    options: EngineOptions | None = None,
) -> dict[str, Any]:
    """The gradient dZ/dp (2N, M) of Z = sum T_ij rho_ij(t_N) by the adjoint method.

    Arguments as :func:`compute_gradient_and_dynamics` (``dt``, ``num_steps`` and
    ``control`` keyword-only). Returns a dict with ``'final_state'`` (d, d),
    ``'gradprop'`` (the list D of :func:`compute_gradient_and_dynamics`),
    ``'gradient'`` (2N, M) complex (real up to rounding for a real objective),
    ``'dynamics'`` (every step recorded).
    """
    gradprop, dynamics, halves, derivatives = _adjoint(
        system,
        initial_state,
        target_derivative,
        process_tensors,
        parameters,
        start_time,
        dt,
        num_steps,
        control,
        True,
        progress_type,
        options,
        derivatives=True,
    )
    gradient = gradient_from_tensors(default_np.asarray(gradprop), halves, derivatives)
    return {
        "final_state": dynamics.states[-1],
        "gradprop": gradprop,
        "gradient": gradient,
        "dynamics": dynamics,
    }


def gradient_from_tensors(
    gradprop: default_np.ndarray, halves: default_np.ndarray, derivatives: default_np.ndarray
) -> default_np.ndarray:
    """dZ/dp (2N, M) from D (N, d^2, d^2, d^2, d^2), the half-step propagators
    (2N, d^2, d^2) and their derivatives (2N, M, d^2, d^2)."""
    first, second = halves[0::2], halves[1::2]
    first_derivatives, second_derivatives = derivatives[0::2], derivatives[1::2]
    n, m = derivatives.shape[0] // 2, derivatives.shape[1]
    gradient = default_np.empty((2 * n, m), dtype=complex)
    # dZ/dF_k[b, a] = sum_ce D[a, b, c, e] S_k[e, c]; dZ/dS_k[e, c] = sum_ab D F_k[b, a]
    by_first = default_np.einsum("kabce,kec->kba", gradprop, second)
    by_second = default_np.einsum("kabce,kba->kec", gradprop, first)
    gradient[0::2] = default_np.einsum("kba,kjba->kj", by_first, first_derivatives)
    gradient[1::2] = default_np.einsum("kec,kjec->kj", by_second, second_derivatives)
    return gradient


def chain_rule(
    adjoint_tensor: Sequence[Any],
    dprop_dparam: Callable[[int], tuple[Sequence[Any], Sequence[Any]]],
    propagators: Callable[[int], tuple[Any, Any]],
    num_steps: int,
    num_parameters: int,
    progress_type: str | None = None,
) -> default_np.ndarray:
    """dZ/dp (2N, M) from the tensors D of :func:`compute_gradient_and_dynamics` and
    the callables of :meth:`ParameterizedSystem.get_propagators` and
    :meth:`~ParameterizedSystem.get_propagator_derivatives`."""
    num_steps = check.positive_integer(num_steps, "num_steps")
    num_parameters = check.positive_integer(num_parameters, "num_parameters")
    if len(adjoint_tensor) < num_steps:
        raise ValueError(
            f"adjoint_tensor has {len(adjoint_tensor)} tensors, fewer than num_steps={num_steps}"
        )
    check_progress_type(progress_type)
    halves, derivatives = [], []
    for step in range(num_steps):
        first, second = propagators(step)
        first_derivatives, second_derivatives = dprop_dparam(step)
        halves += [first, second]
        derivatives += [list(first_derivatives), list(second_derivatives)]
    derivative_array = default_np.asarray(derivatives, dtype=complex)
    if derivative_array.shape[1] != num_parameters:
        raise ValueError(
            f"dprop_dparam gives {derivative_array.shape[1]} derivatives per half step, "
            f"num_parameters is {num_parameters}"
        )
    return gradient_from_tensors(
        default_np.asarray([adjoint_tensor[k] for k in range(num_steps)], dtype=complex),
        default_np.asarray(halves, dtype=complex),
        derivative_array,
    )


def _adjoint(
    system: Any,
    initial_state: Any,
    target_derivative: Any,
    process_tensors: Any,
    parameters: Any,
    start_time: Any,
    dt: Any,
    num_steps: Any,
    control: Any,
    record_all: Any,
    progress_type: Any,
    options: EngineOptions | None,
    derivatives: bool,
) -> tuple[list[default_np.ndarray], Dynamics, default_np.ndarray, default_np.ndarray]:
    """The forward and backward passes; (D list, dynamics, half-step propagators
    (2N, d^2, d^2), their derivatives (2N, M, d^2, d^2) or an empty array)."""
    if not isinstance(system, ParameterizedSystem):
        raise TypeError(
            f"system must be a ParameterizedSystem (gradients are taken with respect to its "
            f"parameters); got {type(system).__name__}"
        )
    record_all = check.boolean(record_all, "record_all")
    array = system.check_parameters(parameters)
    if process_tensors is None:
        process_tensors = []
    finite = [pt for pt in as_process_tensor_list(process_tensors) if pt.num_steps is not None]
    if num_steps is None and not finite:
        num_steps = array.shape[0] // 2  # no process tensor sets the length
    pts, rho0, start_time, dt, num_steps, progress_type = check_dynamics_inputs(
        system,
        process_tensors,
        initial_state,
        start_time,
        dt,
        num_steps,
        control,
        progress_type,
        parameterized=True,
    )
    array = system.check_parameters(array, num_steps)
    engine = chain_engine(options, adjoint=True)  # a refusal comes before any work
    d = system.dimension
    _check_target(target_derivative, d)
    needed = _forward_bytes(pts, num_steps, d)
    if needed > checks.physical_memory() // 2:
        raise ValueError(
            f"the adjoint pass would hold {needed / 2**30:.1f} GiB of forward states and "
            f"derivative tensors, more than half of this machine's memory: use fewer steps "
            "or process tensors with smaller bonds (larger epsrel)"
        )
    if derivatives:
        halves, propagator_derivatives = system.propagators_and_derivatives(dt, array)
    else:
        halves = system.half_step_propagators(dt, array)
        propagator_derivatives = default_np.zeros((0,))
    grid = (start_time, dt, num_steps)
    rho0, controls, dynamics = start_dynamics(
        "compute_gradient_and_dynamics", system, rho0, control, pts, grid, record_all
    )

    def target(final: default_np.ndarray) -> default_np.ndarray:
        rho = final.reshape(d, d)
        checks.finite_states(rho[None], num_steps, start_time, dt, "the gradient", False)
        return _target(target_derivative, rho).reshape(-1)

    with hot_loop_threads(), Progress(2 * num_steps, progress_type, "gradient") as progress:
        run = ChainRun(
            initial=rho0.reshape(-1),
            num_steps=num_steps,
            propagators=lambda k: (halves[2 * k], halves[2 * k + 1]),
            constant_propagators=False,
            controls=controls,
            process_tensors=pts,
            record_all=record_all,
            on_step=progress.update,
        )
        readouts, tensors = engine.adjoint(run, target)
    record_readouts(dynamics, readouts, rho0, grid, record_all, "the gradient", control)
    return list(tensors), dynamics, halves, propagator_derivatives
