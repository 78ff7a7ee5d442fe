"""``BatchedDynamics``: the dynamics of a batch of systems on one time grid."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as default_np

from .. import validation as check
from .results import Dynamics


class BatchedDynamics(Sequence[Dynamics]):
    """The reduced density matrices of B systems at the same times.

    A sequence of :class:`~nonmarkov.Dynamics` (``len``, ``batch[m]``, iteration:
    member m as it would come from its own ``compute_dynamics``) that keeps all
    states in one array, for batched post-processing without a loop.

    Attributes
    ----------
    times : (T,) the times t_k, shared by all members.
    states : (B, T, d, d) complex, member m's rho(t_k) at ``states[m, k]``.
    metadata : one provenance dict per member.
    name : the name of every member's Dynamics.
    """

    def __init__(
        self,
        times: Any,
        states: Any,
        metadata: Sequence[dict] | None = None,
        name: str = "dynamics",
    ):
        self.times = default_np.asarray(times, dtype=float)
        self.states = default_np.asarray(states, dtype=complex)
        if self.times.ndim != 1:
            raise ValueError(f"times must be 1-D (T,); got shape {self.times.shape}")
        shape = self.states.shape
        if len(shape) != 4 or shape[1] != self.times.size or shape[2] != shape[3]:
            raise ValueError(f"states must have shape (B, {self.times.size}, d, d); got {shape}")
        self.metadata = [{} for _ in range(shape[0])] if metadata is None else list(metadata)
        if len(self.metadata) != shape[0]:
            raise ValueError(f"metadata must have one dict per member ({shape[0]})")
        self.name = str(name)

    def __len__(self) -> int:
        return self.states.shape[0]

    @overload
    def __getitem__(self, index: int) -> Dynamics: ...

    @overload
    def __getitem__(self, index: slice) -> list[Dynamics]: ...

    def __getitem__(self, index: int | slice) -> Dynamics | list[Dynamics]:
        if isinstance(index, slice):
            return [self[m] for m in range(len(self))[index]]
        member = range(len(self))[index]  # IndexError (and negative indices) as for lists
        return Dynamics(
            self.times, self.states[member], name=self.name, metadata=self.metadata[member]
        )

    def __iter__(self) -> Iterator[Dynamics]:
        for member in range(len(self)):
            yield self[member]

    def __repr__(self) -> str:
        b, t, d, _ = self.states.shape
        return f"BatchedDynamics({b} members, {t} times, dimension {d})"

    def expectations(
        self, operator: Any = None, real: bool = False
    ) -> tuple[default_np.ndarray, default_np.ndarray]:
        """``(times (T,), Tr(operator rho_m(t_k)) (B, T))``; ``operator`` None gives
        the traces; ``real`` keeps the real part (for a Hermitian operator)."""
        real = check.boolean(real, "real")
        d = self.states.shape[-1]
        if operator is None:
            values = default_np.trace(self.states, axis1=2, axis2=3)
        else:
            matrix = check.square_matrix(operator, "operator", d)
            values = default_np.einsum("ij,btji->bt", matrix, self.states)
        return self.times.copy(), (values.real if real else values)
