"""Control operations applied to the system at chosen time steps."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as default_np

from .. import validation as check


def _function_name(function: Callable[..., Any]) -> str:
    return str(getattr(function, "__qualname__", None) or repr(function))


class Control:
    """Instantaneous control superoperators (d^2, d^2) acting on the system.

    A control operation is a superoperator on the row-major vectorised
    density matrix, vec(A rho B) = (A kron B^T) vec(rho), so a unitary kick
    rho -> U rho U^dag is ``numpy.kron(U, U.conj())``. It acts at a grid time
    t_k = start_time + k dt (step k) of ``compute_dynamics`` (and of the
    correlation functions), either before or after the state at t_k is
    recorded:

    - ``post=False`` ("pre", the default): it acts on the state at t_k
      *before* it is recorded, so the recorded rho(t_k) includes it. A
      pre-control at step 0 acts on the initial state; one at the last step
      N acts on the final state.
    - ``post=True``: it acts on the state at t_k *after* it is recorded, just
      before the propagation from t_k to t_{k+1}. A post-control at the last
      step N has no effect.

    That is, for k = 0..N: apply pre(k), record rho(t_k), apply post(k) and
    (for k < N) propagate to t_{k+1}. Operators of a correlation function at
    t_k act on the recorded rho(t_k), between pre(k) and post(k).

    Single controls (:meth:`add_single`) are given at a step (int) or at a
    time (float), the latter matched to the step round((time - start_time) /
    dt); controls outside the grid of a run are never applied, and the run
    says so with a ``UserWarning`` (:meth:`outside`). A continuous control
    (:meth:`add_continuous`) acts at every step. Where several meet at one
    slot (one step, pre or post) they act one after another, the ones nearer
    the recorded state being the more specific:

    - pre(k): continuous controls (in the order added), then time-stamped
      ones (by time; equal times in the order added), then step ones (in the
      order added);
    - post(k): step ones (in the order added), then time-stamped ones (by
      time; equal times in the order added), then continuous ones (in the
      order added).

    "Then" means "acts after": A then B combine to the superoperator B @ A.

    Parameters
    ----------
    dimension : system dimension d.
    name, description : optional text.
    """

    def __init__(self, dimension: int, name: str | None = None, description: str | None = None):
        self._dimension = check.positive_integer(dimension, "dimension")
        self.name = "Unnamed Control" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._steps: dict[tuple[int, bool], list[default_np.ndarray]] = {}
        self._times: list[tuple[float, bool, default_np.ndarray]] = []
        self._continuous: dict[bool, list[Callable[[float], Any]]] = {False: [], True: []}
        # time-stamped controls by (step, post) for the last (dt, start_time) asked for
        self._time_index: tuple[tuple[float, float], dict[tuple[int, bool], list[Any]]] | None = (
            None
        )

    @property
    def dimension(self) -> int:
        """Dimension d of the controlled system."""
        return self._dimension

    def add_single(self, time: Any, control_operation: Any, post: bool = False) -> None:
        """Add ``control_operation`` (d^2, d^2) at a step (int) or at a time (float).

        ``post=False``: it acts at that step before the state is recorded;
        ``post=True``: after (see the class docstring).
        """
        operator = check.square_matrix(
            control_operation, "control_operation", self.dimension**2, kind="superoperator"
        )
        post = check.boolean(post, "post")
        if isinstance(time, bool):
            raise TypeError("time must be a step (int) or a time (float); got a bool")
        if isinstance(time, (int, default_np.integer)):
            step = check.positive_integer(time, "step", minimum=0)
            self._steps.setdefault((step, post), []).append(operator)
        elif isinstance(time, numbers.Real):
            value = check.real_number(time, "time")
            self._times.append((value, post, operator))
            self._time_index = None
        else:
            raise TypeError(f"time must be a step (int) or a time (float); got {time!r}")

    def add_continuous(self, control_fct: Callable[[float], Any], post: bool = False) -> None:
        """Add a control that acts at every step: ``control_fct(t)`` -> (d^2, d^2).

        At step k it applies ``control_fct(t_k)``, t_k = start_time + k dt,
        before the state at t_k is recorded (``post=False``) or after it
        (``post=True``; never evaluated at the last step, where a post-control
        has no effect). Its value is checked where it is used: a shape other
        than (d^2, d^2) or a non-finite entry is a ValueError naming the
        function and t.
        """
        if not callable(control_fct):
            raise TypeError(
                f"control_fct must be a function of the time t returning a (d^2, d^2) "
                f"superoperator; got {type(control_fct).__name__}"
            )
        self._continuous[check.boolean(post, "post")].append(control_fct)

    def _continuous_value(self, function: Callable[[float], Any], t: float) -> default_np.ndarray:
        """``function(t)`` checked: a finite (d^2, d^2) complex array."""
        d2 = self.dimension**2
        where = f"continuous control {_function_name(function)} at t={t:.12g}"
        try:
            value = default_np.asarray(
                check.from_qutip(function(t), where, "superoperator"), dtype=default_np.complex128
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where} did not return an array of numbers: {error}") from error
        if value.shape != (d2, d2):
            raise ValueError(f"{where} returned shape {value.shape}; expected ({d2}, {d2})")
        if not default_np.all(default_np.isfinite(value)):
            raise ValueError(f"{where} returned NaN or infinite entries")
        return value

    def _timed(self, step: int, post: bool, dt: float, start_time: float) -> list[Any]:
        """The time-stamped controls of one slot, by time (equal times in the order added)."""
        key = (dt, start_time)
        if self._time_index is None or self._time_index[0] != key:
            index: dict[tuple[int, bool], list[Any]] = {}
            for time, is_post, operator in sorted(self._times, key=lambda entry: entry[0]):
                slot = int(round((time - start_time) / dt))
                index.setdefault((slot, is_post), []).append(operator)
            self._time_index = (key, index)
        return self._time_index[1].get((step, post), [])

    def outside(self, num_steps: int, dt: float, start_time: float = 0.0) -> list[str]:
        """The single controls that a run of ``num_steps`` steps of ``dt`` from
        ``start_time`` never applies (a step beyond ``num_steps``, a time off the grid
        t_0..t_N by more than half a step), described for a message."""
        missed = [
            f"step {step}{' (post)' if post else ''}"
            for (step, post) in sorted(self._steps)
            if step > num_steps
        ]
        for time, post, _ in self._times:
            slot = int(round((time - start_time) / dt))
            if slot < 0 or slot > num_steps:
                missed.append(f"time {time:g}{' (post)' if post else ''}")
        return missed

    def combined(
        self, step: int, post: bool = False, dt: float | None = None, start_time: float = 0.0
    ) -> default_np.ndarray | None:
        """The superoperator (d^2, d^2) of one slot, all its controls in the order
        they act (see the class docstring); None where there is none.

        ``dt`` (and ``start_time``) place the time-stamped and continuous
        controls on the grid; without ``dt`` only step controls can be placed.
        """
        step = check.positive_integer(step, "step", minimum=0)
        post = check.boolean(post, "post")
        continuous = self._continuous[post]
        if dt is None:
            if self._times or continuous:
                raise ValueError(
                    "dt is needed to place time-stamped and continuous controls on the steps"
                )
            timed: list[Any] = []
        else:
            dt = check.positive_number(dt, "dt")
            start_time = check.real_number(start_time, "start_time")
            timed = self._timed(step, post, dt, start_time)
        singles = self._steps.get((step, post), [])
        functions: list[Any] = []
        if continuous and dt is not None:
            t = start_time + step * dt
            functions = [self._continuous_value(function, t) for function in continuous]
        operators = (singles + timed + functions) if post else (functions + timed + singles)
        result = None
        for operator in operators:  # later ones act after earlier ones
            result = operator if result is None else operator @ result
        return result

    def get_controls(
        self, step: int, dt: float | None = None, start_time: float = 0.0
    ) -> tuple[default_np.ndarray | None, default_np.ndarray | None]:
        """(pre, post) superoperators (d^2, d^2) of ``step``, None where there is none.

        ``pre`` acts on the state at t_step before it is recorded, ``post``
        after it (see the class docstring).
        """
        return (
            self.combined(step, False, dt, start_time),
            self.combined(step, True, dt, start_time),
        )
