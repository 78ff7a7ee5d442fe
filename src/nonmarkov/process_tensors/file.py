"""Process tensors stored in HDF5 files (layout: docs/process_tensor_files.md).

A :class:`FileProcessTensor` reads its step tensors from the file on demand,
one step at a time, so a process tensor larger than memory can be used by
``compute_dynamics``. In write mode it appends step tensors to a temporary
file next to the target and renames it to the target only when
:meth:`FileProcessTensor.close` completes it: an interrupted run never leaves
a file under the target name, and every file carries a ``complete`` flag that
is checked on opening. The file format itself is :mod:`.hdf5`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import uuid
import warnings
from typing import Any

import numpy as default_np

from .. import validation as check
from ..kernels.chain import cap_before
from . import hdf5
from .base import (
    BaseProcessTensor,
    SimpleProcessTensor,
    bond_dimensions,
    describe_steps,
    mpo_to_step_tensor,
    trace_weights,
)
from .hdf5 import FORMAT_NAME as FORMAT_NAME
from .hdf5 import FORMAT_VERSION as FORMAT_VERSION
from .hdf5 import ProcessTensorFileError as ProcessTensorFileError
from .hdf5 import tensor_name as tensor_name
from .oqupy_file import read_if_oqupy

MODES = ("read", "write", "overwrite")
PROCESS_TENSOR_TYPES = ("file", "simple")


def _is_mode(value: Any) -> bool:
    return isinstance(value, str) and value in MODES


def _mode_and_filename(first: Any, second: Any) -> tuple[Any, Any]:
    """(mode, filename) of the first two arguments of :class:`FileProcessTensor`:
    ``(mode, filename)`` if the first is a mode, else ``(filename, mode)``,
    the mode ``'read'`` if only a filename is given."""
    if _is_mode(first):
        return first, second
    if first is None:
        if second is None:
            raise TypeError("FileProcessTensor needs a mode and a filename")
        return "read", second
    return ("read" if second is None else second), first


def automatic_filename() -> str:
    """A new name ``pt_<random>.hdf5`` in the temporary directory."""
    return os.path.join(tempfile.gettempdir(), f"pt_{uuid.uuid4().hex[:12]}.hdf5")


class FileProcessTensor(BaseProcessTensor):
    """A process tensor in an HDF5 file, read one step at a time.

    ``FileProcessTensor(mode, filename=None, hilbert_space_dimension=None,
    dt=None, transform_in=None, transform_out=None, name=None,
    description=None, *, classes=None, metadata=None)``: OQuPy's positional
    order. Also accepted: ``FileProcessTensor(filename)`` (read) and
    ``FileProcessTensor(filename, mode, ...)``. The rule: the first argument
    is the mode if it is one of ``'read'``, ``'write'``, ``'overwrite'``;
    otherwise it is the filename and the second argument (default
    ``'read'``) the mode. A file literally named like a mode is given as
    ``filename=`` or with a directory (``'./read'``).

    Parameters
    ----------
    mode : ``'read'`` (open an existing, complete file), ``'write'`` (create
        a new file; error if it exists) or ``'overwrite'`` (create, replacing
        an existing file once the new one is complete).
    filename : path of the file. None in a write mode: an automatic name
        ``pt_<random>.hdf5`` in the temporary directory (``filename`` tells
        which).
    hilbert_space_dimension, dt : system dimension d and time step (write
        modes only; read from the file otherwise).
    transform_in, transform_out : (d^2, d^2) basis maps on column vectors
        (write modes; None: identity).
    name, description : optional text (write modes).
    classes : (d^2,) class of each Liouville index (write modes; None:
        identity, m = d^2).
    metadata : JSON-serialisable dict stored with the file (write modes),
        e.g. the bath and parameters that made the process tensor.
    resume_from, keep : write modes: continue the temporary file of an
        interrupted write (:attr:`temporary_filename`, left by :meth:`suspend`
        or by a killed process) after its first ``keep`` step tensors.

    In write mode, append step tensors T[b, b', c] with :meth:`set` (or
    OQuPy-layout MPO tensors with :meth:`set_mpo_tensor`), then
    :meth:`close` (or leave a ``with`` block) to complete the file; leaving
    the block with an exception discards it. Step tensors are complex128.
    Caps set with :meth:`set_cap_tensor` are held in memory, not in the file.
    """

    def __init__(
        self,
        mode: Any = None,
        filename: Any = None,
        hilbert_space_dimension: int | None = None,
        dt: float | None = None,
        transform_in: Any = None,
        transform_out: Any = None,
        name: Any = None,
        description: Any = None,
        *,
        classes: Any = None,
        metadata: dict | None = None,
        resume_from: str | None = None,
        keep: int = 0,
    ):
        mode, filename = _mode_and_filename(mode, filename)
        self._mode = check.choice(mode, MODES, "mode")
        if filename is None:
            if self._mode == "read":
                raise TypeError("FileProcessTensor in mode 'read' needs a filename")
            filename = automatic_filename()
        self._filename = hdf5.check_filename(filename)
        self._reader: hdf5.Reader | None = None  # mode 'read'
        self._writer: hdf5.Writer | None = None  # modes 'write' and 'overwrite'
        if self._mode == "read":
            given = {
                "hilbert_space_dimension": hilbert_space_dimension,
                "dt": dt,
                "transform_in": transform_in,
                "transform_out": transform_out,
                "classes": classes,
                "name": name,
                "description": description,
                "metadata": metadata,
            }
            extra = [key for key, value in given.items() if value is not None]
            if extra:
                raise ValueError(
                    f"{extra} are read from the file in mode 'read'; pass them "
                    f"only with mode 'write' or 'overwrite'"
                )
            self._open_for_reading()
        else:
            if hilbert_space_dimension is None or dt is None:
                raise ValueError(f"mode {self._mode!r} needs hilbert_space_dimension and dt")
            super().__init__(
                hilbert_space_dimension,
                dt,
                transform_in,
                transform_out,
                name,
                description,
                metadata=hdf5.check_metadata(metadata),
            )
            self._classes = check.liouville_classes(classes, self._dimension**2)
            self._writer = hdf5.Writer(
                self._filename, self._header(), self._mode == "overwrite", resume_from, keep
            )
        self._shapes = self._open_file().shapes
        if self._mode == "read":
            self._check_traced_trace()

    def _check_traced_trace(self) -> None:
        """On read: the trace of the whole process tensor with a traced future (cap_0)
        must be 1 within ``TRACE_FILE_FACTOR`` x steps x the stored epsrel (a physical
        bath's process tensor keeps it to its truncation), and no step tensor may be all
        zeros; else the file is damaged. One backward pass, a step at a time. A file
        without a stored epsrel (not built from a bath) is checked for zero steps only;
        a step that cannot be read at all is reported when it is read."""
        reader = self._reader
        if reader is None:
            return
        length = len(self._shapes)
        parameters = self.metadata.get("parameters") if isinstance(self.metadata, dict) else None
        epsrel = parameters.get("epsrel") if isinstance(parameters, dict) else None
        weights = trace_weights(self._classes, self._dimension)
        cap = default_np.ones(1, dtype=complex)
        for step in range(length - 1, -1, -1):
            try:
                tensor = reader.read_step(step)
            except ProcessTensorFileError:
                return  # a step that cannot be read is reported when it is read
            if not default_np.any(tensor):
                reader.close()
                raise hdf5.file_error(
                    self._filename,
                    f"is damaged: step tensor {step} ({hdf5.tensor_name(step)}) is all zeros",
                )
            cap = cap_before(tensor, weights, cap, xp=default_np)
        if not isinstance(epsrel, (int, float)) or isinstance(epsrel, bool) or length == 0:
            return
        trace = complex(cap[0])
        tolerance = min(TRACE_FILE_CEILING, max(1e-8, TRACE_FILE_FACTOR * length * epsrel))
        if not abs(trace - 1.0) <= tolerance:
            reader.close()
            raise hdf5.file_error(
                self._filename,
                f"is damaged: its trace with a traced future is {trace:.6g}, not 1 within "
                f"{tolerance:.3g} ({length} steps at the stored epsrel {epsrel:g}); a step "
                "tensor of tensors/ was changed",
            )

    def _header(self) -> hdf5.Header:
        return hdf5.Header(
            self._dimension,
            self.time_step(),
            self.transform_in,
            self.transform_out,
            self._classes,
            self.name,
            self.description,
            self.metadata,
        )

    def _open_for_reading(self) -> None:
        reader = hdf5.Reader(self._filename)
        header = reader.header
        try:
            super().__init__(
                header.hilbert_space_dimension,
                header.dt,
                header.transform_in,
                header.transform_out,
                header.name,
                header.description,
                metadata=header.metadata,
            )
        except (TypeError, ValueError) as error:
            reader.close()
            raise hdf5.file_error(
                self._filename, f"is damaged: {type(error).__name__}: {error}"
            ) from error
        self._classes = header.classes
        self._reader = reader

    def _open_file(self) -> hdf5.Reader | hdf5.Writer:
        file = self._reader if self._mode == "read" else self._writer
        if file is None:
            raise ValueError(f"FileProcessTensor {self._filename!r} is not open")
        return file

    # ------------------------------------------------------------------ writing

    def set(self, step: int, tensor: Any) -> None:
        """Write the tensor T[b, b', c] of ``step`` (appending if step == len); write modes."""
        self._require_open(writing=True)
        if self._writer is not None:
            self._writer.write_step(step, tensor)
            self._tensor_changed(int(step), self._shapes[int(step)])

    def set_mpo_tensor(self, step: int, tensor: Any) -> None:
        """Write the MPO tensor of ``step`` in OQuPy's layout (untransformed):
        (b, b', d^2, d^2) diagonal in its system legs, or (b, b', d^2); see
        :meth:`BaseProcessTensor.set_mpo_tensor`. Write modes."""
        self._require_open(writing=True)
        self.set(step, mpo_to_step_tensor(tensor, self._classes))

    def close(self) -> None:
        """Complete and close a file being written, or close a file being read.

        In write mode the file is marked complete, flushed and renamed from
        its temporary name to ``filename``. Does nothing if already closed.
        """
        if self._reader is not None:
            self._reader.close()
        elif self._writer is not None:
            self._writer.complete()

    @property
    def temporary_filename(self) -> str | None:
        """The temporary file a write mode writes to (renamed on :meth:`close`), else None."""
        return None if self._writer is None else self._writer.temporary

    def flush(self) -> None:
        """Write modes: put everything written so far on disk."""
        if self._writer is not None:
            self._writer.flush()

    def suspend(self) -> None:
        """Write modes: close, leaving the temporary file for a resumed write
        (``resume_from``); the target is left untouched."""
        if self._writer is not None:
            self._writer.suspend()

    def abort(self) -> None:
        """Discard a file being written (the target is left untouched); close otherwise."""
        if self._mode == "read":
            self.close()
        elif self._writer is not None:
            self._writer.discard()

    def remove(self) -> None:
        """Close the file and delete it (a file being written is discarded)."""
        if self._mode != "read" and not self.closed:
            self.abort()
            return
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._filename)

    def __enter__(self) -> FileProcessTensor:
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        file = getattr(self, "_reader", None) or getattr(self, "_writer", None)
        if file is None or file.closed:
            return
        if getattr(self, "_mode", "read") != "read":
            warnings.warn(
                f"FileProcessTensor {self._filename!r} was never closed; the "
                f"incomplete file was discarded",
                ResourceWarning,
                stacklevel=2,
            )
        with contextlib.suppress(Exception):
            self.abort()

    # ------------------------------------------------------------------ access

    def _require_open(self, writing: bool = False) -> None:
        if writing and self._mode == "read":
            raise ValueError(
                f"FileProcessTensor {self._filename!r} is open for reading; "
                f"open it with mode 'write' or 'overwrite' to add tensors"
            )
        if self.closed:
            raise ValueError(
                f"FileProcessTensor {self._filename!r} is closed; open it again "
                f"with import_process_tensor({self._filename!r})"
            )

    @property
    def filename(self) -> str:
        """Path of the file (the target name, also while writing)."""
        return self._filename

    @property
    def mode(self) -> str:
        """``'read'``, ``'write'`` or ``'overwrite'``."""
        return self._mode

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        file = self._reader if self._mode == "read" else self._writer
        return file is None or file.closed

    @property
    def classes(self) -> default_np.ndarray:
        """Class of each Liouville index, (d^2,)."""
        return self._classes.copy()

    @property
    def library_version(self) -> str:
        """nonmarkov version that wrote the file (this one for a file being written)."""
        if self._reader is not None:
            return self._reader.header.library_version
        return hdf5.LIBRARY_VERSION

    @property
    def format_version(self) -> int:
        """Version of the file layout."""
        return self._reader.header.format_version if self._reader is not None else FORMAT_VERSION

    def __len__(self) -> int:
        return len(self._shapes)

    def get_bond_dimensions(self) -> default_np.ndarray:
        """Bond dimensions (N + 1,): [1, b_0, ..., b_{N-2}, 1]; empty if N = 0."""
        return bond_dimensions(self._shapes)

    def get_step_tensor(self, step: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(T[b, b', c] complex128, classes (d^2,)) of ``step``, read from the file."""
        length = len(self)
        if isinstance(step, bool) or not isinstance(step, (int, default_np.integer)):
            raise TypeError(f"step must be an integer; got {step!r}")
        if not 0 <= step < length:
            raise IndexError(f"step {step} outside the process tensor (length {length})")
        self._require_open()
        return self._open_file().read_step(int(step)), self._classes

    def __str__(self) -> str:
        state = "closed" if self.closed else f"mode {self._mode!r}"
        return (
            f"FileProcessTensor {self.name!r} ({self._filename!r}, {state}): {describe_steps(self)}"
        )


#: a file's traced trace may be off 1 by this many times steps x epsrel (at most
#: TRACE_FILE_CEILING, so that a zeroed or sign-flipped step is always found)
TRACE_FILE_FACTOR = 10.0
TRACE_FILE_CEILING = 0.9


def import_process_tensor(
    filename: Any, process_tensor_type: str | None = None
) -> BaseProcessTensor:
    """Open a process-tensor file: nonmarkov's own format, or an OQuPy 0.5 file.

    ``process_tensor_type``: ``'file'`` (default) returns a
    :class:`FileProcessTensor` that reads steps on demand; ``'simple'`` loads
    every step into a :class:`~nonmarkov.SimpleProcessTensor` and closes the
    file. A file written by OQuPy is converted on read into a
    ``SimpleProcessTensor`` whatever the type asked for (its layout is checked
    first, :mod:`nonmarkov.process_tensors.oqupy_file`); to use it from a
    file, convert it once with :func:`convert_process_tensor`.
    """
    kind = "file" if process_tensor_type is None else process_tensor_type
    kind = check.choice(kind, PROCESS_TENSOR_TYPES, "process_tensor_type")
    if isinstance(filename, (str, os.PathLike)):
        from_oqupy = read_if_oqupy(hdf5.check_filename(filename))
        if from_oqupy is not None:
            return from_oqupy
    file_pt = FileProcessTensor("read", filename)
    if kind == "file":
        return file_pt
    try:
        pt = SimpleProcessTensor(
            file_pt.hilbert_space_dimension,
            file_pt.time_step(),
            file_pt.transform_in,
            file_pt.transform_out,
            file_pt.name,
            file_pt.description,
            classes=file_pt.classes,
            metadata=file_pt.metadata,
        )
        for step in range(len(file_pt)):
            pt.set(step, file_pt.get_step_tensor(step)[0])
    finally:
        file_pt.close()
    return pt


def convert_process_tensor(source: Any, target: Any, overwrite: bool = False) -> str:
    """Write the process tensor of the file ``source`` (an OQuPy 0.5 file, or one
    of nonmarkov's) to ``target`` in nonmarkov's format; return ``target``.

    ``source`` is read and checked whole before anything is written; the new
    file appears only when complete, and an existing ``target`` is refused
    unless ``overwrite=True`` (FileExistsError). The result is a file that
    :func:`import_process_tensor` opens as a :class:`FileProcessTensor`.
    """
    source = hdf5.check_filename(source)
    target = hdf5.check_target(target, overwrite)
    if os.path.exists(source) and os.path.exists(target) and os.path.samefile(source, target):
        raise ValueError(f"source and target are the same file ({source!r})")
    pt = import_process_tensor(source, "simple")
    pt.export(target, overwrite=overwrite)
    return target


def leftover_files(directory: Any, remove: bool = False) -> list[str]:
    """The files interrupted writes left in ``directory``: temporary files
    ``.tmp-<random><name>`` that no checkpoint (``<name>.checkpoint.npz``) can resume,
    and checkpoints whose temporary file is gone. ``remove=True`` deletes them.
    Temporary files a checkpoint points to are kept (``resume=True`` continues them);
    so are files modified in the last minute (a write may still be running)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise NotADirectoryError(f"{directory!r} is not a directory")
    names = os.listdir(directory)
    resumable, stale = set(), []
    for name in names:
        if not name.endswith(".checkpoint.npz"):
            continue
        path = os.path.join(directory, name)
        try:
            with default_np.load(path, allow_pickle=False) as data:
                partial = os.path.abspath(str(data["temporary"]))
        except Exception:  # an unreadable checkpoint cannot resume anything
            stale.append(path)
            continue
        if os.path.exists(partial):
            resumable.add(partial)
        else:
            stale.append(path)
    now = time.time()
    temporaries = [
        os.path.join(directory, name)
        for name in names
        if name.startswith(".tmp-")
        and os.path.abspath(os.path.join(directory, name)) not in resumable
        and now - os.path.getmtime(os.path.join(directory, name)) > 60.0
    ]
    found = sorted(temporaries + stale)
    if remove:
        for path in found:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
    return found
