"""The results of a sweep: each point's parameters, status and arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as default_np

from .grid import point_key
from .store import Outcome, grid_column, read_results


class SweepFailure(RuntimeError):
    """Raised by :meth:`SweepResults.raise_failures`: some points of a sweep failed."""


class SweepResults:
    """What a sweep computed, in grid order.

    Attributes
    ----------
    names : the parameter names.
    points : one dict {name: value} per point (P of them).
    status : per point ``'ok'`` or ``'failed'``.
    errors : per point the exception text of a failure ('' for ok points).
    seconds : per point the seconds its function took on its worker.
    results : per point a dict {name: array} (None for a failed point).
    filename : the results file, or None.
    """

    def __init__(
        self,
        names: Sequence[str],
        points: Sequence[dict[str, Any]],
        outcomes: Sequence[Outcome],
        filename: str | None = None,
        function: str = "",
    ):
        self.names = list(names)
        self.points = [dict(p) for p in points]
        self.status = [o.status for o in outcomes]
        self.errors = [o.error for o in outcomes]
        self.seconds = [o.seconds for o in outcomes]
        self.results: list[dict[str, default_np.ndarray] | None] = [
            o.arrays if o.status == "ok" else None for o in outcomes
        ]
        self.filename = filename
        self.function = function
        self._index = {point_key(p): i for i, p in enumerate(self.points)}

    def __len__(self) -> int:
        return len(self.points)

    def __repr__(self) -> str:
        return f"SweepResults({len(self)} points over {self.names}, {len(self.failed)} failed" + (
            f", file {self.filename!r})" if self.filename else ")"
        )

    @property
    def ok(self) -> list[int]:
        """Indices of the points that finished."""
        return [i for i, s in enumerate(self.status) if s == "ok"]

    @property
    def failed(self) -> list[int]:
        """Indices of the points whose function raised (or whose worker died)."""
        return [i for i, s in enumerate(self.status) if s != "ok"]

    @property
    def grid(self) -> dict[str, default_np.ndarray]:
        """Per parameter name its values over the points, (P,) arrays."""
        return {name: grid_column([p[name] for p in self.points]) for name in self.names}

    def index(self, **parameters: Any) -> int:
        """The index of the point with these parameter values (KeyError if none)."""
        from .grid import parameter_value

        point = {k: parameter_value(v, k) for k, v in parameters.items()}
        key = point_key(point)
        if key not in self._index:
            raise KeyError(f"no point {point} in this sweep (parameters {self.names})")
        return self._index[key]

    def get(self, **parameters: Any) -> dict[str, default_np.ndarray]:
        """The arrays of the point with these parameter values; ValueError naming
        the error if that point failed."""
        i = self.index(**parameters)
        result = self.results[i]
        if result is None:
            raise ValueError(f"point {self.points[i]} failed:\n{self.errors[i]}")
        return result

    def stack(self, name: str) -> default_np.ndarray:
        """Array ``name`` of every point, stacked: (P, ...). Raises ValueError if a
        point failed or the shapes differ (use :attr:`ok` and :attr:`results`)."""
        if self.failed:
            raise ValueError(
                f"{len(self.failed)} of {len(self)} points failed (indices {self.failed[:10]}); "
                "stack the finished ones from .results[i] for i in .ok"
            )
        arrays = []
        for i, result in enumerate(self.results):
            if result is None or name not in result:
                raise ValueError(f"point {i} has no array {name!r}")
            arrays.append(result[name])
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise ValueError(f"array {name!r} has different shapes over the points: {shapes}")
        return default_np.stack(arrays)

    def raise_failures(self) -> None:
        """Raise :class:`SweepFailure` listing the failed points and their errors."""
        if not self.failed:
            return
        lines = [f"{len(self.failed)} of {len(self)} points failed:"]
        for i in self.failed:
            last = self.errors[i].strip().splitlines()[-1:] or [""]
            lines.append(f"  point {i} {self.points[i]}: {last[0]}")
        raise SweepFailure("\n".join(lines))


def import_sweep(filename: Any) -> SweepResults:
    """Read a sweep results file written by :func:`nonmarkov.sweep`."""
    import os

    names, points, outcomes, function = read_results(filename)
    return SweepResults(names, points, outcomes, os.fspath(filename), function)
