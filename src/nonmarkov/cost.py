"""The one cost rule: a run that cannot finish is refused before it starts.

Every public entry point that loops over steps, batch members, chain sites or
grid points, or holds a memory window, asks :func:`affordable_run` first, with
the argument that set the size (``cause``). The rule:

- work: at most :data:`MAX_STEPS` units (steps times members, sites or grid
  points; at ten microseconds a unit, hours at the least);
- window work: a memory window of ``window`` points updated at each of
  ``num_steps`` steps, at most :data:`MAX_WINDOW_UPDATES` site updates;
- a window run whose least time exceeds :data:`LONG_RUN_WARNING_SECONDS` runs,
  with a ``UserWarning`` giving that estimate;
- memory: the recorded states, a memory window of bond 1, the Liouvillians
  (d^2, d^2) and ``held_bytes`` of bookkeeping together in at most half of this
  machine's physical memory.

A refusal is a ``ValueError`` naming the method, the cause, the estimate (units,
bytes and the least time at :data:`UNIT_SECONDS` a unit) and the way on. This
module imports nothing of the package, so that the model (``GibbsParameters``,
``SystemChain``), the spec reader and the sweeps share the one rule with the
algorithms (``methods/checks.affordable_run`` is this function).
"""

from __future__ import annotations

import os
import warnings

#: the most units of work (steps x members / sites / grid points) one run may take
MAX_STEPS = 10**9
#: the most memory-window site updates (steps x window points) one run may take
MAX_WINDOW_UPDATES = 10**11
#: the least time one unit of work takes on any machine (seconds), for the estimate
UNIT_SECONDS = 1e-5
#: a window run whose least time is longer than this (seconds) is warned with the estimate
LONG_RUN_WARNING_SECONDS = 600.0
#: bytes of one complex128 number
_COMPLEX = 16


def physical_memory() -> int:
    """Bytes of physical memory of this machine (a large number where unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return 2**46


def _duration(seconds: float) -> str:
    for unit, length in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= length:
            return f"{seconds / length:.3g} {unit}"
    return f"{seconds:.3g} s"


def affordable_run(
    num_steps: int,
    dimension: int,
    recorded: int,
    method: str,
    memory: int | None = None,
    *,
    members: int = 1,
    unit: str = "steps",
    cause: str | None = None,
    held_bytes: int = 0,
    remedy: str | None = None,
) -> None:
    """Refuse, before it starts, a run that cannot finish (module docstring).

    Parameters
    ----------
    num_steps : the steps of the run (or the units of a loop without steps).
    dimension : the system dimension d (0: no states or Liouvillians).
    recorded : how many states (d, d) of complex128 the run keeps.
    method : the name of the entry point, first in the message.
    memory : the points of a memory window updated at every step (None: none).
    members : units per step (batch members, chain sites); work = steps x members.
    unit : what the work counts (``'steps'``, ``'member steps'``, ``'grid points'``...).
    cause : the argument that set the size (``'end_time=1e12'``), named in the message.
    held_bytes : further bytes the run holds (bookkeeping of members or points).
    remedy : the way on named in the message (None: the general one of each limit).

    Raises ValueError with the estimate and how to proceed.
    """
    why = f" ({cause})" if cause else ""
    budget = physical_memory() // 2
    work = int(num_steps) * int(members)
    if work > MAX_STEPS:
        raise ValueError(
            f"{method}: {work:.3g} {unit} cannot finish{why}: the limit is {MAX_STEPS:.0e}, "
            f"and at {UNIT_SECONDS:g} s a unit it would take at least "
            f"{_duration(work * UNIT_SECONDS)}; "
            + (remedy or "use a larger dt, a shorter interval or fewer members, sites or points")
        )
    if memory is not None and work * int(memory) > MAX_WINDOW_UPDATES:
        updates = work * int(memory)
        raise ValueError(
            f"{method}: {num_steps:.3g} steps over a memory window of {memory:.3g} points{why} "
            f"are {updates:.3g} site updates (the limit is {MAX_WINDOW_UPDATES:.0e}, at least "
            f"{_duration(updates * UNIT_SECONDS)}); "
            + (remedy or "use a shorter memory cut (tcut/dkmax) or fewer steps")
        )
    if memory is not None and work * int(memory) * UNIT_SECONDS > LONG_RUN_WARNING_SECONDS:
        updates = work * int(memory)
        warnings.warn(
            f"{method}: {num_steps:.3g} steps over a memory window of up to {memory:.3g} points"
            f"{why} are {updates:.3g} site updates: at least "
            f"{_duration(updates * UNIT_SECONDS)} at {UNIT_SECONDS:g} s an update (more at "
            "larger bonds); " + (remedy or "a shorter memory cut (tcut/dkmax) makes it shorter"),
            UserWarning,
            stacklevel=3,
        )
    states = int(recorded) * dimension**2 * _COMPLEX
    if states > budget:
        raise ValueError(
            f"{method}: recording {recorded:.3g} states of dimension {dimension}{why} needs "
            f"{states / 2**30:.3g} GiB, more than half of this machine's memory "
            f"({budget / 2**30:.3g} GiB); record fewer states (record_all=False) or fewer steps"
        )
    window = 0 if memory is None else int(memory) * dimension**2 * _COMPLEX
    if window > budget:
        raise ValueError(
            f"{method}: a memory window of {memory:.3g} points{why} needs at least "
            f"{window / 2**30:.3g} GiB; use a shorter memory cut (tcut/dkmax)"
        )
    liouvillians = 2 * dimension**4 * _COMPLEX
    if liouvillians > budget:
        raise ValueError(
            f"{method}: a system of dimension {dimension}{why} has Liouvillians "
            f"({dimension**2}, {dimension**2}) of {liouvillians / 2**31:.3g} GiB each, more "
            f"than half of this machine's memory ({budget / 2**30:.3g} GiB) together; "
            "use a smaller system dimension"
        )
    total = states + window + liouvillians + int(held_bytes)
    if total > budget:
        raise ValueError(
            f"{method}: the run{why} needs about {total / 2**30:.3g} GiB, more than half of "
            f"this machine's memory ({budget / 2**30:.3g} GiB); "
            + (remedy or "use fewer steps, members, sites or points, or record fewer states")
        )
