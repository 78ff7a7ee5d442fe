"""Host-only helpers: work that must run on the CPU with NumPy/SciPy.

Non-symmetric eigendecompositions of small matrices are computed once on the
host and the results are moved to the active backend in one transfer. Nothing
here is called inside a hot loop.
"""

from __future__ import annotations

from typing import Any

import numpy as default_np
import scipy.linalg as default_la

from .numerical_backend import np


def to_backend(array: Any, dtype: Any = None) -> Any:
    """Move a host array to the active backend, in ``dtype`` (default: complex)."""
    dtype = np.dtype_complex if dtype is None else dtype
    return np.asarray(default_np.asarray(array), dtype=dtype)


def host_eig(matrix: Any) -> tuple[Any, Any]:
    """Eigenvalues (n,) and right eigenvectors (n, n) of a general square matrix.

    Computed with ``scipy.linalg.eig`` on the host (GPUs have no
    non-symmetric eigensolver) and returned on the active backend.
    """
    values, vectors = default_la.eig(np.to_host(matrix))
    return to_backend(values), to_backend(vectors)
