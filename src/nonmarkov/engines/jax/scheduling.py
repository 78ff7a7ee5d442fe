"""The JAX window engine's choices that depend on measured time, in one place.

Three choices of :class:`~nonmarkov.engines.jax.window.CompiledWindow` and the
host start (:mod:`nonmarkov.engines.jax.engine`) depend on the wall clock:

- how many steps run on the host while the step kernel compiles (host start);
- how long a chunk of compiled steps may be: a chunk is redone whole when a bond
  outgrows its bucket, so its measured steps are capped at :data:`REDO_SECONDS`;
- whether re-padding to a smaller bucket pays: it must save more than a
  compilation costs (:data:`SHRINK_SECONDS`) over the steps left.

With ``deterministic`` (an :class:`~nonmarkov.options.EngineOptions` field) each
measured time is replaced by a fixed rule, so that a run repeats bit for bit
whatever the machine's load; the test suite runs in that mode.
"""

from __future__ import annotations

import time
from concurrent.futures import Future

#: Most seconds of (measured) steps in one chunk.
REDO_SECONDS = 0.5
#: A shrink must save more than this many seconds (the cost assumed for a
#: compilation) over the steps left in the current call.
SHRINK_SECONDS = 2.0
#: Deterministic mode: host steps before the window moves to the device ...
DETERMINISTIC_HOST_STEPS = 3
#: ... and the step-equivalents a shrink must save (steps left times the work saved).
DETERMINISTIC_SHRINK_STEPS = 16.0


class Schedule:
    """Time measurements of one window and the choices made from them."""

    def __init__(self, deterministic: bool):
        self.deterministic = bool(deterministic)
        #: measured seconds per step of the last chunk (0 before the first)
        self.step_seconds = 0.0
        self._dispatched = 0.0

    def chunk_dispatched(self) -> None:
        """The first step of a chunk has been dispatched (compiled, if it needed to be)."""
        self._dispatched = time.perf_counter()

    def chunk_done(self, steps: int) -> None:
        """The results of a chunk of ``steps`` steps are back on the host."""
        if not self.deterministic:
            self.step_seconds = (time.perf_counter() - self._dispatched) / max(steps, 1)

    def cap_chunk(self, steps: int) -> int:
        """``steps`` cut to :data:`REDO_SECONDS` of measured steps (at least 1)."""
        if self.deterministic or self.step_seconds <= 0.0:
            return steps
        return min(steps, max(1, int(REDO_SECONDS / self.step_seconds)))

    def shrink_pays(self, steps_left: int, work: float) -> bool:
        """Whether ``steps_left`` steps, each costing the fraction ``work`` of a step
        now, save more than a compilation."""
        if self.deterministic:
            return steps_left * (1.0 - work) >= DETERMINISTIC_SHRINK_STEPS
        return steps_left * self.step_seconds * (1.0 - work) > SHRINK_SECONDS

    def host_steps_go_on(self, pending: Future, done: int) -> bool:
        """Whether the host start runs another step after ``done``, the step kernel
        compiling in ``pending``: until it is ready (deterministic: a fixed count,
        then the kernel is waited for)."""
        if self.deterministic:
            return done < DETERMINISTIC_HOST_STEPS
        return not pending.done()
