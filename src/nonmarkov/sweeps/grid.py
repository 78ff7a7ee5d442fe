"""Parameter grids of a sweep: the points, checked, and the key of each point.

A grid is a dict of lists (their Cartesian product, in the dict's order, the
last name varying fastest) or an explicit list of points (dicts with the same
names). Parameter values are scalars that a file can hold exactly: ``bool``,
``int``, finite ``float`` or ``str`` (NumPy scalars are converted). A point's
key is a hash of its canonical JSON: the same values give the same key in any
process, which is how a resumed sweep finds the points it has finished.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as default_np

from ..cost import affordable_run

#: What a parameter value may be (after conversion of NumPy scalars).
VALUE_KINDS = "bool, int, finite float or str"
#: bytes a sweep holds per point at the least (the point, its key and its record)
POINT_BYTES = 1024


def affordable_grid(
    points: int, where: str, method: str = "sweep", point_bytes: int = POINT_BYTES
) -> None:
    """Refuse a grid of ``points`` points that cannot be held or run, by the library's
    one cost rule (:func:`nonmarkov.cost.affordable_run`), before it is expanded;
    ``point_bytes``: what each point holds at the least; ``method`` names the sweep."""
    affordable_run(
        points,
        0,
        0,
        method,
        unit="grid points",
        cause=where,
        held_bytes=points * point_bytes,
        remedy="use a coarser grid or split the sweep",
    )


def parameter_value(value: Any, where: str) -> bool | int | float | str:
    """``value`` as a plain ``bool``/``int``/``float``/``str``, or TypeError/ValueError
    naming ``where``."""
    if isinstance(value, default_np.generic):
        value = value.item()
    if isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{where} must be finite; got {value}")
        return value
    raise TypeError(f"{where} must be a {VALUE_KINDS}; got {value!r} ({type(value).__name__})")


def _parameter_name(name: Any, where: str, keywords: bool = True) -> str:
    if not keywords and isinstance(name, str) and name:
        return name
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(
            f"{where}: parameter names must be strings that are Python identifiers "
            f"(they are passed as keyword arguments); got {name!r}"
        )
    return name


def expand_grid(
    parameter_grid: Any,
    *,
    label: str = "parameter_grid",
    method: str = "sweep",
    keywords: bool = True,
    point_bytes: int = POINT_BYTES,
) -> tuple[list[str], list[dict[str, Any]]]:
    """The parameter names and the points of ``parameter_grid``, checked.

    ``parameter_grid``: a dict {name: list of values} (Cartesian product) or a
    list of dicts {name: value} with the same names. Raises TypeError/ValueError
    for an empty grid, an empty list of values, a value that is not a scalar,
    points with different names, the same point twice, or a grid too large by
    the cost rule (:func:`affordable_grid`, ``method`` and ``point_bytes``).
    Messages call the grid ``label``. ``keywords``: names must be Python
    identifiers (they are passed as keyword arguments); else any non-empty
    text (a spec's key paths, ``bath.alpha``).
    """
    if isinstance(parameter_grid, Mapping):
        if not parameter_grid:
            raise ValueError(f"{label} is empty: give {{name: [values, ...], ...}}")
        names = [_parameter_name(name, label, keywords) for name in parameter_grid]
        columns = []
        for name in names:
            values = parameter_grid[name]
            if isinstance(values, str | bytes) or not isinstance(
                values, Sequence | default_np.ndarray
            ):
                raise TypeError(f"{label}[{name!r}] must be a list of values; got {values!r}")
            if len(values) == 0:
                raise ValueError(f"{label}[{name!r}] is empty: give at least one value")
            columns.append(
                [parameter_value(v, f"{label}[{name!r}][{i}]") for i, v in enumerate(values)]
            )
        sizes = [len(column) for column in columns]
        affordable_grid(
            math.prod(sizes),
            f"{label} of " + " x ".join(f"{n} {name}" for n, name in zip(sizes, names)),
            method,
            point_bytes,
        )
        points = [dict(zip(names, combination)) for combination in itertools.product(*columns)]
    elif isinstance(parameter_grid, Sequence) and not isinstance(parameter_grid, str | bytes):
        if len(parameter_grid) == 0:
            raise ValueError(f"{label} is empty: give a list of points {{name: value}}")
        affordable_grid(
            len(parameter_grid), f"{label} of {len(parameter_grid)} points", method, point_bytes
        )
        points, names = [], []
        for i, point in enumerate(parameter_grid):
            if not isinstance(point, Mapping) or not point:
                raise TypeError(
                    f"{label}[{i}] must be a non-empty dict {{name: value}}; got {point!r}"
                )
            these = [_parameter_name(name, f"{label}[{i}]", keywords) for name in point]
            if i == 0:
                names = these
            elif set(these) != set(names):
                raise ValueError(
                    f"{label}[{i}] has the parameters {sorted(these)}, point 0 "
                    f"{sorted(names)}: every point must name the same parameters"
                )
            points.append(
                {name: parameter_value(point[name], f"{label}[{i}][{name!r}]") for name in names}
            )
    else:
        raise TypeError(
            f"{label} must be a dict {{name: [values, ...]}} (Cartesian product) or a "
            f"list of points [{{name: value}}, ...]; got {type(parameter_grid).__name__}"
        )
    seen: dict[str, int] = {}
    for i, point in enumerate(points):
        key = point_key(point)
        if key in seen:
            raise ValueError(f"{label} holds the point {point} twice (points {seen[key]}, {i})")
        seen[key] = i
    return names, points


def point_json(point: Mapping[str, Any]) -> str:
    """The canonical JSON of a point (sorted names; floats written exactly)."""
    return json.dumps(dict(point), sort_keys=True, separators=(",", ":"))


def point_key(point: Mapping[str, Any]) -> str:
    """A short stable key of a point: 20 hex digits of the SHA-256 of its JSON."""
    return hashlib.sha256(point_json(point).encode()).hexdigest()[:20]
