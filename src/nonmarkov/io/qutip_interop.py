"""QuTiP output: density matrices as ``qutip.Qobj``.

QuTiP input needs nothing here: every operator, state and superoperator that
the library takes passes through :func:`nonmarkov.validation.from_qutip`, the
one rule for ``Qobj`` input. This module goes the other way and is the only
place that imports QuTiP, lazily, when a conversion is asked for.
"""

from __future__ import annotations

from typing import Any

import numpy as default_np

INSTALL_HINT = "pip install 'nonmarkov[qutip]' (or pip install 'qutip>=5')"


def _qutip() -> Any:
    """The ``qutip`` module, or an ImportError that says how to install it."""
    try:
        import qutip
    except ImportError as error:
        raise ImportError(f"QuTiP is not installed; {INSTALL_HINT}") from error
    return qutip


def _check_dims(dims: Any, d: int) -> list[list[int]]:
    """``dims`` as QuTiP's ``[[d_1, d_2, ...], [d_1, d_2, ...]]`` for a (d, d) matrix.

    None gives ``[[d], [d]]``; a flat list ``[d_1, d_2, ...]`` (product d) is
    used for both rows and columns.
    """
    if dims is None:
        return [[d], [d]]
    if isinstance(dims, (list, tuple)) and dims and all(isinstance(x, (list, tuple)) for x in dims):
        if len(dims) != 2:
            raise ValueError(f"dims must be [row_dims, column_dims]; got {dims!r}")
        rows, columns = (list(part) for part in dims)
    else:
        rows = columns = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    for part in (rows, columns):
        if not part or any(
            isinstance(x, bool) or not isinstance(x, (int, default_np.integer)) or x < 1
            for x in part
        ):
            raise ValueError(f"dims must be positive integers; got {dims!r}")
        if int(default_np.prod(part)) != d:
            raise ValueError(
                f"dims {dims!r} describe a space of dimension {int(default_np.prod(part))}, "
                f"but the states are ({d}, {d})"
            )
    return [[int(x) for x in rows], [int(x) for x in columns]]


def states_to_qutip(states: Any, dims: Any = None) -> list:
    """The density matrices ``states``, (N, d, d), as a list of N ``qutip.Qobj``.

    ``dims``: the tensor structure QuTiP should record, e.g. ``[2, 2]`` or
    ``[[2, 2], [2, 2]]`` for two qubits (product d); None: one space of
    dimension d. Raises ImportError when QuTiP is not installed.
    """
    qutip = _qutip()
    array = default_np.asarray(states, dtype=default_np.complex128)
    if array.ndim != 3 or array.shape[1] != array.shape[2]:
        raise ValueError(f"states must have shape (N, d, d); got {array.shape}")
    checked = _check_dims(dims, array.shape[1])
    return [qutip.Qobj(matrix, dims=checked) for matrix in array]
