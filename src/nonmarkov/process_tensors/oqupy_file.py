"""Reading OQuPy 0.5 process-tensor files (HDF5) into an in-memory process tensor.

OQuPy writes a process tensor as an HDF5 file with the attributes
``oqupy_version``, ``name``, ``description`` and ``writing``, and the datasets

- ``hs_dim`` (1,) int: the system dimension d;
- ``dt`` (1,) float: the time step, NaN for none;
- ``transform_in``, ``transform_out``: the (d^2, d^2) basis changes, or a
  single NaN for none;
- ``initial_tensor_data``/``initial_tensor_shape`` (1,): a correlated
  initial state, a single NaN for none;
- ``mpo_tensors_data``/``mpo_tensors_shape`` (N,): each MPO tensor flattened
  (variable-length complex) with its shape (variable-length int):
  (b, b', d^2) for a tensor diagonal in its system legs, or (b, b', d^2, d^2)
  (past bond, future bond, input, output), untransformed;
- ``cap_tensors_data``/``cap_tensors_shape`` (0 or N + 1,): the caps.

:func:`read_oqupy_file` checks every part of that structure and converts it
to a :class:`~nonmarkov.SimpleProcessTensor` (class layout; the system legs
must be diagonal, as every OQuPy PT-TEMPO result is; OQuPy's transforms act
on row vectors, so they are stored here transposed). The ``writing`` flag is
not used: OQuPy 0.5 leaves it set in every file it writes.

OQuPy stores no checksums. The reader checks the structure in full (shapes,
bonds that chain from 1 to 1, finite entries, diagonal system legs) and
compares the stored caps, when present, with the caps traced from the
tensors: that catches a file cut short and damage to the entries the traced
caps depend on, but not damage elsewhere. Convert a file once with
:func:`nonmarkov.convert_process_tensor` to get nonmarkov's checksummed
format. Host code: NumPy and h5py only.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as default_np

from . import hdf5
from .base import SimpleProcessTensor

#: The attribute that marks an OQuPy file.
VERSION_ATTRIBUTE = "oqupy_version"

#: Relative tolerance (of the largest cap entry) within which the caps an OQuPy
#: file stores must equal those traced from its step tensors.
CAP_TOLERANCE = 1e-8

_REQUIRED = (
    "hs_dim",
    "dt",
    "transform_in",
    "transform_out",
    "initial_tensor_data",
    "initial_tensor_shape",
    "mpo_tensors_data",
    "mpo_tensors_shape",
)


def is_oqupy_file(handle: Any) -> bool:
    """Whether the open h5py file ``handle`` says it was written by OQuPy (and is
    not a nonmarkov file)."""
    return VERSION_ATTRIBUTE in handle.attrs and "format" not in handle.attrs


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _is_none(array: default_np.ndarray) -> bool:
    """OQuPy's stand-in for None: a single NaN."""
    return array.shape == (1,) and bool(default_np.isnan(array[0]))


class _Checked:
    """The datasets of one OQuPy file, each read and checked, with errors naming the file."""

    def __init__(self, handle: Any, filename: str):
        self.handle = handle
        self.filename = filename
        self.version = _text(handle.attrs[VERSION_ATTRIBUTE])

    def error(self, problem: str) -> hdf5.ProcessTensorFileError:
        return hdf5.file_error(
            self.filename, f"is an OQuPy {self.version} process-tensor file but {problem}"
        )

    def dataset(self, key: str) -> Any:
        if key not in self.handle:
            raise self.error(f"lacks the dataset {key!r} (damaged, or not OQuPy's layout)")
        return self.handle[key]

    def array(self, key: str, kinds: str) -> default_np.ndarray:
        dataset = self.dataset(key)
        array = default_np.asarray(dataset[()])
        if array.dtype.kind not in kinds:
            raise self.error(f"its dataset {key!r} has type {array.dtype}, not numbers")
        return array

    def dimension(self) -> int:
        value = self.array("hs_dim", "iu")
        if value.shape != (1,) or int(value[0]) < 1:
            raise self.error(f"its hs_dim is {value.tolist()}, not one positive integer")
        return int(value[0])

    def dt(self) -> float | None:
        value = self.array("dt", "f")
        if value.shape != (1,):
            raise self.error(f"its dt has shape {value.shape}, not (1,)")
        if math.isnan(value[0]):
            return None
        if not (math.isfinite(value[0]) and value[0] > 0.0):
            raise self.error(f"its dt is {value[0]}, not a positive number")
        return float(value[0])

    def transform(self, key: str, d2: int) -> default_np.ndarray | None:
        value = self.array(key, "fc")
        if _is_none(value):
            return None
        if value.ndim == 2 and value.shape[0] != value.shape[1]:
            raise self.error(
                f"its {key} has shape {value.shape}: a process tensor whose basis has fewer "
                f"than d^2 = {d2} elements is not supported by nonmarkov"
            )
        if value.shape != (d2, d2):
            raise self.error(f"its {key} has shape {value.shape}, expected {(d2, d2)}")
        if not default_np.all(default_np.isfinite(value)):
            raise self.error(f"its {key} has NaN or infinite entries")
        return value.astype(default_np.complex128)

    def tensors(self, prefix: str) -> list[default_np.ndarray]:
        """The tensors of ``<prefix>_data``/``<prefix>_shape``, each reshaped and finite
        (a stand-in None stays a (1,) NaN)."""
        data, shapes = self.dataset(f"{prefix}_data"), self.dataset(f"{prefix}_shape")
        if data.shape != shapes.shape or len(data.shape) != 1:
            raise self.error(
                f"its {prefix}_data ({data.shape[0] if data.shape else 0} entries) and "
                f"{prefix}_shape ({shapes.shape[0] if shapes.shape else 0} entries) differ"
            )
        tensors = []
        for step in range(data.shape[0]):
            try:
                flat = default_np.asarray(data[step], dtype=default_np.complex128)
                shape = tuple(int(n) for n in default_np.asarray(shapes[step]).reshape(-1))
            except (TypeError, ValueError, OSError) as error:
                raise self.error(f"entry {step} of {prefix} cannot be read ({error})") from error
            if any(n < 1 for n in shape) or math.prod(shape) != flat.size:
                raise self.error(
                    f"entry {step} of {prefix} has {flat.size} numbers but shape {shape}"
                )
            tensor = flat.reshape(shape)
            if not _is_none(tensor) and not default_np.all(default_np.isfinite(tensor)):
                raise self.error(f"entry {step} of {prefix} has NaN or infinite entries")
            tensors.append(tensor)
        return tensors


def _check_chain(checked: _Checked, tensors: list[default_np.ndarray], d2: int) -> None:
    """Shapes (b, b', d^2) or (b, b', d^2, d^2) whose bonds chain from 1 to 1."""
    previous = 1
    for step, tensor in enumerate(tensors):
        if tensor.shape[2:] not in ((d2,), (d2, d2)):
            raise checked.error(
                f"MPO tensor {step} has shape {tensor.shape}; expected (b, b', {d2}) or "
                f"(b, b', {d2}, {d2})"
            )
        if tensor.shape[0] != previous:
            raise checked.error(
                f"MPO tensor {step} has past bond {tensor.shape[0]} but the bond before it "
                f"is {previous}"
            )
        previous = tensor.shape[1]
    if tensors and previous != 1:
        raise checked.error(f"its last MPO tensor ends on bond {previous}, not 1 (cut short?)")


def _shared_classes(diagonals: list[default_np.ndarray], d2: int) -> default_np.ndarray:
    """The class of each Liouville index: indices whose tensor entries are identical at
    every step share one (the PT is then stored once per class)."""
    classes = default_np.zeros(d2, dtype=int)
    seen: dict[bytes, int] = {}
    for a in range(d2):
        key = b"".join(default_np.ascontiguousarray(t[:, :, a]).tobytes() for t in diagonals)
        classes[a] = seen.setdefault(key, len(seen))
    return classes


def _diagonal(checked: _Checked, step: int, tensor: default_np.ndarray) -> default_np.ndarray:
    """(b, b', d^2) of a rank-3 tensor, or of a rank-4 one that is diagonal in its legs."""
    if tensor.ndim == 3:
        return tensor
    diagonal = default_np.einsum("bcaa->bca", tensor)
    off = tensor.copy()
    index = default_np.arange(tensor.shape[2])
    off[:, :, index, index] = 0.0
    scale = float(default_np.max(default_np.abs(tensor), initial=0.0))
    largest = float(default_np.max(default_np.abs(off), initial=0.0))
    if largest > 1e-10 * scale:
        raise checked.error(
            f"MPO tensor {step} is not diagonal in its system legs (largest off-diagonal "
            f"entry {largest:.3g}, largest entry {scale:.3g}); nonmarkov holds process "
            "tensors diagonal in their own basis"
        )
    return diagonal


def _check_caps(checked: _Checked, pt: SimpleProcessTensor) -> None:
    """The stored caps (none, or N + 1 of them) must equal the traced ones."""
    if "cap_tensors_data" not in checked.handle:
        return
    caps = checked.tensors("cap_tensors")
    if not caps:
        return
    if len(caps) != len(pt) + 1:
        raise checked.error(
            f"it stores {len(caps)} caps for {len(pt)} MPO tensors (expected none or "
            f"{len(pt) + 1}): damaged, or its writing stopped early"
        )
    for step, stored in enumerate(caps):
        if _is_none(stored):  # a cap OQuPy never set
            continue
        traced = pt.get_cap_tensor(step)
        if traced is None or stored.shape != traced.shape:
            raise checked.error(
                f"its cap {step} has shape {stored.shape}, but the bond there is "
                f"{None if traced is None else traced.shape}"
            )
        scale = max(float(default_np.max(default_np.abs(traced))), 1e-300)
        deviation = float(default_np.max(default_np.abs(stored - traced)))
        if deviation > CAP_TOLERANCE * scale:
            raise checked.error(
                f"its cap {step} differs from the cap traced from its MPO tensors by "
                f"{deviation:.3g} (relative {deviation / scale:.3g}): the tensors are damaged"
            )


def read_oqupy_file(filename: str, handle: Any) -> SimpleProcessTensor:
    """The OQuPy process tensor in the open h5py file ``handle`` as a
    :class:`~nonmarkov.SimpleProcessTensor`; ProcessTensorFileError (a ValueError)
    naming ``filename`` and the problem for anything that does not fit."""
    checked = _Checked(handle, filename)
    for key in _REQUIRED:
        checked.dataset(key)
    d = checked.dimension()
    d2 = d * d
    dt = checked.dt()
    # OQuPy contracts a state (a row vector) with transform_in from the left and the
    # output with transform_out from the right; nonmarkov's transforms act on column
    # vectors: the same maps are the transposes.
    transform_in, transform_out = (
        None if matrix is None else matrix.T.copy()
        for matrix in (
            checked.transform("transform_in", d2),
            checked.transform("transform_out", d2),
        )
    )
    initial = checked.tensors("initial_tensor")
    if len(initial) > 1 or (initial and not _is_none(initial[0])):
        raise checked.error(
            "it holds a correlated initial state (an initial tensor), which nonmarkov "
            "does not support"
        )
    tensors = checked.tensors("mpo_tensors")
    if any(_is_none(t) for t in tensors):
        raise checked.error("some MPO tensors are missing (stored as None)")
    _check_chain(checked, tensors, d2)
    diagonals = [_diagonal(checked, step, tensor) for step, tensor in enumerate(tensors)]
    classes = _shared_classes(diagonals, d2)
    metadata = {
        "converted_from": {
            "format": "OQuPy process tensor (HDF5)",
            "oqupy_version": checked.version,
            "file": os.path.basename(filename),
        }
    }
    pt = SimpleProcessTensor(
        d,
        dt,
        transform_in,
        transform_out,
        _text(handle.attrs.get("name", "")) or None,
        _text(handle.attrs.get("description", "")) or None,
        classes=classes,
        metadata=metadata,
    )
    for step, diagonal in enumerate(diagonals):
        pt.set_mpo_tensor(step, diagonal)
    _check_caps(checked, pt)
    return pt


def read_if_oqupy(filename: str) -> SimpleProcessTensor | None:
    """The process tensor of ``filename`` if it is an OQuPy file, else None (a missing,
    non-HDF5 or unreadable file is left to the nonmarkov reader, which names the problem)."""
    import h5py

    if not os.path.isfile(filename) or not h5py.is_hdf5(filename):
        return None
    try:
        handle = h5py.File(filename, "r")
    except OSError:
        return None
    with handle:
        if not is_oqupy_file(handle):
            return None
        try:
            return read_oqupy_file(filename, handle)
        except hdf5.ProcessTensorFileError:
            raise
        except (OSError, KeyError, TypeError, ValueError) as error:
            raise hdf5.file_error(
                filename, f"is an OQuPy process-tensor file but damaged: {error}"
            ) from error
