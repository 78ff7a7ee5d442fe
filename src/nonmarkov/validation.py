"""Checks of user input that raise clear ``TypeError``/``ValueError`` messages.

Every public constructor and algorithm validates its arguments with these
helpers before any long computation starts.
"""

from __future__ import annotations

import json
import math
import numbers
import sys
from typing import Any, Literal

import numpy as default_np

HERMITICITY_TOLERANCE = 1e-10
DENSITY_MATRIX_TOLERANCE = 1e-8


def real_number(value: Any, name: str, allow_infinity: bool = False) -> float:
    """``value`` as a finite float (or +-inf if ``allow_infinity``), or
    ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if (
            isinstance(value, default_np.ndarray)
            and value.shape == ()
            and value.dtype.kind in "iuf"
        ):
            value = value.item()
        else:
            raise TypeError(f"{name} must be a real number; got {value!r}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_infinity):
        raise ValueError(f"{name} must be finite; got {value}")
    return value


def boolean(value: Any, name: str) -> bool:
    """``True`` or ``False`` (also NumPy's), else a ``TypeError`` naming ``name``."""
    if isinstance(value, (bool, default_np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False; got {value!r}")


def positive_number(value: Any, name: str) -> float:
    """A finite float > 0."""
    value = real_number(value, name)
    if value <= 0.0:
        raise ValueError(f"{name} must be > 0; got {value}")
    return value


def non_negative_number(value: Any, name: str, allow_infinity: bool = False) -> float:
    """A finite float >= 0 (or inf if ``allow_infinity``)."""
    value = real_number(value, name, allow_infinity)
    if value < 0.0:
        raise ValueError(f"{name} must be >= 0; got {value}")
    return value


def positive_integer(value: Any, name: str, minimum: int = 1) -> int:
    """An ``int`` >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, default_np.integer)):
        raise TypeError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value}")
    return int(value)


def choice(value: Any, valid: tuple[str, ...], name: str) -> str:
    """``value`` in its normal form if it is one of the lower-case strings ``valid``.

    The one choice rule of the library (arguments, options, environment
    variables): surrounding blanks are stripped and case is ignored, so
    ``'JAX'`` and ``' jax '`` are ``'jax'``, which is returned. A value that is
    not a string is a ``TypeError``, any other string a ``ValueError``; both
    name ``name`` and the valid values.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {list(valid)}; got {value!r}")
    normal = value.strip().lower()
    if normal not in valid:
        raise ValueError(f"unknown {name} {value!r}: {name} must be one of {list(valid)}")
    return normal


MatrixKind = Literal["operator", "state", "superoperator"]

_QOBJ_TYPES_OF_KIND: dict[str, tuple[str, ...]] = {
    "operator": ("oper",),
    "state": ("oper", "ket"),
    "superoperator": ("super",),
}


def metadata(value: Any, name: str = "metadata") -> dict:
    """``value``, None or a JSON-serialisable dict, as a new dict ({} for None); a
    ``TypeError`` naming ``name`` otherwise. The one check of the metadata that
    results and process tensors carry into their files (the entries are not copied)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict (JSON-serialisable); got {type(value).__name__}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be JSON-serialisable: {error}") from error
    return dict(value)


def is_qobj(value: Any) -> bool:
    """Whether ``value`` is a ``qutip.Qobj`` (False whenever QuTiP was never imported)."""
    qutip = sys.modules.get("qutip")
    return qutip is not None and isinstance(value, qutip.Qobj)


def from_qutip(value: Any, name: str, kind: MatrixKind = "operator") -> Any:
    """``value`` as a NumPy array if it is a ``qutip.Qobj``, else ``value`` unchanged.

    The one rule by which QuTiP objects enter the library (every operator,
    state and superoperator input passes through :func:`square_matrix`,
    which calls this first). QuTiP is never imported here: a ``Qobj`` can
    only exist once the user has imported ``qutip``, so the check looks in
    ``sys.modules``.

    ``kind`` says what the caller expects:

    - ``'operator'``: a Qobj of type ``'oper'`` gives its (d, d) matrix
      (composite dimensions are flattened, as ``Qobj.full()`` does);
    - ``'state'``: also a ket |psi> (type ``'ket'``), which gives
      |psi><psi|, a (d, d) density matrix (normalise the ket first);
    - ``'superoperator'``: a Qobj of type ``'super'``, which QuTiP writes
      for column-stacked density matrices; it is converted to this library's
      row-major convention, vec(A rho B) = (A kron B^T) vec(rho) (a Choi or
      chi representation is first turned into a superoperator by QuTiP's
      ``to_super``).

    Any other Qobj type is a ``TypeError`` naming ``name``, the type given
    and the types allowed.
    """
    if not is_qobj(value):
        return value
    qutip = sys.modules["qutip"]
    allowed = _QOBJ_TYPES_OF_KIND[kind]
    qobj_type = value.type
    if qobj_type not in allowed:
        hint = ""
        if qobj_type == "ket" and kind == "operator":
            hint = " (a ket is accepted for a state only; pass ket.proj() for |psi><psi|)"
        elif qobj_type == "oper" and kind == "superoperator":
            hint = (
                " (pass qutip.to_super(U) for rho -> U rho U^dagger, or a superoperator "
                "built with qutip.spre/spost/sprepost)"
            )
        elif qobj_type == "bra":
            hint = " (pass bra.dag() for a ket)"
        raise TypeError(
            f"{name} must be a {kind}: a QuTiP Qobj of type {' or '.join(map(repr, allowed))} "
            f"or an array; got a Qobj of type {qobj_type!r}{hint}"
        )
    if qobj_type == "ket":
        vector = default_np.asarray(value.full(), dtype=default_np.complex128).reshape(-1)
        return default_np.outer(vector, vector.conj())
    if qobj_type == "super":
        if value.superrep != "super":
            value = qutip.to_super(value)
        return _column_to_row_stacking(
            default_np.asarray(value.full(), dtype=default_np.complex128), name
        )
    return default_np.asarray(value.full(), dtype=default_np.complex128)


def _column_to_row_stacking(matrix: default_np.ndarray, name: str) -> default_np.ndarray:
    """A superoperator on column-stacked vec(rho) (QuTiP's) as one on row-major vec(rho).

    Column stacking puts rho[i, j] at index i + d j, row-major at i d + j, so
    the two differ by swapping the two halves of each Liouville index.
    """
    d2 = matrix.shape[0]
    d = math.isqrt(d2)
    if matrix.shape != (d2, d2) or d * d != d2:
        raise ValueError(
            f"{name} must be a (d^2, d^2) superoperator; got a Qobj of shape {matrix.shape}"
        )
    return matrix.reshape(d, d, d, d).transpose(1, 0, 3, 2).reshape(d2, d2)


def square_matrix(
    value: Any, name: str, dimension: int | None = None, kind: MatrixKind = "operator"
) -> default_np.ndarray:
    """``value`` as a finite complex128 (d, d) NumPy array, d == ``dimension`` if given.

    ``value`` is anything NumPy turns into a square matrix, or a ``qutip.Qobj``
    of the ``kind`` asked for (:func:`from_qutip`).
    """
    value = from_qutip(value, name, kind)
    if callable(value):
        raise TypeError(f"{name} must be a matrix, not a callable")
    try:
        matrix = default_np.array(value, dtype=default_np.complex128)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a square matrix of numbers; got {value!r}") from error
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix; got shape {matrix.shape}")
    if not default_np.all(default_np.isfinite(matrix)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    if dimension is not None and matrix.shape[0] != dimension:
        if kind == "superoperator":
            system = math.isqrt(dimension)
            raise ValueError(
                f"{name} is a {matrix.shape[0]}x{matrix.shape[0]} matrix, but a superoperator "
                f"of a system of dimension {system} acts on vectorised density matrices: "
                f"({dimension}, {dimension}) (e.g. A kron B.T for rho -> A rho B)"
            )
        raise ValueError(
            f"{name} has dimension {matrix.shape[0]} but the system has dimension {dimension}"
        )
    return matrix


def hermitian_matrix(value: Any, name: str, dimension: int | None = None) -> default_np.ndarray:
    """A square matrix that equals its conjugate transpose (relative tolerance 1e-10)."""
    matrix = square_matrix(value, name, dimension)
    scale = max(1.0, float(default_np.max(default_np.abs(matrix))))
    deviation = float(default_np.max(default_np.abs(matrix - matrix.conj().T)))
    if deviation > HERMITICITY_TOLERANCE * scale:
        raise ValueError(f"{name} must be Hermitian; max |A - A^dagger| = {deviation:.3g}")
    return 0.5 * (matrix + matrix.conj().T)


def density_matrix(
    value: Any,
    name: str,
    dimension: int | None = None,
    tolerance: float = DENSITY_MATRIX_TOLERANCE,
) -> default_np.ndarray:
    """A (d, d) density matrix: Hermitian, trace 1 and positive semi-definite
    within ``tolerance``; a ``qutip.Qobj`` ket |psi> is taken as |psi><psi|."""
    matrix = square_matrix(value, name, dimension, kind="state")
    deviation = float(default_np.max(default_np.abs(matrix - matrix.conj().T)))
    if deviation > tolerance:
        raise ValueError(f"{name} must be Hermitian; max |rho - rho^dagger| = {deviation:.3g}")
    trace = complex(default_np.trace(matrix))
    if abs(trace - 1.0) > tolerance:
        raise ValueError(f"{name} must have trace 1; got trace {trace:.6g}")
    smallest = float(default_np.linalg.eigvalsh(0.5 * (matrix + matrix.conj().T))[0])
    if smallest < -tolerance:
        raise ValueError(
            f"{name} must be positive semi-definite; its smallest eigenvalue is {smallest:.3g}"
        )
    return matrix


def initial_operator(value: Any, name: str, dimension: int | None = None) -> default_np.ndarray:
    """A (d, d) operator to propagate where the map is linear: any finite square
    matrix of the system's dimension, of any trace (a density matrix, the identity,
    a traceless observable); a ``qutip.Qobj`` ket |psi> is taken as |psi><psi|.

    The dynamics of a*rho1 + b*rho2 is a*dyn(rho1) + b*dyn(rho2), so nothing
    here asks for positivity, Hermiticity or trace 1.
    """
    return square_matrix(value, name, dimension, kind="state")


def liouville_classes(classes: Any, d2: int) -> default_np.ndarray:
    """The class of each Liouville index, (d2,) non-negative integers; None: the
    identity ``arange(d2)`` (every index its own class)."""
    if classes is None:
        return default_np.arange(d2)
    array = default_np.asarray(classes)
    if array.shape != (d2,) or array.dtype.kind not in "iu" or array.min() < 0:
        raise ValueError(f"classes must be {d2} non-negative integers")
    return array.astype(int)
