"""The process-tensor file format (HDF5; layout: docs/process_tensor_files.md).

This module knows the file layout and nothing of process-tensor classes:
:class:`Writer` writes a file under a temporary name next to the target and
renames it only once it is marked complete; :class:`Reader` opens a complete
file, checks its header and reads one step tensor at a time;
:func:`write_file` writes a whole file from a :class:`Header` and the step
tensors. The classes built on it are in :mod:`nonmarkov.process_tensors.file`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as default_np

from .. import validation as check
from .._version import __version__
from ..cost import physical_memory
from ..io.atomic import atomic_path

FORMAT_NAME = "nonmarkov-process-tensor"
FORMAT_VERSION = 1
LIBRARY_VERSION = str(__version__)
TENSOR_GROUP = "tensors"


class ProcessTensorFileError(ValueError):
    """A file that cannot be read as a complete nonmarkov process tensor."""


def tensor_name(step: int) -> str:
    """Dataset name of step ``step`` inside the group ``tensors``: 8 digits."""
    return f"{step:08d}"


def file_error(filename: str, problem: str) -> ProcessTensorFileError:
    """The error for ``filename``, e.g. ``file_error(name, "is damaged: ...")``."""
    return ProcessTensorFileError(f"process tensor file {filename!r} {problem}")


def check_filename(filename: Any) -> str:
    """``filename`` as a non-empty ``str`` path (TypeError otherwise)."""
    if isinstance(filename, (str, os.PathLike)):
        name = os.fspath(filename)
        if isinstance(name, str) and name:
            return name
    raise TypeError(f"filename must be a non-empty path (str or os.PathLike); got {filename!r}")


def check_metadata(metadata: Any) -> dict:
    """``metadata`` as a file stores it: checked (:func:`nonmarkov.validation.metadata`)
    and round-tripped through JSON ({} for None)."""
    return json.loads(json.dumps(check.metadata(metadata)))


def check_target(filename: Any, overwrite: bool) -> str:
    """Check a target of :func:`write_file` before anything is written; return it as str."""
    filename = check_filename(filename)
    overwrite = check.boolean(overwrite, "overwrite")
    if os.path.exists(filename) and not overwrite:
        raise FileExistsError(f"{filename!r} exists; pass overwrite=True to replace it")
    return filename


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Header:
    """What a file stores besides its step tensors.

    ``transform_in``, ``transform_out``: (d^2, d^2) complex; ``classes``:
    (d^2,) ints, checked by :func:`nonmarkov.validation.liouville_classes`; ``metadata``: a
    JSON-serialisable dict. ``format_version`` and ``library_version`` are
    read from a file; :class:`Writer` always writes this module's.
    """

    hilbert_space_dimension: int
    dt: float
    transform_in: default_np.ndarray
    transform_out: default_np.ndarray
    classes: default_np.ndarray
    name: str
    description: str
    metadata: dict
    format_version: int = FORMAT_VERSION
    library_version: str = LIBRARY_VERSION

    @property
    def num_classes(self) -> int:
        """m = max(classes) + 1, the last dimension of every step tensor."""
        return int(default_np.max(self.classes)) + 1


def _read_step(
    group: Any, filename: str, step: int, expected: tuple[int, ...]
) -> default_np.ndarray:
    import h5py

    try:  # the low-level interface: a third of the high-level overhead per step
        dataset = h5py.h5d.open(group.id, tensor_name(int(step)).encode())
        if dataset.shape != expected:
            raise file_error(
                filename,
                f"is damaged: step tensor {step} has shape {dataset.shape}, expected {expected}",
            )
        size = 16 * math.prod(int(n) for n in expected)
        if size > physical_memory() // 2:
            raise file_error(
                filename,
                f"is damaged or too large: step tensor {step} declares the shape {expected}, "
                f"{size / 2**30:.3g} GiB, more than half of this machine's memory",
            )
        tensor = default_np.empty(expected, dtype=default_np.complex128)
        dataset.read(h5py.h5s.ALL, h5py.h5s.ALL, tensor)
    except (OSError, KeyError, TypeError) as error:
        raise file_error(
            filename, f"is damaged: step tensor {step} cannot be read ({error})"
        ) from error
    if not default_np.all(default_np.isfinite(tensor)):
        raise file_error(filename, f"is damaged: step tensor {step} has NaN or infinite entries")
    return tensor


def _check_header_agrees(filename: str, header: Header) -> None:
    """The attributes must agree with the arrays and with the stored metadata (the
    time step and dimension the process tensor was made with), else the file is damaged."""
    d2 = header.hilbert_space_dimension**2
    for name, array in (
        ("transform_in", header.transform_in),
        ("transform_out", header.transform_out),
    ):
        if default_np.shape(array) != (d2, d2):
            raise file_error(
                filename,
                f"is damaged: {name} has shape {default_np.shape(array)}, but the "
                f"dimension {header.hilbert_space_dimension} needs {(d2, d2)}",
            )
    made_with = header.metadata.get("parameters", {}).get("dt")
    if isinstance(made_with, (int, float)) and abs(made_with - header.dt) > 1e-12 * max(
        1.0, abs(made_with)
    ):
        raise file_error(
            filename,
            f"is damaged: its dt attribute ({header.dt}) differs from the dt it was made "
            f"with ({made_with}, in its metadata)",
        )
    coupling = header.metadata.get("bath", {}).get("coupling_operator_real")
    if coupling is not None and default_np.shape(coupling) != (
        header.hilbert_space_dimension,
        header.hilbert_space_dimension,
    ):
        raise file_error(
            filename,
            f"is damaged: its dimension attribute ({header.hilbert_space_dimension}) differs "
            f"from its bath's coupling operator ({default_np.shape(coupling)}, in its metadata)",
        )


class Reader:
    """A complete file open for reading: its :class:`Header` and step shapes.

    Raises FileNotFoundError, IsADirectoryError, or ProcessTensorFileError
    for a file that is not a complete nonmarkov process tensor of a format
    version up to :data:`FORMAT_VERSION`.
    """

    def __init__(self, filename: str):
        self.filename = filename
        import h5py

        if not os.path.exists(filename):
            raise FileNotFoundError(f"process tensor file {filename!r} does not exist")
        if os.path.isdir(filename):
            raise IsADirectoryError(f"process tensor file {filename!r} is a directory")
        if not os.path.isfile(filename):
            raise file_error(filename, "is not a regular file (a FIFO, a device?)")
        if not h5py.is_hdf5(filename):
            raise file_error(filename, "is not an HDF5 file (or its header is damaged)")
        try:
            handle = h5py.File(filename, "r")
        except OSError as error:
            if "unable to lock file" in str(error).lower():
                raise file_error(
                    filename, f"is locked, probably being written by another process ({error})"
                ) from error
            raise file_error(
                filename, f"cannot be opened; it is damaged or truncated ({error})"
            ) from error
        try:
            self.header, self.shapes = self._read_header(handle)
            self.num_classes = self.header.num_classes
            self._group = handle[TENSOR_GROUP]
        except ProcessTensorFileError:
            handle.close()
            raise
        except (OSError, KeyError, TypeError, ValueError) as error:
            handle.close()
            raise file_error(filename, f"is damaged: {type(error).__name__}: {error}") from error
        self._handle: Any = handle

    def _read_header(self, handle: Any) -> tuple[Header, list[tuple[int, int]]]:
        attrs = handle.attrs
        if "format" not in attrs or _text(attrs["format"]) != FORMAT_NAME:
            if "oqupy_version" in attrs:
                raise file_error(
                    self.filename,
                    f"is an OQuPy process-tensor file, not nonmarkov's format {FORMAT_NAME!r}: "
                    "nonmarkov.import_process_tensor converts it on read, "
                    "nonmarkov.convert_process_tensor converts it to a file",
                )
            raise file_error(
                self.filename,
                f"is not a nonmarkov process-tensor file (its "
                f"'format' attribute is not {FORMAT_NAME!r})",
            )
        version = attrs.get("format_version")
        if isinstance(version, (bool, default_np.bool_)) or not isinstance(
            version, (int, default_np.integer)
        ):
            raise file_error(self.filename, f"has an invalid format_version {version!r}")
        library = _text(attrs.get("library_version", "unknown"))
        if int(version) > FORMAT_VERSION:
            raise file_error(
                self.filename,
                f"has format version {int(version)} (written by "
                f"nonmarkov {library}); this nonmarkov reads "
                f"format versions up to {FORMAT_VERSION}: upgrade "
                f"nonmarkov to read it",
            )
        if not bool(attrs.get("complete", False)):
            raise file_error(
                self.filename,
                "is incomplete: the computation or export writing "
                "it did not finish (it was interrupted or is still "
                "running)",
            )
        d = int(attrs["hilbert_space_dimension"])
        header = Header(
            d,
            float(attrs["dt"]),
            handle["transform_in"][()],
            handle["transform_out"][()],
            check.liouville_classes(handle["classes"][()], d * d),
            _text(attrs["name"]),
            _text(attrs["description"]),
            json.loads(_text(attrs.get("metadata", "{}"))),
            int(version),
            library,
        )
        _check_header_agrees(self.filename, header)
        num_steps = int(attrs["num_steps"])
        bonds = default_np.asarray(handle["bond_dimensions"][()], dtype=int)
        stored = len(handle[TENSOR_GROUP])
        if bonds.shape != (num_steps + 1,) or stored != num_steps:
            raise file_error(
                self.filename,
                f"is damaged: it should hold {num_steps} step "
                f"tensors and {num_steps + 1} bond dimensions, but "
                f"holds {stored} tensors and {bonds.size} bond "
                f"dimensions",
            )
        return header, [(int(a), int(b)) for a, b in zip(bonds[:-1], bonds[1:])]

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._handle is None

    def read_step(self, step: int) -> default_np.ndarray:
        """Step tensor T[b, b', c] (complex128) of ``0 <= step < len(shapes)``."""
        expected = tuple(self.shapes[step]) + (self.num_classes,)
        return _read_step(self._group, self.filename, step, expected)

    def close(self) -> None:
        """Close the file; does nothing if already closed."""
        if self._handle is not None:
            self._handle.close()
            self._handle = self._group = None


class Writer:
    """A file being written under a temporary name next to ``filename``.

    The header is written at once with ``complete`` false; :meth:`write_step`
    adds or replaces step tensors; :meth:`complete` marks the file complete,
    syncs it and renames it to ``filename``; :meth:`discard` removes it.
    ``overwrite=False`` refuses an existing ``filename`` (FileExistsError).
    """

    def __init__(
        self,
        filename: str,
        header: Header,
        overwrite: bool = False,
        resume_from: str | None = None,
        keep: int = 0,
    ):
        self.filename = filename
        self.header = header
        self.num_classes = header.num_classes
        self.shapes: list[tuple[int, int]] = []
        self._overwrite = overwrite
        self._handle: Any = None
        self._group: Any = None
        self._stack: contextlib.ExitStack | None = None
        import h5py

        directory = os.path.dirname(os.path.abspath(filename))
        if not os.path.isdir(directory):
            raise FileNotFoundError(
                f"cannot write process tensor file {filename!r}: "
                f"directory {directory!r} does not exist"
            )
        if not overwrite and os.path.exists(filename):
            raise FileExistsError(
                f"process tensor file {filename!r} exists; use "
                f"mode='overwrite' (or overwrite=True) to replace it"
            )
        stack = contextlib.ExitStack()
        self._temporary = stack.enter_context(atomic_path(filename, resume_from))
        self._stack = stack
        if resume_from is not None:
            self._reopen(header, keep)
            return
        try:
            handle = h5py.File(self._temporary, "w")
            self._handle = handle
            attrs = handle.attrs
            attrs["format"] = FORMAT_NAME
            attrs["format_version"] = default_np.int64(FORMAT_VERSION)
            attrs["library_version"] = LIBRARY_VERSION
            attrs["complete"] = False
            attrs["name"] = header.name
            attrs["description"] = header.description
            attrs["metadata"] = json.dumps(header.metadata)
            attrs["hilbert_space_dimension"] = default_np.int64(header.hilbert_space_dimension)
            attrs["dt"] = float(header.dt)
            attrs["num_steps"] = default_np.int64(0)
            handle.create_dataset(
                "classes",
                data=default_np.asarray(header.classes).astype(default_np.int64),
                fletcher32=True,
            )
            handle.create_dataset("transform_in", data=header.transform_in, fletcher32=True)
            handle.create_dataset("transform_out", data=header.transform_out, fletcher32=True)
            self._group = handle.create_group(TENSOR_GROUP)
        except BaseException:
            self.discard()
            raise

    def _reopen(self, header: Header, keep: int) -> None:
        """Continue an interrupted write of ``header``: keep its first ``keep`` step
        tensors, drop any later ones (written after the last checkpoint)."""
        import h5py

        try:
            handle = h5py.File(self._temporary, "r+")
        except OSError as error:
            self._stack = None  # leave the file as it is for inspection
            raise file_error(
                self._temporary, f"cannot be resumed: it is damaged ({error})"
            ) from error
        self._handle = handle
        attrs = handle.attrs
        if (
            _text(attrs.get("format", "")) != FORMAT_NAME
            or bool(attrs.get("complete", True))
            or int(attrs.get("hilbert_space_dimension", -1)) != header.hilbert_space_dimension
            or float(attrs.get("dt", -1.0)) != float(header.dt)
        ):
            handle.close()
            self._handle, self._stack = None, None
            raise file_error(
                self._temporary, "cannot be resumed: it is not the partial file of this build"
            )
        self._group = handle[TENSOR_GROUP]
        stored = sorted(int(key) for key in self._group)
        if stored[:keep] != list(range(keep)):
            handle.close()
            self._handle, self._stack = None, None
            raise file_error(
                self._temporary, f"cannot be resumed: it lacks some of the first {keep} steps"
            )
        for step in stored[keep:]:
            del self._group[tensor_name(step)]
        self.shapes = [tuple(self._group[tensor_name(k)].shape[:2]) for k in range(keep)]

    @property
    def temporary(self) -> str:
        """The temporary file being written (renamed to ``filename`` on completion)."""
        return self._temporary

    def flush(self) -> None:
        """Write everything so far to disk (a consistent file to resume from)."""
        if self._handle is not None:
            self._handle.flush()
            with open(self._temporary, "rb") as raw:
                os.fsync(raw.fileno())

    def suspend(self) -> None:
        """Close the temporary file and leave it (not renamed, not removed) so that a
        later :class:`Writer` with ``resume_from`` continues it."""
        if self._handle is not None:
            with contextlib.suppress(Exception):
                self._handle.close()
            self._handle = self._group = None
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.pop_all()  # forget the rename/remove of atomic_path

    @property
    def closed(self) -> bool:
        """True once the file is completed or discarded."""
        return self._handle is None and self._stack is None

    def write_step(self, step: int, tensor: Any) -> None:
        """Write T[b, b', m] of ``step``: append if step == len(shapes), else replace."""
        step = check.positive_integer(step, "step", minimum=0)
        array = default_np.asarray(tensor, dtype=default_np.complex128)
        if array.ndim != 3 or array.shape[2] != self.num_classes:
            raise ValueError(
                f"a step tensor must have shape (b, b', {self.num_classes}); got {array.shape}"
            )
        length = len(self.shapes)
        if step > length:
            raise ValueError(f"step {step} is beyond the end ({length}) of the process tensor")
        if step == length and length and array.shape[0] != self.shapes[-1][1]:
            raise ValueError(
                f"step tensor {step} has left bond {array.shape[0]} but step "
                f"{step - 1} has right bond {self.shapes[-1][1]}"
            )
        key = tensor_name(step)
        if step < length:
            del self._group[key]
        if not default_np.all(default_np.isfinite(array)):
            raise ValueError(f"step tensor {step} has NaN or infinite entries")
        self._group.create_dataset(key, data=array, fletcher32=True)
        if step == length:
            self.shapes.append(array.shape[:2])
        else:
            self.shapes[step] = array.shape[:2]

    def read_step(self, step: int) -> default_np.ndarray:
        """Step tensor T[b, b', c] (complex128) written before, ``0 <= step < len(shapes)``."""
        expected = tuple(self.shapes[step]) + (self.num_classes,)
        return _read_step(self._group, self.filename, step, expected)

    def complete(self) -> None:
        """Write the bond dimensions (N + 1,) and ``complete``, sync, rename to ``filename``.

        Discards the file on any error; does nothing once closed.
        """
        if self._handle is None:
            return
        try:
            bonds = default_np.array(
                [shape[0] for shape in self.shapes] + [self.shapes[-1][1] if self.shapes else 1]
            )
            self._handle.create_dataset(
                "bond_dimensions", data=bonds.astype(default_np.int64), fletcher32=True
            )
            self._handle.attrs["num_steps"] = default_np.int64(len(self.shapes))
            self._handle.attrs["complete"] = True
            self._handle.close()
            self._handle = self._group = None
            with open(self._temporary, "rb") as raw:
                os.fsync(raw.fileno())
            if not self._overwrite and os.path.exists(self.filename):
                raise FileExistsError(
                    f"process tensor file {self.filename!r} appeared while "
                    f"it was being written; the new file was discarded"
                )
        except BaseException:
            self.discard()
            raise
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()  # renames the temporary file to the target

    def discard(self) -> None:
        """Close and remove the temporary file; ``filename`` is left untouched."""
        if self._handle is not None:
            with contextlib.suppress(Exception):
                self._handle.close()
            self._handle = self._group = None
        if self._stack is not None:
            stack, self._stack = self._stack, None
            interrupted = RuntimeError("process tensor file discarded")
            stack.__exit__(RuntimeError, interrupted, None)  # removes the temporary file


def write_file(
    filename: Any, header: Header, tensors: Iterable[Any], overwrite: bool = False
) -> None:
    """Write a complete file: ``header`` and the step tensors T_k[b, b', m], k = 0, 1, ...

    The file appears under ``filename`` only when complete; on any error
    nothing is left (an existing file stays unless replaced by a complete
    one with ``overwrite=True``).
    """
    writer = Writer(check_target(filename, overwrite), header, overwrite)
    try:
        for step, tensor in enumerate(tensors):
            writer.write_step(step, tensor)
    except BaseException:
        writer.discard()
        raise
    writer.complete()
