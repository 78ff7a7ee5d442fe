"""A uniform (time-translation-invariant) process tensor: a start block, then one
tensor that repeats at every later step (built by :mod:`nonmarkov.methods.uniform`).

It has no length: it serves any number of steps. Step k < K (the start block)
uses its own tensor, every later step the repeating tensor T[b, b', c]; the
bond after a step is closed by a cap for a traced future (the end vector from
step K - 1 on).
"""

from __future__ import annotations

from typing import Any

import numpy as default_np

from .. import validation as check
from ..kernels.chain import future_caps
from .base import BaseProcessTensor, SimpleProcessTensor, trace_weights


class UniformProcessTensor(BaseProcessTensor):
    """A process tensor whose step tensor repeats after a start block.

    Step k < K uses ``start_tensors[k]``, every later step ``tensor``; the
    bond after step k >= K - 1 is closed by ``end_vector`` (traced future).
    It serves any number of steps: ``num_steps`` is None, ``max_step`` is
    ``math.inf`` and ``len()`` is refused; :meth:`get_cap` gives the cap of
    any step without contracting the future. In OQuPy's layout
    (:mod:`nonmarkov.process_tensors.base`), ``get_mpo_tensor(k)`` and
    ``get_cap_tensor(k)`` serve any step k >= 0; setting tensors or caps is
    refused.

    Parameters
    ----------
    hilbert_space_dimension : system dimension d.
    dt : time step.
    start_tensors : K tensors T_k[b, b', c]; the first has b = 1, the last
        b' = chi.
    tensor : T[b, b', c], shape (chi, chi, m), the tensor of every later step.
    end_vector : (chi,) closes the bond with a traced future (fixed point of
        the trace-weighted transfer matrix).
    transform_in, transform_out : (d^2, d^2) basis maps (None: identity).
    classes : (d^2,) class of each Liouville index (None: identity).
    name, description : optional text.
    """

    def __init__(
        self,
        hilbert_space_dimension: int,
        dt: float,
        start_tensors: Any,
        tensor: Any,
        end_vector: Any,
        transform_in: Any = None,
        transform_out: Any = None,
        classes: Any = None,
        name: str | None = None,
        description: str | None = None,
    ):
        super().__init__(
            hilbert_space_dimension,
            dt,
            transform_in,
            transform_out,
            "Unnamed UniformProcessTensor" if name is None else name,
            description,
        )
        d2 = self._dimension**2
        self._classes = check.liouville_classes(classes, d2)
        classes = self._classes
        m = int(classes.max()) + 1
        tensor = default_np.asarray(tensor, dtype=complex)
        if tensor.ndim != 3 or tensor.shape[0] != tensor.shape[1] or tensor.shape[2] != m:
            raise ValueError(f"tensor must have shape (chi, chi, {m}); got {tensor.shape}")
        chi = tensor.shape[0]
        end_vector = default_np.asarray(end_vector, dtype=complex)
        if end_vector.shape != (chi,):
            raise ValueError(f"end_vector must have shape ({chi},); got {end_vector.shape}")
        blocks = [default_np.asarray(t, dtype=complex) for t in start_tensors]
        if not blocks:
            raise ValueError("start_tensors must hold at least one tensor")
        left = 1
        for i, block in enumerate(blocks):
            if block.ndim != 3 or block.shape[0] != left or block.shape[2] != m:
                raise ValueError(
                    f"start_tensors[{i}] must have shape ({left}, b', {m}); got {block.shape}"
                )
            left = block.shape[1]
        if left != chi:
            raise ValueError(
                f"the last start tensor must end on the bond of tensor ({chi}); got {left}"
            )
        self._blocks = blocks
        self._tensor = tensor
        self._end = end_vector
        weights = trace_weights(self._classes, self._dimension)
        # cap after start step k, k = 0..K-1
        self._start_caps = future_caps(blocks, weights, end_vector, xp=default_np)

    @property
    def bond_dimension(self) -> int:
        """chi, the dimension of the repeating bond."""
        return self._tensor.shape[0]

    @property
    def num_start_steps(self) -> int:
        """K, the number of steps of the start block (the memory cut)."""
        return len(self._blocks)

    @property
    def tensor(self) -> default_np.ndarray:
        """T[b, b', c] (chi, chi, m), the tensor of every step after the start block."""
        return self._tensor.copy()

    @property
    def start_tensors(self) -> list[default_np.ndarray]:
        """The K tensors of the first steps (the bath with no past)."""
        return [block.copy() for block in self._blocks]

    @property
    def end_vector(self) -> default_np.ndarray:
        """(chi,) cap for a traced future."""
        return self._end.copy()

    @property
    def classes(self) -> default_np.ndarray:
        """Class of each Liouville index, (d^2,)."""
        return self._classes.copy()

    def get_step_tensor(self, step: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """(T[b, b', c], classes) of ``step`` (any step >= 0)."""
        step = check.positive_integer(step, "step", minimum=0)
        tensor = self._blocks[step] if step < len(self._blocks) else self._tensor
        return tensor, self._classes

    @property
    def num_steps(self) -> None:
        """None: a uniform process tensor serves any number of steps."""
        return None

    def __len__(self) -> int:
        raise TypeError(
            "a UniformProcessTensor has no length: it serves any number of steps "
            "(num_steps is None)"
        )

    def get_bond_dimensions(self) -> default_np.ndarray:
        """Bond dimensions after the start steps and the repeating bond, (K + 1,)."""
        return default_np.array([1] + [block.shape[1] for block in self._blocks])

    def get_cap(self, step: int) -> default_np.ndarray:
        """Vector that closes the bond after ``step`` with a traced future."""
        step = check.positive_integer(step, "step", minimum=0)
        return self._start_caps[step] if step < len(self._blocks) else self._end

    def set_cap_tensor(self, step: int, tensor: Any = None) -> None:
        """Refused (TypeError): the caps of a uniform process tensor follow from its
        tensors (``end_vector``); ``get_cap_tensor(k)`` gives them in OQuPy's
        layout, the cap before step k (``get_cap(k - 1)`` for k >= 1)."""
        raise TypeError(
            "UniformProcessTensor does not allow setting cap tensors: they follow from "
            "its tensor and end_vector"
        )

    def trace_transfer_matrix(self) -> default_np.ndarray:
        """E[b, b'] = sum_c w_c T[b, b', c], w = 1/d on each diagonal index."""
        return self._tensor @ trace_weights(self._classes, self._dimension)

    def to_process_tensor(
        self, num_steps: int, name: str | None = None, description: str | None = None
    ) -> SimpleProcessTensor:
        """The finite process tensor of ``num_steps`` steps (same format as PT-TEMPO).

        The last step absorbs its cap; the repeated steps share one array
        (no copies on the host).
        """
        num_steps = check.positive_integer(num_steps, "num_steps")
        pt = SimpleProcessTensor(
            self._dimension,
            self.time_step(),
            transform_in=self._transform_in,
            transform_out=self._transform_out,
            classes=self._classes,
            name=self.name if name is None else name,
            description=self.description if description is None else description,
        )
        for step in range(num_steps - 1):
            pt.set(step, self.get_step_tensor(step)[0])
        last = num_steps - 1
        pt.set(
            last,
            default_np.einsum("bcx,c->bx", self.get_step_tensor(last)[0], self.get_cap(last))[
                :, None, :
            ],
        )
        return pt

    def __str__(self) -> str:
        return (
            f"UniformProcessTensor {self.name!r}: dt={self.dt}, dimension "
            f"{self.dimension}, bond dimension {self.bond_dimension}, "
            f"start block of {self.num_start_steps} steps"
        )
