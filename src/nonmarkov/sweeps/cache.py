"""Process tensors cached in files: built once, read back after a crash or by the
next point of a sweep that needs the same bath."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..process_tensors.base import BaseProcessTensor
from ..process_tensors.file import import_process_tensor


def cached_process_tensor(
    filename: str | os.PathLike,
    build: Callable[[], BaseProcessTensor],
    process_tensor_type: str = "simple",
) -> BaseProcessTensor:
    """The process tensor in ``filename``, or ``build()`` written there first.

    If ``filename`` exists it is read with :func:`nonmarkov.import_process_tensor`
    (``process_tensor_type``: ``'simple'`` loads it into memory, ``'file'``
    reads steps on demand) and ``build`` is not called. Otherwise ``build()``
    (e.g. ``lambda: nonmarkov.pt_tempo_compute(bath, 0.0, 5.0, parameters)``)
    is exported to ``filename`` (its directory made if missing) and returned.
    The file appears only when complete (``export`` writes under a temporary
    name and renames), so a crash during the build or the write leaves no file
    and the next call builds again; two workers building the same file at once
    both write a complete file. A damaged file is an error naming it (remove it to build again).

    Choose one file per distinct bath and time grid, e.g.
    ``f"{cache}/pt-alpha{alpha}-dt{dt}.h5"``: the file is found by its name only.
    For a PT-TEMPO build that itself takes hours, ``pt_tempo_compute(...,
    process_tensor_file=..., resume=True)`` continues from its checkpoints
    (docs/process_tensor_files.md).
    """
    if not isinstance(filename, str | os.PathLike) or not os.fspath(filename):
        raise TypeError(f"filename must be a non-empty path (str or os.PathLike); got {filename!r}")
    if not callable(build):
        raise TypeError(
            f"build must be callable (no arguments, returns a process tensor); got {build!r}"
        )
    if process_tensor_type not in ("simple", "file"):
        raise ValueError(
            f"process_tensor_type must be 'simple' or 'file'; got {process_tensor_type!r}"
        )
    filename = os.fspath(filename)
    if os.path.exists(filename):
        return import_process_tensor(filename, process_tensor_type)
    os.makedirs(os.path.dirname(os.path.abspath(filename)), exist_ok=True)
    built: Any = build()
    if not isinstance(built, BaseProcessTensor):
        raise TypeError(f"build() must return a process tensor; got {type(built).__name__}")
    built.export(filename, overwrite=True)
    if process_tensor_type == "file":
        return import_process_tensor(filename, "file")
    return built
