"""Process tensors: the bath's influence on a time grid as an MPO.

A process tensor (PT) for N steps of length ``dt`` holds one tensor per step,
``T_k[b_{k-1}, b_k, c]``: bonds to the previous and next step and the class c
of the step's Liouville index (see :mod:`nonmarkov.influence`). The bath acts
diagonally in the eigenbasis of its coupling operator, so one index per step
suffices; ``get_mpo_tensor`` expands it to the four-leg form
``[b_{k-1}, b_k, alpha_in, alpha_out]``.

``transform_in`` maps a vectorised state into the PT's basis
(vec(rho) -> vec(V^dag rho V)), ``transform_out`` maps back.

Process tensors are written to HDF5 files with ``export`` and read back with
:func:`nonmarkov.import_process_tensor` (see :mod:`nonmarkov.io`).
"""

from __future__ import annotations

from typing import Any

import numpy as default_np

from .. import validation as check
from . import hdf5


def trace_weights(classes: Any, dimension: int) -> default_np.ndarray:
    """Class weights w[c] (m,) of a traced future: 1/d on each diagonal Liouville
    index (a, a), summed per class. Closing a step tensor's bond with them gives
    the trace-and-reprepare (maximally mixed) future."""
    classes = default_np.asarray(classes)
    weights = default_np.zeros(int(classes.max()) + 1)
    for a in range(dimension):
        weights[classes[a * dimension + a]] += 1.0 / dimension
    return weights


class BaseProcessTensor:
    """Common interface of process tensors.

    ``metadata`` is a JSON-serialisable dict describing how the process
    tensor was made (bath, parameters); it is stored in exported files.
    """

    def __init__(
        self,
        hilbert_space_dimension: int,
        dt: float | None,
        transform_in: Any = None,
        transform_out: Any = None,
        name: str | None = None,
        description: str | None = None,
        metadata: dict | None = None,
    ):
        self._dimension = check.positive_integer(hilbert_space_dimension, "hilbert_space_dimension")
        self._dt = None if dt is None else check.positive_number(dt, "dt")
        d2 = self._dimension**2
        self._transform_in = self._check_transform(transform_in, "transform_in", d2)
        self._transform_out = self._check_transform(transform_out, "transform_out", d2)
        self.name = "Unnamed ProcessTensor" if name is None else str(name)
        self.description = "" if description is None else str(description)
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict; got {type(metadata).__name__}")
        self.metadata: dict = {} if metadata is None else dict(metadata)

    @staticmethod
    def _check_transform(value: Any, name: str, d2: int) -> default_np.ndarray | None:
        if value is None:
            return None
        return check.square_matrix(value, name, d2)

    @property
    def hilbert_space_dimension(self) -> int:
        """System dimension d."""
        return self._dimension

    @property
    def dimension(self) -> int:
        """System dimension d (alias of ``hilbert_space_dimension``)."""
        return self._dimension

    @property
    def dt(self) -> float | None:
        """Time step, or None for a PT without time grid (trivial PT)."""
        return self._dt

    def time_step(self) -> float:
        """The time step; a ``ValueError`` for a process tensor without one."""
        if self._dt is None:
            raise ValueError(f"{type(self).__name__} {self.name!r} has no time step")
        return self._dt

    @property
    def transform_in(self) -> default_np.ndarray:
        """(d^2, d^2) map of vec(rho) into the PT's basis."""
        if self._transform_in is None:
            return default_np.identity(self._dimension**2, dtype=complex)
        return self._transform_in.copy()

    @property
    def transform_out(self) -> default_np.ndarray:
        """(d^2, d^2) map from the PT's basis back to the system's basis."""
        if self._transform_out is None:
            return default_np.identity(self._dimension**2, dtype=complex)
        return self._transform_out.copy()

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def num_steps(self) -> int | None:
        """Number of steps, or None for a process tensor that serves any number."""
        return len(self)

    def get_cap(self, step: int) -> default_np.ndarray | None:
        """The vector (b',) that closes the bond after ``step`` with a traced future,
        where the process tensor has it without contracting its later steps (a
        uniform one); None: the engines compute it from the step tensors."""
        return None

    def get_bond_dimensions(self) -> default_np.ndarray:
        """Bond dimensions (N + 1,) including the trivial outer bonds."""
        raise NotImplementedError

    def get_step_tensor(self, step: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(T[b, b', c], classes (d^2,)) of ``step``."""
        raise NotImplementedError

    def get_mpo_tensor(self, step: int) -> default_np.ndarray:
        """Four-leg tensor [b, b', alpha_in, alpha_out] of ``step`` (diagonal in alpha)."""
        tensor, classes = self.get_step_tensor(step)
        d2 = len(classes)
        full = default_np.zeros(tensor.shape[:2] + (d2, d2), dtype=tensor.dtype)
        index = default_np.arange(d2)
        full[:, :, index, index] = tensor[:, :, classes]
        return full

    def export(self, filename: str, overwrite: bool = False) -> None:
        """Write the process tensor to the HDF5 file ``filename``.

        The file appears only when complete (written under a temporary name,
        then renamed). ``overwrite=False`` refuses to replace an existing
        file. Read it back with :func:`nonmarkov.import_process_tensor`.
        """
        if self.dt is None:
            raise ValueError(
                "a process tensor without time grid (dt is None, e.g. a "
                "TrivialProcessTensor) cannot be written to a file"
            )
        filename = hdf5.check_target(filename, overwrite)
        classes = getattr(self, "classes", None)
        if classes is None and len(self):
            classes = self.get_step_tensor(0)[1]
        checked = BaseProcessTensor(  # the checks a process tensor read back will pass
            self.hilbert_space_dimension,
            self.dt,
            self.transform_in,
            self.transform_out,
            self.name,
            self.description,
            hdf5.check_metadata(getattr(self, "metadata", None)),
        )
        header = hdf5.Header(
            checked.dimension,
            checked.time_step(),
            checked.transform_in,
            checked.transform_out,
            check.liouville_classes(classes, checked.dimension**2),
            checked.name,
            checked.description,
            checked.metadata,
        )
        tensors = (self.get_step_tensor(step)[0] for step in range(len(self)))
        hdf5.write_file(filename, header, tensors, overwrite=overwrite)


class TrivialProcessTensor(BaseProcessTensor):
    """The process tensor of no bath: every step is the identity, any length."""

    def __init__(
        self,
        hilbert_space_dimension: int = 1,
        name: str | None = None,
        description: str | None = None,
    ):
        super().__init__(hilbert_space_dimension, None, name=name, description=description)

    def __len__(self) -> int:
        return 0

    def get_bond_dimensions(self) -> default_np.ndarray:
        """No tensors: an empty array."""
        return default_np.zeros(0, dtype=int)

    def get_step_tensor(self, step: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """The identity step: a (1, 1, 1) tensor and all indices in class 0."""
        d2 = self._dimension**2
        return default_np.ones((1, 1, 1), dtype=complex), default_np.zeros(d2, dtype=int)


class SimpleProcessTensor(BaseProcessTensor):
    """A process tensor held in memory.

    Parameters
    ----------
    hilbert_space_dimension : system dimension d.
    dt : time step.
    transform_in, transform_out : (d^2, d^2) basis maps (None: identity).
    classes : (d^2,) class of each Liouville index (None: identity, m = d^2).
    name, description : optional text.
    metadata : optional JSON-serialisable dict (stored by ``export``).
    """

    def __init__(
        self,
        hilbert_space_dimension: int,
        dt: float,
        transform_in: Any = None,
        transform_out: Any = None,
        classes: Any = None,
        name: str | None = None,
        description: str | None = None,
        metadata: dict | None = None,
    ):
        super().__init__(
            hilbert_space_dimension, dt, transform_in, transform_out, name, description, metadata
        )
        self._classes = check.liouville_classes(classes, self._dimension**2)
        self._num_classes = int(self._classes.max()) + 1
        self._tensors: list[default_np.ndarray] = []

    @property
    def classes(self) -> default_np.ndarray:
        """Class of each Liouville index, (d^2,)."""
        return self._classes.copy()

    def set(self, step: int, tensor: Any) -> None:
        """Set the tensor T[b, b', c] of ``step`` (appending if step == len)."""
        step = check.positive_integer(step, "step", minimum=0)
        array = default_np.asarray(tensor, dtype=complex)
        if array.ndim != 3 or array.shape[2] != self._num_classes:
            raise ValueError(
                f"a step tensor must have shape (b, b', {self._num_classes}); got {array.shape}"
            )
        if step == len(self._tensors):
            self._tensors.append(array)
        elif step < len(self._tensors):
            self._tensors[step] = array
        else:
            raise ValueError(f"step {step} is beyond the end ({len(self._tensors)}) of the PT")

    def __len__(self) -> int:
        return len(self._tensors)

    def get_step_tensor(self, step: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(T[b, b', c], classes) of ``step``."""
        if not 0 <= step < len(self._tensors):
            raise IndexError(
                f"step {step} outside the process tensor (length {len(self._tensors)})"
            )
        return self._tensors[step], self._classes

    def get_bond_dimensions(self) -> default_np.ndarray:
        """Bond dimensions (N + 1,): [1, b_0, ..., b_{N-2}, 1]."""
        if not self._tensors:
            return default_np.zeros(0, dtype=int)
        return default_np.array([t.shape[0] for t in self._tensors] + [self._tensors[-1].shape[1]])

    def __str__(self) -> str:
        bonds = self.get_bond_dimensions()
        largest = int(bonds.max()) if bonds.size else 0
        return (
            f"SimpleProcessTensor {self.name!r}: {len(self)} steps of dt={self.dt}, "
            f"dimension {self.dimension}, max bond dimension {largest}"
        )
