"""Control operations applied to the system at chosen time steps."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as default_np

from .. import validation as check


class Control:
    """Instantaneous superoperators (d^2, d^2) applied during the dynamics.

    A control added at step k (or at the time t = start_time + k dt) with
    ``post=False`` acts on rho(t_k) just before step k; with ``post=True`` it
    acts at the end of step k, just before rho(t_{k+1}) is recorded. Several
    controls at the same slot are applied in the order they were added.

    Parameters
    ----------
    dimension : system dimension d.
    name, description : optional text.
    """

    def __init__(self, dimension: int, name: str | None = None, description: str | None = None):
        self.dimension = check.positive_integer(dimension, "dimension")
        self.name = "Unnamed Control" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._steps: dict[tuple[int, bool], list[default_np.ndarray]] = {}
        self._times: dict[tuple[float, bool], list[default_np.ndarray]] = {}

    def add_single(self, time: Any, control_operator: Any, post: bool = False) -> None:
        """Add ``control_operator`` (d^2, d^2) at a step (int) or a time (float)."""
        operator = check.square_matrix(control_operator, "control_operator", self.dimension**2)
        if isinstance(time, bool):
            raise TypeError("time must be a step (int) or a time (float)")
        if isinstance(time, (int, default_np.integer)):
            step = check.positive_integer(time, "step", minimum=0)
            self._steps.setdefault((step, bool(post)), []).append(operator)
        elif isinstance(time, numbers.Real):
            value = check.real_number(time, "time")
            self._times.setdefault((value, bool(post)), []).append(operator)
        else:
            raise TypeError(f"time must be a step (int) or a time (float); got {time!r}")

    def get_controls(
        self, step: int, dt: float | None = None, start_time: float = 0.0
    ) -> tuple[default_np.ndarray | None, default_np.ndarray | None]:
        """(pre, post) superoperators of ``step`` (None where there is none)."""
        result = []
        for post in (False, True):
            operators = list(self._steps.get((step, post), []))
            if dt is not None:
                for (time, is_post), ops in self._times.items():
                    if is_post == post and int(round((time - start_time) / dt)) == step:
                        operators.extend(ops)
            combined = None
            for operator in operators:
                combined = operator if combined is None else operator @ combined
            result.append(combined)
        return result[0], result[1]
