"""Process tensors: the bath's influence on a time grid as an MPO.

A process tensor (PT) for N steps of length ``dt`` holds one tensor per step,
``T_k[b_{k-1}, b_k, c]``: bonds to the previous and next step and the class c
of the step's Liouville index (see :mod:`nonmarkov.influence`). The bath acts
diagonally in the eigenbasis of its coupling operator, so one index per step
suffices.

``transform_in`` maps a vectorised state into the PT's basis
(vec(rho) -> vec(V^dag rho V)), ``transform_out`` maps back; both are
(d^2, d^2) matrices acting on column vectors.

The OQuPy layout
----------------
The methods ``get_mpo_tensor``, ``set_mpo_tensor``, ``get_cap_tensor``,
``set_cap_tensor``, ``compute_caps``, ``get_initial_tensor``,
``set_initial_tensor`` and ``max_step`` present the same process tensor in
OQuPy's layout, converted from and to the class layout above:

- MPO tensor of step k: ``M_k[b_{k-1}, b_k, s_in, s_out]``, legs (past bond,
  future bond, input from the system, output to the system), each system leg
  a Liouville index (d^2). A state ``v`` (d^2,) enters on ``s_in`` and leaves
  on ``s_out``: ``v'[s_out] = sum_{s_in} v[s_in] M_k[.., s_in, s_out]``.
  Untransformed (``transformed=False``) it is in the PT's basis and diagonal:
  ``M_k[b, b', a, a] = T_k[b, b', classes[a]]``. Transformed, the basis change
  is part of it: ``M_k[b, b', s, s'] = sum_a transform_in[a, s]
  T_k[b, b', classes[a]] transform_out[s', a]``.
- Cap of step k = 0..N: the vector ``cap_k[b_{k-1}]`` that closes the bond
  before step k with a traced future (steps k..N-1 each contracted with the
  trace weights of :func:`trace_weights`, then the trivial end bond);
  ``cap_N = [1]`` and ``cap_0`` (shape (1,)) is the trace of the whole PT.
  The class layout's ``get_cap(k)`` closes the bond after step k, i.e.
  ``cap_{k+1}``.

Process tensors are written to HDF5 files with ``export`` and read back with
:func:`nonmarkov.import_process_tensor` (see :mod:`nonmarkov.io`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from .. import validation as check
from ..kernels.chain import cap_before, future_caps
from . import hdf5

#: Relative tolerance (of the largest entry) within which an OQuPy-layout MPO
#: tensor must be diagonal in its system legs and equal on every Liouville
#: index of a class to be converted to the class layout.
MPO_TOLERANCE = 1e-10


def trace_weights(classes: Any, dimension: int) -> default_np.ndarray:
    """Class weights w[c] (m,) of a traced future: 1/d on each diagonal Liouville
    index (a, a), summed per class. Closing a step tensor's bond with them gives
    the trace-and-reprepare (maximally mixed) future."""
    classes = default_np.asarray(classes)
    weights = default_np.zeros(int(classes.max()) + 1)
    for a in range(dimension):
        weights[classes[a * dimension + a]] += 1.0 / dimension
    return weights


def bond_dimensions(shapes: Sequence[tuple[int, ...]]) -> default_np.ndarray:
    """The bond dimensions (N + 1,), [1, b_0, ..., b_{N-2}, 1], of the step tensors of
    ``shapes`` ((b, b', m) each, in order); empty for N = 0."""
    if not shapes:
        return default_np.zeros(0, dtype=int)
    return default_np.array([shape[0] for shape in shapes] + [shapes[-1][1]])


def describe_steps(process_tensor: BaseProcessTensor) -> str:
    """``'N steps of dt=..., dimension d, max bond dimension b'``: what the string of a
    process tensor of steps in memory or in a file says of them."""
    bonds = process_tensor.get_bond_dimensions()
    largest = int(bonds.max()) if bonds.size else 0
    return (
        f"{len(process_tensor)} steps of dt={process_tensor.dt}, dimension "
        f"{process_tensor.dimension}, max bond dimension {largest}"
    )


def expand_step_tensor(tensor: Any, classes: Any) -> default_np.ndarray:
    """OQuPy-layout MPO tensor (b, b', d^2, d^2) of a step tensor T[b, b', c]:
    ``M[b, b', a, a] = T[b, b', classes[a]]``, zero off the diagonal."""
    tensor = default_np.asarray(tensor)
    classes = default_np.asarray(classes)
    d2 = len(classes)
    full = default_np.zeros(tensor.shape[:2] + (d2, d2), dtype=tensor.dtype)
    index = default_np.arange(d2)
    full[:, :, index, index] = tensor[:, :, classes]
    return full


def transform_mpo_tensor(
    tensor: Any, classes: Any, transform_in: Any, transform_out: Any
) -> default_np.ndarray:
    """The transformed OQuPy-layout MPO tensor (b, b', d^2, d^2) of a step tensor
    T[b, b', c]: ``M[b, b', s, s'] = sum_a transform_in[a, s] T[b, b', classes[a]]
    transform_out[s', a]`` (a state entering on s and leaving on s' is taken
    into the PT's basis, weighted, and taken back)."""
    expanded = default_np.asarray(tensor)[:, :, default_np.asarray(classes)]
    return default_np.einsum("as,bca,ta->bcst", transform_in, expanded, transform_out)


def mpo_to_step_tensor(tensor: Any, classes: Any) -> default_np.ndarray:
    """The step tensor T[b, b', c] (complex) of an untransformed OQuPy-layout MPO tensor.

    ``tensor``: (b, b', d^2, d^2) with legs (past bond, future bond, input,
    output), or (b, b', d^2) for one that is diagonal in its system legs
    (OQuPy's rank-3 form). It must be diagonal and equal on the Liouville
    indices of each class, within :data:`MPO_TOLERANCE` of its largest entry:
    the class layout holds nothing else. Raises TypeError/ValueError otherwise.
    """
    classes = default_np.asarray(classes)
    d2 = len(classes)
    try:
        array = default_np.array(tensor, dtype=complex)
    except (TypeError, ValueError) as error:
        raise TypeError(f"an MPO tensor must be an array of numbers; got {tensor!r}") from error
    if array.ndim == 4 and array.shape[2:] == (d2, d2):
        diagonal = default_np.einsum("bcaa->bca", array)
        off_diagonal = array.copy()
        index = default_np.arange(d2)
        off_diagonal[:, :, index, index] = 0.0
    elif array.ndim == 3 and array.shape[2] == d2:
        diagonal, off_diagonal = array, default_np.zeros(1)
    else:
        raise ValueError(
            f"an MPO tensor must have shape (b, b', {d2}, {d2}) (past bond, future "
            f"bond, input, output) or (b, b', {d2}) (diagonal); got {array.shape}"
        )
    if not default_np.all(default_np.isfinite(array)):
        raise ValueError("an MPO tensor must have finite entries")
    scale = float(default_np.max(default_np.abs(array), initial=0.0))
    limit = MPO_TOLERANCE * scale
    largest = float(default_np.max(default_np.abs(off_diagonal), initial=0.0))
    if largest > limit:
        raise ValueError(
            f"the MPO tensor is not diagonal in its system legs (largest off-diagonal "
            f"entry {largest:.3g}, largest entry {scale:.3g}): nonmarkov holds a process "
            f"tensor diagonal in its own basis; give the untransformed tensor "
            f"(get_mpo_tensor(step, transformed=False)) and the basis change as "
            f"transform_in/transform_out"
        )
    num_classes = int(classes.max()) + 1
    first = default_np.zeros(num_classes, dtype=int)
    present = default_np.zeros(num_classes, dtype=bool)
    for alpha in range(d2 - 1, -1, -1):
        first[classes[alpha]] = alpha
        present[classes[alpha]] = True
    step_tensor = default_np.where(present, diagonal[:, :, first], 0.0)
    deviation = float(
        default_np.max(default_np.abs(diagonal - step_tensor[:, :, classes]), initial=0.0)
    )
    if deviation > limit:
        raise ValueError(
            f"the MPO tensor differs between Liouville indices of one class (by "
            f"{deviation:.3g}, largest entry {scale:.3g}); classes of this process "
            f"tensor: {classes.tolist()}"
        )
    return step_tensor


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
        self.metadata: dict = check.metadata(metadata)
        # OQuPy-layout caps: set with set_cap_tensor (step -> (b_{step-1},)), and
        # the traced caps computed from the step tensors (None: not yet)
        self._caps_set: dict[int, default_np.ndarray] = {}
        self._caps_traced: list[default_np.ndarray] | None = None

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

    def __str__(self) -> str:
        """The kind, the name, the steps, the time step, the system dimension and the
        bond dimensions (kinds of process tensor say more: the file, the start block)."""
        steps = self.num_steps
        parts = ["any number of steps" if steps is None else f"{steps} steps"]
        parts.append("no time step" if self._dt is None else f"dt={self._dt:g}")
        parts.append(f"dimension {self._dimension}")
        bonds = [int(b) for b in self.get_bond_dimensions()]
        if bonds:
            parts.append(f"max bond dimension {max(bonds)}")
        return f"{type(self).__name__} {self.name!r}: {', '.join(parts)}"

    def __repr__(self) -> str:
        """``<SimpleProcessTensor 'name': 50 steps of dt=0.1, dimension 2, max bond
        dimension 36>`` (what :func:`str` gives, in angle brackets)."""
        try:
            return f"<{self}>"
        except (ValueError, TypeError, OSError, NotImplementedError) as error:  # closed file
            return f"<{type(self).__name__} {self.name!r} ({type(error).__name__}: {error})>"

    @property
    def num_steps(self) -> int | None:
        """Number of steps, or None for a process tensor that serves any number."""
        return len(self)

    @property
    def max_step(self) -> int | float:
        """The number of steps the process tensor serves: ``len`` if it has one,
        ``math.inf`` if it serves any number (uniform, trivial)."""
        num_steps = self.num_steps
        return math.inf if num_steps is None else num_steps

    def get_cap(self, step: int) -> default_np.ndarray | None:
        """The vector (b',) that closes the bond after ``step`` with a traced future,
        where the process tensor has it without contracting its later steps (a
        uniform one, or caps set with :meth:`set_cap_tensor`: then
        ``get_cap_tensor(step + 1)``); None: the engines compute it from the
        step tensors."""
        if not self._caps_set:
            return None
        own = self._caps_set.get(step + 1)
        return own if own is not None else self._traced_caps()[step + 1]

    # ------------------------------------------------- the OQuPy layout (module doc)

    def get_initial_tensor(self) -> None:
        """The correlated initial state: always None (a process tensor here starts
        from a product of the system state and the bath's own state)."""
        return None

    def set_initial_tensor(self, initial_tensor: Any = None) -> None:
        """Only None is accepted: correlated initial states are not supported
        (``NotImplementedError`` otherwise)."""
        if initial_tensor is not None:
            raise NotImplementedError(
                "correlated initial states (an initial tensor) are not supported: "
                "the process tensor starts from the bath's own state"
            )

    def get_mpo_tensor(self, step: int, transformed: bool = True) -> default_np.ndarray | None:
        """The MPO tensor of ``step`` in OQuPy's layout, (b_{k-1}, b_k, d^2, d^2).

        Legs: past bond, future bond, input (from the system), output (to the
        system). ``transformed=True`` includes the basis change:
        ``M[b, b', s, s'] = sum_a transform_in[a, s] T[b, b', classes[a]]
        transform_out[s', a]``; ``transformed=False`` gives the tensor in the
        process tensor's basis, diagonal: ``M[b, b', a, a] = T[b, b', classes[a]]``.
        """
        transformed = check.boolean(transformed, "transformed")
        tensor, classes = self.get_step_tensor(step)
        if transformed and not (self._transform_in is None and self._transform_out is None):
            return transform_mpo_tensor(tensor, classes, self.transform_in, self.transform_out)
        return expand_step_tensor(tensor, classes)

    def set_mpo_tensor(self, step: int, tensor: Any) -> None:
        """Set the MPO tensor of ``step`` in OQuPy's layout (untransformed).

        ``tensor``: (b, b', d^2, d^2) (past bond, future bond, input, output),
        diagonal in the system legs, or (b, b', d^2) for its diagonal; it is
        stored as the step tensor T[b, b', c] (:func:`mpo_to_step_tensor`).
        ``step`` replaces a step or appends one (step == len). Process tensors
        that are not built step by step refuse it (TypeError).
        """
        raise TypeError(f"{type(self).__name__} does not allow setting MPO tensors")

    def _cap_shape(self, step: int) -> tuple[int]:
        """Shape (b_{step-1},) of the cap of ``step`` (0 <= step <= len)."""
        length = len(self)
        if length == 0:
            return (1,)
        if step == length:
            return (int(self.get_bond_dimensions()[-1]),)
        return (int(self.get_step_tensor(step)[0].shape[0]),)

    def _check_cap_step(self, step: Any) -> int:
        if isinstance(step, bool) or not isinstance(step, (int, default_np.integer)):
            raise TypeError(f"step must be an integer; got {step!r}")
        return int(step)

    def set_cap_tensor(self, step: int, tensor: Any = None) -> None:
        """Set the cap of ``step`` (0 <= step <= len): the vector (b_{step-1},) that
        closes the bond before ``step`` (OQuPy's layout).

        The dynamics closes the bond after step k with ``cap_{k+1}``: a cap
        set here replaces the traced future there (``compute_dynamics`` reads
        the state after step k as the state vector closed with it). None
        removes a cap set before. Caps are held in memory (a file does not
        store them); a cap whose bond no longer fits after ``set_mpo_tensor``
        is dropped.
        """
        step = self._check_cap_step(step)
        length = len(self)
        if not 0 <= step <= length:
            raise IndexError(f"cap step {step} outside 0..{length} (the process tensor's length)")
        if tensor is None:
            self._caps_set.pop(step, None)
            return
        try:
            cap = default_np.array(tensor, dtype=complex)
        except (TypeError, ValueError) as error:
            raise TypeError(f"a cap must be an array of numbers; got {tensor!r}") from error
        expected = self._cap_shape(step)
        if cap.shape != expected:
            raise ValueError(
                f"the cap of step {step} closes the bond before step {step} and must have "
                f"shape {expected}; got {cap.shape}"
            )
        if not default_np.all(default_np.isfinite(cap)):
            raise ValueError("a cap must have finite entries")
        self._caps_set[step] = cap

    def get_cap_tensor(self, step: int) -> default_np.ndarray | None:
        """The cap of ``step`` in OQuPy's layout: (b_{step-1},), closing the bond
        before ``step`` with a traced future (or the cap set with
        :meth:`set_cap_tensor`); ``cap_N = [1]``, ``cap_0`` (1,) is the trace of
        the whole process tensor. None for a step outside 0..N. Traced caps are
        computed from the current step tensors when first asked for."""
        step = self._check_cap_step(step)
        num_steps = self.num_steps
        if step < 0 or (num_steps is not None and step > num_steps):
            return None
        own = self._caps_set.get(step)
        if own is not None:
            return own.copy()
        if num_steps is None:  # serves any number of steps: its own caps
            after = self.get_cap(max(step - 1, 0))
            if after is None:
                raise ValueError(f"{type(self).__name__} has neither a length nor caps")
            after = default_np.asarray(after)
            if step > 0:
                return after.copy()
            tensor, classes = self.get_step_tensor(0)
            weights = trace_weights(classes, self._dimension)
            return cap_before(tensor, weights, after, xp=default_np)
        return self._traced_caps()[step].copy()

    def compute_caps(self) -> None:
        """Compute the traced caps of every step 0..N from the step tensors, discarding
        caps set with :meth:`set_cap_tensor` (they follow later changes of the
        tensors by themselves; calling this is never required)."""
        self._caps_set = {}
        if self.num_steps is not None:
            self._caps_traced = None
            self._traced_caps()

    def _traced_caps(self) -> list[default_np.ndarray]:
        """The N + 1 traced caps (OQuPy layout), computed once per set of tensors."""
        if self._caps_traced is None:
            length = len(self)
            if length == 0:
                self._caps_traced = [default_np.ones(1, dtype=complex)]
            else:
                tensors = [self.get_step_tensor(k)[0] for k in range(length)]
                classes = self.get_step_tensor(0)[1]
                weights = trace_weights(classes, self._dimension)
                after = future_caps(tensors, weights, xp=default_np)
                first = cap_before(tensors[0], weights, after[0], xp=default_np)
                self._caps_traced = [first] + list(after)
        return self._caps_traced

    def _tensor_changed(self, step: int, shape: tuple[int, ...]) -> None:
        """Forget the traced caps after the step tensor of ``step`` (shape (b, b', ...))
        changed, and drop set caps whose bond no longer fits."""
        self._caps_traced = None
        for cap_step, bond in ((step, shape[0]), (step + 1, shape[1])):
            cap = self._caps_set.get(cap_step)
            if cap is not None and cap.shape != (bond,):
                del self._caps_set[cap_step]

    def get_bond_dimensions(self) -> default_np.ndarray:
        """Bond dimensions (N + 1,) including the trivial outer bonds."""
        raise NotImplementedError

    def get_step_tensor(self, step: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(T[b, b', c], classes (d^2,)) of ``step``."""
        raise NotImplementedError

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

    @property
    def max_step(self) -> float:
        """``math.inf``: the trivial process tensor serves any number of steps."""
        return math.inf

    def get_mpo_tensor(self, step: int, transformed: bool = True) -> None:
        """None: no bath, no MPO tensor (OQuPy's convention)."""
        return None

    def get_cap_tensor(self, step: int) -> default_np.ndarray:
        """``[1]`` for every step: no bond to close."""
        self._check_cap_step(step)
        return default_np.ones(1, dtype=complex)

    def set_cap_tensor(self, step: int, tensor: Any = None) -> None:
        """Refused (TypeError): the trivial process tensor has no bonds."""
        raise TypeError("TrivialProcessTensor does not allow setting cap tensors")

    def compute_caps(self) -> None:
        """Nothing to compute."""


class SimpleProcessTensor(BaseProcessTensor):
    """A process tensor held in memory.

    ``SimpleProcessTensor(hilbert_space_dimension, dt=None, transform_in=None,
    transform_out=None, name=None, description=None, *, classes=None,
    metadata=None)``: OQuPy's positional order, then our keywords.

    Parameters
    ----------
    hilbert_space_dimension : system dimension d.
    dt : time step (None: no time grid; ``export`` and ``compute_dynamics``
        need one).
    transform_in, transform_out : (d^2, d^2) basis maps on column vectors
        (None: identity); see the module docstring.
    name, description : optional text.
    classes : (d^2,) class of each Liouville index (None: identity, m = d^2).
    metadata : optional JSON-serialisable dict (stored by ``export``).

    Build it step by step with :meth:`set` (class layout T[b, b', c]) or
    :meth:`set_mpo_tensor` (OQuPy's layout).
    """

    def __init__(
        self,
        hilbert_space_dimension: int,
        dt: float | None = None,
        transform_in: Any = None,
        transform_out: Any = None,
        name: Any = None,
        description: Any = None,
        *,
        classes: Any = None,
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
        if not default_np.all(default_np.isfinite(array)):
            raise ValueError(f"step tensor {step} has NaN or infinite entries")
        if step == len(self._tensors):
            self._tensors.append(array)
        elif step < len(self._tensors):
            self._tensors[step] = array
        else:
            raise ValueError(f"step {step} is beyond the end ({len(self._tensors)}) of the PT")
        self._tensor_changed(step, array.shape)

    def set_mpo_tensor(self, step: int, tensor: Any) -> None:
        """Set the MPO tensor of ``step`` in OQuPy's layout (untransformed):
        (b, b', d^2, d^2) diagonal in its system legs, or (b, b', d^2); see
        :meth:`BaseProcessTensor.set_mpo_tensor`."""
        self.set(step, mpo_to_step_tensor(tensor, self._classes))

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
        return bond_dimensions([tensor.shape for tensor in self._tensors])

    def __str__(self) -> str:
        return f"SimpleProcessTensor {self.name!r}: {describe_steps(self)}"
