"""Library-wide defaults and the environment variables that set them.

The environment is read once, at import, and validated:

- ``NONMARKOV_BACKEND``: ``numpy`` (default) or ``jax``.
- ``NONMARKOV_PRECISION``: ``double`` (default, complex128/float64) or
  ``single`` (complex64/float32).
- ``NONMARKOV_PROGRESS``: ``bar`` (default) or ``silent``, the default
  ``progress_type`` of long computations.
"""

from __future__ import annotations

import os

VALID_BACKENDS = ("numpy", "jax")
VALID_PRECISIONS = ("double", "single")
VALID_PROGRESS_TYPES = ("bar", "silent")

# Defaults of the numerical parameters, shared by all algorithms.
DEFAULT_SUBDIV_LIMIT = 256
DEFAULT_LIOUVILLIAN_EPSREL = 2**-26
DEFAULT_INTEGRAL_EPSREL = 2**-26
DEFAULT_TOLERANCE = 3.9e-3

JAX_INSTALL_HINT = 'pip install "nonmarkov[jax]"  (or: pip install jax jaxlib)'


def check_choice(value: str, valid: tuple[str, ...], what: str) -> str:
    """Return ``value`` lower-cased if it is one of ``valid``, else raise."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, one of {list(valid)}; got {value!r}")
    name = value.strip().lower()
    if name not in valid:
        raise ValueError(f"unknown {what} {value!r}; valid values are {list(valid)}")
    return name


def _from_environment(variable: str, default: str, valid: tuple[str, ...]) -> str:
    raw = os.environ.get(variable)
    if raw is None or raw.strip() == "":
        return default
    return check_choice(raw, valid, f"value of the environment variable {variable}")


BACKEND = _from_environment("NONMARKOV_BACKEND", "numpy", VALID_BACKENDS)
PRECISION = _from_environment("NONMARKOV_PRECISION", "double", VALID_PRECISIONS)
PROGRESS_TYPE = _from_environment("NONMARKOV_PROGRESS", "bar", VALID_PROGRESS_TYPES)
