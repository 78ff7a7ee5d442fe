"""Process tensors stored in HDF5 files (layout: docs/process_tensor_files.md).

A :class:`FileProcessTensor` reads its step tensors from the file on demand,
one step at a time, so a process tensor larger than memory can be used by
``compute_dynamics``. In write mode it appends step tensors to a temporary
file next to the target and renames it to the target only when
:meth:`FileProcessTensor.close` completes it: an interrupted run never leaves
a file under the target name, and every file carries a ``complete`` flag that
is checked on opening.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from typing import Any

import numpy as default_np

from .. import validation as check
from ..io.atomic import atomic_path
from .base import BaseProcessTensor, SimpleProcessTensor

FORMAT_NAME = "nonmarkov-process-tensor"
FORMAT_VERSION = 1
MODES = ("read", "write", "overwrite")
PROCESS_TENSOR_TYPES = ("file", "simple")
_TENSOR_GROUP = "tensors"


class ProcessTensorFileError(ValueError):
    """A file that cannot be read as a complete nonmarkov process tensor."""


def _h5py() -> Any:
    import h5py

    return h5py


def tensor_name(step: int) -> str:
    """Dataset name of step ``step`` inside the group ``tensors``: 8 digits."""
    return f"{step:08d}"


def _as_filename(filename: Any) -> str:
    if isinstance(filename, (str, os.PathLike)):
        name = os.fspath(filename)
        if isinstance(name, str) and name:
            return name
    raise TypeError(f"filename must be a non-empty path (str or os.PathLike); got {filename!r}")


def _as_metadata(metadata: Any) -> dict:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict (JSON-serialisable); got "
                        f"{type(metadata).__name__}")
    try:
        return json.loads(json.dumps(metadata))
    except (TypeError, ValueError) as error:
        raise TypeError(f"metadata must be JSON-serialisable: {error}") from error


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class FileProcessTensor(BaseProcessTensor):
    """A process tensor in an HDF5 file, read one step at a time.

    Parameters
    ----------
    filename : path of the file.
    mode : ``'read'`` (open an existing, complete file), ``'write'`` (create
        a new file; error if it exists) or ``'overwrite'`` (create, replacing
        an existing file once the new one is complete). The OQuPy order
        ``FileProcessTensor('read', filename)`` is accepted too.
    hilbert_space_dimension, dt : system dimension d and time step (write
        modes only; read from the file otherwise).
    transform_in, transform_out : (d^2, d^2) basis maps (write modes; None:
        identity).
    classes : (d^2,) class of each Liouville index (write modes; None:
        identity, m = d^2).
    name, description : optional text (write modes).
    metadata : JSON-serialisable dict stored with the file (write modes),
        e.g. the bath and parameters that made the process tensor.

    In write mode, append step tensors T[b, b', c] with :meth:`set`, then
    :meth:`close` (or leave a ``with`` block) to complete the file; leaving
    the block with an exception discards it. Step tensors are complex128.
    """

    def __init__(self, filename: Any, mode: str = "read",
                 hilbert_space_dimension: int | None = None, dt: float | None = None,
                 transform_in: Any = None, transform_out: Any = None, classes: Any = None,
                 name: str | None = None, description: str | None = None,
                 metadata: dict | None = None):
        if isinstance(filename, str) and filename in MODES and not (
                isinstance(mode, str) and mode in MODES):
            filename, mode = mode, filename  # OQuPy argument order (mode, filename)
        self._filename = _as_filename(filename)
        self._mode = check.choice(mode, MODES, "mode")
        self._handle: Any = None
        self._group: Any = None
        self._stack: contextlib.ExitStack | None = None
        self._temporary: str | None = None
        if self._mode == "read":
            given = {"hilbert_space_dimension": hilbert_space_dimension, "dt": dt,
                     "transform_in": transform_in, "transform_out": transform_out,
                     "classes": classes, "name": name, "description": description,
                     "metadata": metadata}
            extra = [key for key, value in given.items() if value is not None]
            if extra:
                raise ValueError(f"{extra} are read from the file in mode 'read'; pass them "
                                 f"only with mode 'write' or 'overwrite'")
            self._open_for_reading()
        else:
            if hilbert_space_dimension is None or dt is None:
                raise ValueError(f"mode {self._mode!r} needs hilbert_space_dimension and dt")
            super().__init__(hilbert_space_dimension, dt, transform_in, transform_out, name,
                             description, metadata=_as_metadata(metadata))
            self._classes = _check_classes(classes, self._dimension**2)
            self._num_classes = int(self._classes.max()) + 1
            self._shapes: list[tuple[int, int]] = []
            self._create()

    # ------------------------------------------------------------------ reading

    def _fail(self, problem: str) -> ProcessTensorFileError:
        return ProcessTensorFileError(f"process tensor file {self._filename!r} {problem}")

    def _open_for_reading(self) -> None:
        h5py = _h5py()
        if not os.path.exists(self._filename):
            raise FileNotFoundError(f"process tensor file {self._filename!r} does not exist")
        if os.path.isdir(self._filename):
            raise IsADirectoryError(f"process tensor file {self._filename!r} is a directory")
        if not h5py.is_hdf5(self._filename):
            raise self._fail("is not an HDF5 file (or its header is damaged)")
        try:
            handle = h5py.File(self._filename, "r")
        except OSError as error:
            if "unable to lock file" in str(error).lower():
                raise self._fail(f"is locked, probably being written by another process "
                                 f"({error})") from error
            raise self._fail(f"cannot be opened; it is damaged or truncated ({error})") from error
        try:
            self._read_header(handle)
        except ProcessTensorFileError:
            handle.close()
            raise
        except (OSError, KeyError, TypeError, ValueError) as error:
            handle.close()
            raise self._fail(f"is damaged: {type(error).__name__}: {error}") from error
        self._handle = handle
        self._group = handle[_TENSOR_GROUP]

    def _read_header(self, handle: Any) -> None:
        attrs = handle.attrs
        if "format" not in attrs or _text(attrs["format"]) != FORMAT_NAME:
            if "oqupy_version" in attrs:
                raise self._fail("is an OQuPy process-tensor file; nonmarkov reads only its "
                                 f"own format {FORMAT_NAME!r}")
            raise self._fail(f"is not a nonmarkov process-tensor file (its 'format' attribute "
                             f"is not {FORMAT_NAME!r})")
        version = attrs.get("format_version")
        if isinstance(version, (bool, default_np.bool_)) or not isinstance(
                version, (int, default_np.integer)):
            raise self._fail(f"has an invalid format_version {version!r}")
        library = _text(attrs.get("library_version", "unknown"))
        if int(version) > FORMAT_VERSION:
            raise self._fail(f"has format version {int(version)} (written by nonmarkov "
                             f"{library}); this nonmarkov reads format versions up to "
                             f"{FORMAT_VERSION}: upgrade nonmarkov to read it")
        if not bool(attrs.get("complete", False)):
            raise self._fail("is incomplete: the computation or export writing it did not "
                             "finish (it was interrupted or is still running)")
        self._format_version = int(version)
        self._library_version = library
        d = int(attrs["hilbert_space_dimension"])
        super().__init__(d, float(attrs["dt"]), handle["transform_in"][()],
                         handle["transform_out"][()], _text(attrs["name"]),
                         _text(attrs["description"]),
                         metadata=json.loads(_text(attrs.get("metadata", "{}"))))
        self._classes = _check_classes(handle["classes"][()], d * d)
        self._num_classes = int(self._classes.max()) + 1
        num_steps = int(attrs["num_steps"])
        bonds = default_np.asarray(handle["bond_dimensions"][()], dtype=int)
        stored = len(handle[_TENSOR_GROUP])
        if bonds.shape != (num_steps + 1,) or stored != num_steps:
            raise self._fail(f"is damaged: it should hold {num_steps} step tensors and "
                             f"{num_steps + 1} bond dimensions, but holds {stored} tensors and "
                             f"{bonds.size} bond dimensions")
        self._shapes = [(int(a), int(b)) for a, b in zip(bonds[:-1], bonds[1:])]

    # ------------------------------------------------------------------ writing

    def _create(self) -> None:
        h5py = _h5py()
        directory = os.path.dirname(os.path.abspath(self._filename))
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"cannot write process tensor file {self._filename!r}: "
                                    f"directory {directory!r} does not exist")
        if self._mode == "write" and os.path.exists(self._filename):
            raise FileExistsError(f"process tensor file {self._filename!r} exists; use "
                                  f"mode='overwrite' (or overwrite=True) to replace it")
        stack = contextlib.ExitStack()
        self._temporary = stack.enter_context(atomic_path(self._filename))
        self._stack = stack
        try:
            handle = h5py.File(self._temporary, "w")
            from .. import __version__

            attrs = handle.attrs
            attrs["format"] = FORMAT_NAME
            attrs["format_version"] = default_np.int64(FORMAT_VERSION)
            attrs["library_version"] = str(__version__)
            attrs["complete"] = False
            attrs["name"] = self.name
            attrs["description"] = self.description
            attrs["metadata"] = json.dumps(self.metadata)
            attrs["hilbert_space_dimension"] = default_np.int64(self._dimension)
            attrs["dt"] = float(self._dt)
            attrs["num_steps"] = default_np.int64(0)
            handle.create_dataset("classes", data=self._classes.astype(default_np.int64))
            handle.create_dataset("transform_in", data=self.transform_in)
            handle.create_dataset("transform_out", data=self.transform_out)
            group = handle.create_group(_TENSOR_GROUP)
        except BaseException:
            self._discard()
            raise
        self._handle = handle
        self._group = group

    def set(self, step: int, tensor: Any) -> None:
        """Write the tensor T[b, b', c] of ``step`` (appending if step == len); write modes."""
        self._require_open(writing=True)
        step = check.positive_integer(step, "step", minimum=0)
        array = default_np.asarray(tensor, dtype=default_np.complex128)
        if array.ndim != 3 or array.shape[2] != self._num_classes:
            raise ValueError(f"a step tensor must have shape (b, b', {self._num_classes}); "
                             f"got {array.shape}")
        length = len(self._shapes)
        if step > length:
            raise ValueError(f"step {step} is beyond the end ({length}) of the process tensor")
        if step == length and length and array.shape[0] != self._shapes[-1][1]:
            raise ValueError(f"step tensor {step} has left bond {array.shape[0]} but step "
                             f"{step - 1} has right bond {self._shapes[-1][1]}")
        key = tensor_name(step)
        if step < length:
            del self._group[key]
        self._group.create_dataset(key, data=array)
        if step == length:
            self._shapes.append(array.shape[:2])
        else:
            self._shapes[step] = array.shape[:2]

    def close(self) -> None:
        """Complete and close a file being written, or close a file being read.

        In write mode the file is marked complete, flushed and renamed from
        its temporary name to ``filename``. Does nothing if already closed.
        """
        if self._handle is None:
            return
        if self._mode == "read":
            self._handle.close()
            self._handle = self._group = None
            return
        try:
            bonds = self.get_bond_dimensions() if self._shapes else default_np.ones(1, dtype=int)
            self._handle.create_dataset("bond_dimensions", data=bonds.astype(default_np.int64))
            self._handle.attrs["num_steps"] = default_np.int64(len(self._shapes))
            self._handle.attrs["complete"] = True
            self._handle.close()
            self._handle = self._group = None
            with open(self._temporary, "rb") as raw:
                os.fsync(raw.fileno())
            if self._mode == "write" and os.path.exists(self._filename):
                raise FileExistsError(f"process tensor file {self._filename!r} appeared while "
                                      f"it was being written; the new file was discarded")
        except BaseException:
            self._discard()
            raise
        stack, self._stack = self._stack, None
        stack.close()  # renames the temporary file to the target

    def abort(self) -> None:
        """Discard a file being written (the target is left untouched); close otherwise."""
        if self._mode == "read":
            self.close()
        else:
            self._discard()

    def _discard(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(Exception):
                self._handle.close()
            self._handle = self._group = None
        if self._stack is not None:
            stack, self._stack = self._stack, None
            interrupted = RuntimeError("process tensor file discarded")
            stack.__exit__(RuntimeError, interrupted, None)  # removes the temporary file

    def remove(self) -> None:
        """Close the file and delete it (a file being written is discarded)."""
        if self._mode != "read" and self._handle is not None:
            self._discard()
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
        if getattr(self, "_handle", None) is None and getattr(self, "_stack", None) is None:
            return
        if getattr(self, "_mode", "read") != "read":
            warnings.warn(f"FileProcessTensor {self._filename!r} was never closed; the "
                          f"incomplete file was discarded", ResourceWarning, stacklevel=2)
        with contextlib.suppress(Exception):
            self.abort()

    # ------------------------------------------------------------------ access

    def _require_open(self, writing: bool = False) -> None:
        if writing and self._mode == "read":
            raise ValueError(f"FileProcessTensor {self._filename!r} is open for reading; "
                             f"open it with mode 'write' or 'overwrite' to add tensors")
        if self._handle is None:
            raise ValueError(f"FileProcessTensor {self._filename!r} is closed; open it again "
                             f"with import_process_tensor({self._filename!r})")

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
        return self._handle is None

    @property
    def classes(self) -> default_np.ndarray:
        """Class of each Liouville index, (d^2,)."""
        return self._classes.copy()

    @property
    def library_version(self) -> str:
        """nonmarkov version that wrote the file (this one for a file being written)."""
        if self._mode == "read":
            return self._library_version
        from .. import __version__

        return str(__version__)

    @property
    def format_version(self) -> int:
        """Version of the file layout."""
        return self._format_version if self._mode == "read" else FORMAT_VERSION

    def __len__(self) -> int:
        return len(self._shapes)

    def get_bond_dimensions(self) -> default_np.ndarray:
        """Bond dimensions (N + 1,): [1, b_0, ..., b_{N-2}, 1]; empty if N = 0."""
        if not self._shapes:
            return default_np.zeros(0, dtype=int)
        return default_np.array([shape[0] for shape in self._shapes] + [self._shapes[-1][1]])

    def get_step_tensor(self, step: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(T[b, b', c] complex128, classes (d^2,)) of ``step``, read from the file."""
        length = len(self)
        if isinstance(step, bool) or not isinstance(step, (int, default_np.integer)):
            raise TypeError(f"step must be an integer; got {step!r}")
        if not 0 <= step < length:
            raise IndexError(f"step {step} outside the process tensor (length {length})")
        self._require_open()
        expected = tuple(self._shapes[step]) + (self._num_classes,)
        h5py = _h5py()
        try:  # the low-level interface: a third of the high-level overhead per step
            dataset = h5py.h5d.open(self._group.id, tensor_name(int(step)).encode())
            if dataset.shape != expected:
                raise self._fail(f"is damaged: step tensor {step} has shape {dataset.shape}, "
                                 f"expected {expected}")
            tensor = default_np.empty(expected, dtype=default_np.complex128)
            dataset.read(h5py.h5s.ALL, h5py.h5s.ALL, tensor)
        except (OSError, KeyError, TypeError) as error:
            raise self._fail(f"is damaged: step tensor {step} cannot be read ({error})"
                             ) from error
        return tensor, self._classes

    def __str__(self) -> str:
        bonds = self.get_bond_dimensions()
        largest = int(bonds.max()) if bonds.size else 0
        state = "closed" if self.closed else f"mode {self._mode!r}"
        return (f"FileProcessTensor {self.name!r} ({self._filename!r}, {state}): {len(self)} "
                f"steps of dt={self.dt}, dimension {self.dimension}, max bond dimension "
                f"{largest}")


def _check_classes(classes: Any, d2: int) -> default_np.ndarray:
    if classes is None:
        return default_np.arange(d2)
    array = default_np.asarray(classes)
    if array.shape != (d2,) or array.dtype.kind not in "iu" or array.min() < 0:
        raise ValueError(f"classes must be {d2} non-negative integers")
    return array.astype(int)


def write_process_tensor(process_tensor: BaseProcessTensor, filename: Any,
                         overwrite: bool = False) -> None:
    """Write any process tensor to ``filename`` (complete file, or nothing on failure)."""
    if not isinstance(process_tensor, BaseProcessTensor):
        raise TypeError(f"process_tensor must be a process tensor; got "
                        f"{type(process_tensor).__name__}")
    if process_tensor.dt is None:
        raise ValueError("a process tensor without time grid (dt is None, e.g. a "
                         "TrivialProcessTensor) cannot be written to a file")
    filename = _as_filename(filename)
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite must be True or False; got {overwrite!r}")
    if os.path.exists(filename) and not overwrite:
        raise FileExistsError(f"{filename!r} exists; pass overwrite=True to replace it")
    classes = getattr(process_tensor, "classes", None)
    if classes is None and len(process_tensor):
        classes = process_tensor.get_step_tensor(0)[1]
    with FileProcessTensor(
            filename, "overwrite" if overwrite else "write",
            process_tensor.hilbert_space_dimension, process_tensor.dt,
            process_tensor.transform_in, process_tensor.transform_out, classes,
            process_tensor.name, process_tensor.description,
            getattr(process_tensor, "metadata", None)) as file_pt:
        for step in range(len(process_tensor)):
            file_pt.set(step, process_tensor.get_step_tensor(step)[0])


def import_process_tensor(filename: Any, process_tensor_type: str | None = None
                          ) -> BaseProcessTensor:
    """Open a process-tensor file.

    ``process_tensor_type``: ``'file'`` (default) returns a
    :class:`FileProcessTensor` that reads steps on demand; ``'simple'`` loads
    every step into a :class:`~nonmarkov.SimpleProcessTensor` and closes the
    file.
    """
    kind = "file" if process_tensor_type is None else process_tensor_type
    kind = check.choice(kind, PROCESS_TENSOR_TYPES, "process_tensor_type")
    file_pt = FileProcessTensor(filename, "read")
    if kind == "file":
        return file_pt
    try:
        pt = SimpleProcessTensor(
            file_pt.hilbert_space_dimension, file_pt.dt, file_pt.transform_in,
            file_pt.transform_out, file_pt.classes, file_pt.name, file_pt.description,
            metadata=file_pt.metadata)
        for step in range(len(file_pt)):
            pt.set(step, file_pt.get_step_tensor(step)[0])
    finally:
        file_pt.close()
    return pt
