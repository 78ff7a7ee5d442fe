"""The files of a sweep (HDF5): one file per finished point, and the results file.

A **point file** ``point-<key>.h5`` (in the sweep's cache directory) holds one
point's outcome: its parameters (JSON), status (``'ok'`` or ``'failed'``), the
error text of a failure, the seconds it took, and its arrays under
``results/``. A **results file** gathers a whole sweep::

    attrs     format 'nonmarkov-sweep', format_version, library_version, complete,
              function, parameters (JSON list of names), num_points, num_failed
    points    (P,) str, the JSON of each point, in grid order
    grid/NAME (P,) the values of parameter NAME (bool, int64, float64 or str;
              JSON text where a parameter mixes kinds)
    status    (P,) str, 'ok' or 'failed'
    errors    (P,) str, the exception (type, message, traceback) of a failed point
    seconds   (P,) float64, the time each point took on its worker
    results/<8-digit index>/NAME   the arrays of point ``index`` (ok points)

Both are written under a temporary name and renamed when complete
(:func:`nonmarkov.io.atomic.atomic_path`), with a ``complete`` attribute and a
fletcher32 checksum on every non-scalar numeric dataset (the arrays): a file under its final name is
whole. A point file that cannot be read (damaged, foreign) is not trusted: the
sweep computes that point again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as default_np

from .._version import __version__
from ..io.atomic import atomic_path
from ..io.results import write_datasets
from .grid import point_json

RESULTS_FORMAT = "nonmarkov-sweep"
POINT_FORMAT = "nonmarkov-sweep-point"
FORMAT_VERSION = 1
STATUSES = ("ok", "failed")


class SweepFileError(ValueError):
    """A file that cannot be read as a complete sweep results file."""


@dataclasses.dataclass
class Outcome:
    """What became of one point: ``status`` ``'ok'`` (with ``arrays``, name ->
    host array) or ``'failed'`` (with ``error``, the exception's text), and the
    seconds its function took."""

    status: str
    arrays: dict[str, default_np.ndarray]
    error: str = ""
    seconds: float = 0.0


def _read_arrays(group: Any) -> dict[str, default_np.ndarray]:
    return {name: default_np.asarray(group[name][()]) for name in group}


@contextlib.contextmanager
def _new_file(filename: str, file_format: str) -> Iterator[Any]:
    """An HDF5 file of ``file_format`` written under a temporary name: the format
    attributes first, ``complete`` last, renamed to ``filename`` when the block ends
    without an error (removed otherwise)."""
    import h5py

    with atomic_path(filename) as temporary, h5py.File(temporary, "w") as handle:
        attrs = handle.attrs
        attrs["format"] = file_format
        attrs["format_version"] = FORMAT_VERSION
        attrs["library_version"] = str(__version__)
        yield handle
        attrs["complete"] = True


def point_filename(directory: str, key: str) -> str:
    """The point file of the point with key ``key`` in ``directory``."""
    return os.path.join(directory, f"point-{key}.h5")


def write_point(directory: str, key: str, point: Mapping[str, Any], outcome: Outcome) -> str:
    """Write ``outcome`` of ``point`` (key ``key``) atomically into ``directory``;
    returns the file's name."""
    filename = point_filename(directory, key)
    with _new_file(filename, POINT_FORMAT) as handle:
        attrs = handle.attrs
        attrs["key"] = key
        attrs["point"] = point_json(point)
        attrs["status"] = outcome.status
        attrs["error"] = outcome.error
        attrs["seconds"] = float(outcome.seconds)
        write_datasets(handle.create_group("results"), outcome.arrays)
    return filename


def read_point(filename: str, key: str) -> Outcome:
    """The outcome in the point file ``filename``, which must be a complete point
    file of key ``key``; raises SweepFileError (naming the file) otherwise."""
    import h5py

    try:
        with h5py.File(filename, "r") as handle:
            attrs = handle.attrs
            if str(attrs.get("format", "")) != POINT_FORMAT:
                raise SweepFileError(f"{filename!r} is not a sweep point file")
            if not bool(attrs.get("complete", False)) or str(attrs.get("key", "")) != key:
                raise SweepFileError(f"sweep point file {filename!r} is incomplete or foreign")
            status = str(attrs["status"])
            if status not in STATUSES:
                raise SweepFileError(f"sweep point file {filename!r} has status {status!r}")
            return Outcome(
                status,
                _read_arrays(handle["results"]),
                str(attrs["error"]),
                float(attrs["seconds"]),
            )
    except SweepFileError:
        raise
    except Exception as error:  # damaged, truncated, a failed checksum
        raise SweepFileError(
            f"sweep point file {filename!r} cannot be read ({type(error).__name__}: {error})"
        ) from error


def grid_column(values: list[Any]) -> default_np.ndarray:
    """One parameter's values (one per point) as a 1-d array of one kind: bool,
    int64, float64 or text (JSON text if they mix kinds)."""
    kinds = {type(v) for v in values}
    if kinds == {bool}:
        return default_np.asarray(values, dtype=bool)
    if kinds == {int}:
        return default_np.asarray(values, dtype=default_np.int64)
    if kinds <= {int, float}:
        return default_np.asarray(values, dtype=default_np.float64)
    if kinds == {str}:
        return default_np.asarray(values, dtype=object)
    return default_np.asarray([json.dumps(v) for v in values], dtype=object)


def write_results(
    filename: str,
    names: Sequence[str],
    points: Sequence[Mapping[str, Any]],
    outcomes: Sequence[Outcome],
    function: str,
) -> None:
    """Write a whole sweep to ``filename`` atomically (layout: module docstring)."""
    import h5py

    text = h5py.string_dtype()
    with _new_file(filename, RESULTS_FORMAT) as handle:
        attrs = handle.attrs
        attrs["function"] = function
        attrs["parameters"] = json.dumps(list(names))
        attrs["num_points"] = len(points)
        attrs["num_failed"] = sum(o.status != "ok" for o in outcomes)
        handle.create_dataset("points", data=[point_json(p) for p in points], dtype=text)
        grid = handle.create_group("grid")
        for name in names:
            column = grid_column([p[name] for p in points])
            grid.create_dataset(name, data=column, dtype=text if column.dtype == object else None)
        handle.create_dataset("status", data=[o.status for o in outcomes], dtype=text)
        handle.create_dataset("errors", data=[o.error for o in outcomes], dtype=text)
        handle.create_dataset("seconds", data=[float(o.seconds) for o in outcomes])
        results = handle.create_group("results")
        for index, outcome in enumerate(outcomes):
            if outcome.status == "ok":
                write_datasets(results.create_group(f"{index:08d}"), outcome.arrays)


def read_results(
    filename: Any,
) -> tuple[list[str], list[dict[str, Any]], list[Outcome], str]:
    """(parameter names, points, outcomes, function name) of the results file
    ``filename``; raises FileNotFoundError or SweepFileError naming it."""
    filename = os.fspath(filename)
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"sweep results file {filename!r} does not exist")
    import h5py

    try:
        with h5py.File(filename, "r") as handle:
            attrs = handle.attrs
            if str(attrs.get("format", "")) != RESULTS_FORMAT:
                raise SweepFileError(f"{filename!r} is not a sweep results file")
            if not bool(attrs.get("complete", False)):
                raise SweepFileError(f"sweep results file {filename!r} is incomplete")
            names = json.loads(str(attrs["parameters"]))
            points = [json.loads(s) for s in handle["points"].asstr()[()]]
            statuses = list(handle["status"].asstr()[()])
            errors = list(handle["errors"].asstr()[()])
            seconds = handle["seconds"][()]
            results = handle["results"]
            outcomes = []
            for index, status in enumerate(statuses):
                key = f"{index:08d}"
                arrays = _read_arrays(results[key]) if status == "ok" else {}
                outcomes.append(Outcome(status, arrays, errors[index], float(seconds[index])))
            return names, points, outcomes, str(attrs["function"])
    except SweepFileError:
        raise
    except Exception as error:  # damaged, truncated, a failed checksum
        raise SweepFileError(
            f"sweep results file {filename!r} cannot be read: it is damaged, truncated or "
            f"of another kind ({type(error).__name__}: {error})"
        ) from error
