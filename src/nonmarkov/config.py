"""Library-wide defaults and the environment variables that set them.

The environment is read once, at import, and validated:

- ``NONMARKOV_BACKEND``: ``numpy`` (default) or ``jax``; ``OQUPY_BACKEND`` (the
  variable of OQuPy's JAX branch) where it is unset; both set to different
  backends is an error.
- ``NONMARKOV_PRECISION``: ``double`` (default, complex128/float64) or
  ``single`` (complex64/float32).
- ``NONMARKOV_PROGRESS``: ``bar`` (default), ``simple`` or ``silent``, the
  default ``progress_type`` of long computations (:mod:`nonmarkov.progress`).
- ``NONMARKOV_JAX_CACHE_DIR``: the directory of JAX's persistent compilation
  cache (compiled kernels are reused by later processes); unset or empty: the
  user's cache directory (``$XDG_CACHE_HOME/nonmarkov/jax``, by default
  ``~/.cache/nonmarkov/jax``); ``off``: no cache. It is created when the JAX
  backend is first used; an existing path that is not a directory is an error.
- ``NONMARKOV_BLAS_THREADS``: the BLAS threads of the hot loops
  (:mod:`nonmarkov._threads`): ``auto`` (default; one thread, every core for a
  large operation), ``N`` >= 1 (N threads for every operation) or ``0`` (the
  BLAS setting left alone).
- ``NONMARKOV_JAX_SVD``, ``NONMARKOV_JAX_DEVICE``: the library defaults of the
  JAX engine's options (:class:`nonmarkov.options.EngineOptions`: ``svd``,
  ``device``), read here once;
  the options themselves are passed to the algorithms (``options=``) or set
  once with :func:`nonmarkov.options.set_default_options`.
"""

from __future__ import annotations

import os

import numpy

from .validation import choice as check_choice  # the one choice rule, under config's name

#: OQuPy's names of the default dtypes (``oqupy.config.NpDtype``), for its scripts;
#: the library itself takes its dtypes from the backend proxy (``np.dtype_complex``)
NpDtype = numpy.complex128
NpDtypeReal = numpy.float64

VALID_BACKENDS = ("numpy", "jax")
VALID_PRECISIONS = ("double", "single")
VALID_PROGRESS_TYPES = ("bar", "simple", "silent")
VALID_JAX_SVD = ("default", "qr", "divide_and_conquer")
#: where the JAX engines run a computation: chosen by its size (``auto``), always on
#: the host CPU, or always on the accelerator (:mod:`nonmarkov.engines.jax.placement`)
VALID_JAX_DEVICES = ("auto", "host", "accelerator")

# Defaults of the numerical parameters, shared by all algorithms.
DEFAULT_SUBDIV_LIMIT = 256
DEFAULT_LIOUVILLIAN_EPSREL = 2**-26
DEFAULT_INTEGRAL_EPSREL = 2**-26
DEFAULT_TOLERANCE = 3.9e-3

JAX_INSTALL_HINT = 'pip install "nonmarkov[jax]"  (or: pip install jax jaxlib)'


def _from_environment(variable: str, default: str, valid: tuple[str, ...]) -> str:
    raw = os.environ.get(variable)
    if raw is None or raw.strip() == "":
        return default
    return check_choice(raw, valid, variable)


def _backend_from_environment() -> str:
    """``NONMARKOV_BACKEND``, or where it is unset ``OQUPY_BACKEND`` (the variable of
    OQuPy's JAX branch); both set to different backends is an error naming both."""
    backend = _from_environment("NONMARKOV_BACKEND", "numpy", VALID_BACKENDS)
    alias = _from_environment("OQUPY_BACKEND", "", VALID_BACKENDS)
    if not alias:
        return backend
    if os.environ.get("NONMARKOV_BACKEND", "").strip() and alias != backend:
        raise ValueError(
            f"the environment variables NONMARKOV_BACKEND={backend!r} and "
            f"OQUPY_BACKEND={alias!r} ask for different backends; unset one of them"
        )
    return alias


BACKEND = _backend_from_environment()
PRECISION = _from_environment("NONMARKOV_PRECISION", "double", VALID_PRECISIONS)
PROGRESS_TYPE = _from_environment("NONMARKOV_PROGRESS", "bar", VALID_PROGRESS_TYPES)
JAX_SVD = _from_environment("NONMARKOV_JAX_SVD", "default", VALID_JAX_SVD)
JAX_DEVICE = _from_environment("NONMARKOV_JAX_DEVICE", "auto", VALID_JAX_DEVICES)


def blas_threads_setting(raw: str) -> str | int:
    """A value of ``NONMARKOV_BLAS_THREADS``: ``'auto'`` or a non-negative integer
    (blank: ``'auto'``); anything else is a ``ValueError`` that names the variable."""
    text = raw.strip().lower()
    if text in ("", "auto"):
        return "auto"
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(
            f"NONMARKOV_BLAS_THREADS must be 'auto' or a non-negative integer; got {raw!r}"
        )
    return value


#: the BLAS thread rule of the hot loops (:mod:`nonmarkov._threads`): ``'auto'``,
#: N >= 1 threads, or 0 (the BLAS left alone)
BLAS_THREADS = blas_threads_setting(os.environ.get("NONMARKOV_BLAS_THREADS", ""))


def check_cache_dir(path: object, what: str = "cache directory") -> str:
    """Return ``path`` as an absolute path if it can be a cache directory, else raise.

    Allowed: a string or ``os.PathLike`` naming an existing directory or a path
    that does not exist yet (it is created when used).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or os.PathLike); got {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what} must be a non-empty path; got {path!r}")
    text = os.path.abspath(os.path.expanduser(text))
    if os.path.exists(text) and not os.path.isdir(text):
        raise ValueError(f"{what} {path!r} exists and is not a directory")
    return text


#: the value of ``NONMARKOV_JAX_CACHE_DIR`` that switches the persistent cache off
CACHE_OFF = "off"


def _cache_dir_from_environment(variable: str) -> str | None:
    raw = os.environ.get(variable)
    if raw is not None and raw.strip().lower() == CACHE_OFF:
        return None
    if raw is None or raw.strip() == "":
        base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join("~", ".cache")
        return check_cache_dir(os.path.join(base, "nonmarkov", "jax"), "the default cache")
    return check_cache_dir(raw.strip(), f"value of the environment variable {variable}")


JAX_CACHE_DIR = _cache_dir_from_environment("NONMARKOV_JAX_CACHE_DIR")
#: whether JAX_CACHE_DIR is the default one (not named by the environment variable)
JAX_CACHE_IS_DEFAULT = not os.environ.get("NONMARKOV_JAX_CACHE_DIR", "").strip()
