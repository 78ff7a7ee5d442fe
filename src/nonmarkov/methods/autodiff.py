"""Dynamics as a differentiable function of the control parameters (JAX backend).

:func:`differentiable_dynamics` turns a :class:`ParameterizedSystem` and its
process tensors into a pure function ``dynamics(parameters, initial_state,
controls=None)`` -> states, compiled by the chain engine (one ``lax.scan``
over the steps), that ``jax.grad``, ``jax.jacfwd`` and ``jax.vmap`` go through:
with respect to the parameters (2N, M), the initial state (d, d) and the control
superoperators (N, d^2, d^2). The process tensors are constants of the function.

The system's functions are traced: they must be written with array operations
JAX can trace (``0.5 * x * sigma_x + 0.5 * z * sigma_z`` is; in-place writes to a
NumPy array are not). The backward pass recomputes each step instead of storing
its intermediates (``jax.checkpoint``), so reverse-mode memory is one state per
step, N prod(bonds) d^2 complex numbers, the same as the adjoint method's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import validation as check
from ..backends.numerical_backend import np
from ..engines import chain_engine
from ..model.parameterized import ParameterizedSystem
from ..options import EngineOptions
from . import checks
from .dynamics import as_process_tensor_list, resolve_grid


def _traced_generator(system: ParameterizedSystem) -> Callable[[Any], Any]:
    """L(p) (d^2, d^2) of one parameter row p (M,), in the backend's array operations."""
    d = system.dimension
    m = system.number_of_parameters
    hamiltonian, gammas, operators = (
        system.hamiltonian,
        system.gammas,
        system.lindblad_operators,
    )

    def generator(row: Any) -> Any:
        arguments = [row[j] for j in range(m)]
        try:
            h = np.asarray(hamiltonian(*arguments), dtype=np.dtype_complex)
            terms = [
                (gamma(*arguments), np.asarray(op(*arguments), dtype=np.dtype_complex))
                for gamma, op in zip(gammas, operators)
            ]
        except Exception as error:  # re-raised with what to change
            raise TypeError(
                "the system's functions must be written with array operations that JAX can "
                "trace for automatic differentiation (e.g. 0.5 * x * sigma_x, no in-place "
                f"writes into NumPy arrays); tracing them raised {type(error).__name__}: {error}"
            ) from error
        identity = np.eye(d, dtype=np.dtype_complex)
        generator = -1j * (np.kron(h, identity) - np.kron(identity, h.T))
        for rate, a in terms:
            ada = a.conj().T @ a
            generator = generator + rate * (
                np.kron(a, a.conj()) - 0.5 * (np.kron(ada, identity) + np.kron(identity, ada.T))
            )
        return generator

    return generator


def differentiable_dynamics(
    system: ParameterizedSystem,
    process_tensors: Any,
    dt: float | None = None,
    num_steps: int | None = None,
    record_all: bool = True,
    options: EngineOptions | None = None,
) -> Callable[..., Any]:
    """``dynamics(parameters, initial_state, controls=None)`` -> states, differentiable.

    Parameters
    ----------
    system : :class:`ParameterizedSystem` (M parameters, dimension d), its functions
        traceable by JAX (module docstring).
    process_tensors : a process tensor in memory or a list of them (not empty).
    dt, num_steps : the grid; from the process tensors when None.
    record_all : the returned function gives every state (N + 1, d, d), the
        initial one first; else only the final state (d, d).
    options : :class:`~nonmarkov.options.EngineOptions`.

    The returned function takes parameters (2N, M) (row 2k: first half of step
    k, row 2k + 1: its second half), initial_state (d, d) and optionally controls
    (N, d^2, d^2), superoperators applied after the propagation of each step
    (the pre-controls of t_1..t_N of a :class:`Control`), and returns JAX arrays.
    Needs the JAX backend; a ValueError says so on NumPy (use the adjoint method,
    :func:`~nonmarkov.state_gradient`, there).
    """
    if not isinstance(system, ParameterizedSystem):
        raise TypeError(f"system must be a ParameterizedSystem; got {type(system).__name__}")
    record_all = check.boolean(record_all, "record_all")
    pts = as_process_tensor_list(process_tensors, system.dimension)
    if not pts:
        raise ValueError("differentiable_dynamics needs at least one process tensor")
    dt, num_steps = resolve_grid(pts, dt, num_steps)
    checks.affordable_run(num_steps, system.dimension, num_steps + 1, "differentiable_dynamics")
    d, m = system.dimension, system.number_of_parameters
    run = chain_engine(options, differentiable=pts).differentiable(
        pts, num_steps, record_all, _traced_generator(system), dt
    )

    def dynamics(parameters: Any, initial_state: Any, controls: Any = None) -> Any:
        parameters = np.asarray(parameters)
        if parameters.shape != (2 * num_steps, m):
            raise ValueError(
                f"parameters must have shape (2N, M) = {(2 * num_steps, m)}; got {parameters.shape}"
            )
        initial = np.asarray(initial_state, dtype=np.dtype_complex)
        if initial.shape != (d, d):
            raise ValueError(f"initial_state must be ({d}, {d}); got {initial.shape}")
        if controls is not None:
            controls = np.asarray(controls, dtype=np.dtype_complex)
            if controls.shape != (num_steps, d * d, d * d):
                raise ValueError(
                    f"controls must have shape (N, d^2, d^2) = "
                    f"{(num_steps, d * d, d * d)}; got {controls.shape}"
                )
        readouts = run(parameters, initial.reshape(-1), controls)
        if not record_all:
            return readouts[0].reshape(d, d)
        return np.concatenate([initial[None], readouts.reshape(-1, d, d)])

    return dynamics
