"""Proxies ``np`` and ``la`` that forward to the active numerical backend.

Library code writes ``from nonmarkov.backends.numerical_backend import np, la``
and uses ``np.einsum``, ``la.svd`` and so on; the calls go to NumPy/SciPy or to
``jax.numpy``/``jax.scipy.linalg``, whichever backend is active *at call time*.
``default_np`` is plain NumPy, for work that must stay on the host (integrals,
file I/O).

Extras on ``np``: ``dtype_complex`` and ``dtype_float`` (both follow from the
one precision setting), ``update(array, indices, values)``,
``get_random_floats(seed, shape)``, ``asarray_complex``/``asarray_float`` and
``to_host``. Extras on ``la``: ``svd`` with ``full_matrices=False`` semantics
on both backends.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as default_np
import scipy.linalg as default_la

from .. import config


@dataclass
class _State:
    """The active backend: its name, modules and precision."""

    name: str
    precision: str
    numpy_module: ModuleType
    linalg_module: ModuleType


_jax_loaded: list[bool] = []


def _load_jax() -> tuple[ModuleType, ModuleType]:
    try:
        jnp = importlib.import_module("jax.numpy")
        jla = importlib.import_module("jax.scipy.linalg")
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(
            "the 'jax' backend was requested but JAX is not installed; "
            f"install it with: {config.JAX_INSTALL_HINT}"
        ) from error
    if not _jax_loaded:
        _jax_loaded.append(True)
        # JAX's import brings some 65,000 long-lived objects (modules, functions,
        # tracing rules) that every full collection of the garbage collector would walk
        # again: a short run of many small arrays spent more time there than computing.
        # In the permanent generation the collector skips them; reference counting
        # still frees them.
        gc.freeze()
    return jnp, jla


_cache: dict[str, str | None] = {"dir": None}

#: Called before JAX's global configuration changes (precision, cache directory):
#: work that uses JAX in other threads (the site-by-site compilations ahead)
#: stops there first, so that no compilation sees the change half-way.
_before_jax_change: list[Callable[[], None]] = []


def before_jax_change(callback: Callable[[], None]) -> None:
    """Register ``callback`` (once) to run before JAX's configuration changes."""
    if callback not in _before_jax_change:
        _before_jax_change.append(callback)


def _settle_jax_work() -> None:
    for callback in list(_before_jax_change):
        callback()


def enable_compilation_cache(path: Any) -> str:
    """Keep JAX's compiled kernels in the directory ``path``, across processes.

    Sets JAX's persistent compilation cache (``jax_compilation_cache_dir``)
    and lowers its thresholds (minimum compile time 0 s, any entry size) so
    that the small kernels of the library are cached too. The directory is
    created if needed. Returns the absolute path. Raises ``TypeError`` or
    ``ValueError`` for a bad path and ``ImportError`` if JAX is missing.
    """
    directory = config.check_cache_dir(path, "path")
    _load_jax()
    import jax

    os.makedirs(directory, exist_ok=True)
    _settle_jax_work()
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    try:  # the cache is set up at the first compilation; let it see the new directory
        from jax._src import compilation_cache

        compilation_cache.reset_cache()
    except (ImportError, AttributeError):  # pragma: no cover - depends on the JAX version
        pass
    _cache["dir"] = directory
    return directory


def compilation_cache_dir() -> str | None:
    """The persistent compilation cache directory in use, or None."""
    return _cache["dir"] or None


def _configure_jax(precision: str) -> None:
    import jax

    # JAX sets its options on its Config object at run time, unseen by mypy
    if jax.config.jax_enable_x64 != (precision == "double"):  # type: ignore[attr-defined]
        _settle_jax_work()
    jax.config.update("jax_enable_x64", precision == "double")
    if config.JAX_CACHE_DIR is not None and _cache["dir"] is None:
        try:
            enable_compilation_cache(config.JAX_CACHE_DIR)
        except OSError as error:  # only the default may be unusable (read-only home)
            if not config.JAX_CACHE_IS_DEFAULT:
                raise
            warnings.warn(
                f"no persistent JAX compilation cache: the default directory "
                f"{config.JAX_CACHE_DIR} cannot be created ({error}); set "
                f"NONMARKOV_JAX_CACHE_DIR to a writable directory or to 'off'",
                RuntimeWarning,
                stacklevel=2,
            )
            _cache["dir"] = ""  # tried once


def make_state(name: str, precision: str) -> _State:
    """Validate ``name`` and ``precision`` and load the backend's modules."""
    name = config.check_choice(name, config.VALID_BACKENDS, "backend")
    precision = config.check_choice(precision, config.VALID_PRECISIONS, "precision")
    if name == "numpy":
        return _State(name, precision, default_np, default_la)
    jnp, jla = _load_jax()
    _configure_jax(precision)
    return _State(name, precision, jnp, jla)


_state = make_state(config.BACKEND, config.PRECISION)
#: Per-thread override of ``_state`` (see :func:`numpy_in_this_thread`); ``_overrides``
#: counts the threads that have one, so that the proxies look it up only then.
_local = threading.local()
_overrides = [0]
_overrides_lock = threading.Lock()


def _active() -> _State:
    if _overrides[0]:
        return getattr(_local, "state", None) or _state
    return _state


def get_state() -> _State:
    """Return the active backend state (name, precision, modules) of this thread."""
    return _active()


@contextlib.contextmanager
def numpy_in_this_thread() -> Iterator[None]:
    """Run the block on NumPy/SciPy (same precision) in the calling thread only.

    The compiled JAX algorithms use it for the steps they run on the host while
    XLA compiles their kernel in another thread; other threads keep the
    active backend.
    """
    previous = getattr(_local, "state", None)
    _local.state = _State("numpy", _state.precision, default_np, default_la)
    with _overrides_lock:
        _overrides[0] += 1
    try:
        yield
    finally:
        with _overrides_lock:
            _overrides[0] -= 1
        _local.state = previous


def set_state(state: _State) -> None:
    """Make ``state`` the active backend (used by ``set_backend``)."""
    global _state
    if state.name == "jax":
        _configure_jax(state.precision)
    _state = state


class NumPyProxy:
    """Forwards attribute access to ``numpy`` or ``jax.numpy``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_active().numpy_module, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(_active().numpy_module)) | set(type(self).__dict__))

    @property
    def backend_name(self) -> str:
        """Name of the active backend, ``'numpy'`` or ``'jax'``."""
        return _active().name

    @property
    def precision(self) -> str:
        """Active precision, ``'double'`` or ``'single'``."""
        return _active().precision

    @property
    def dtype_complex(self) -> Any:
        """complex128 in double precision, complex64 in single."""
        if _active().precision == "double":
            return default_np.complex128
        return default_np.complex64

    @property
    def dtype_float(self) -> Any:
        """float64 in double precision, float32 in single."""
        if _active().precision == "double":
            return default_np.float64
        return default_np.float32

    def asarray_complex(self, values: Any) -> Any:
        """``values`` as an array of the active backend with ``dtype_complex``."""
        return _active().numpy_module.asarray(values, dtype=self.dtype_complex)

    def asarray_float(self, values: Any) -> Any:
        """``values`` as an array of the active backend with ``dtype_float``."""
        return _active().numpy_module.asarray(values, dtype=self.dtype_float)

    def update(self, array: Any, indices: Any, values: Any) -> Any:
        """Return ``array`` with ``array[indices] = values``.

        In place (no copy) on NumPy, a functional ``.at[].set`` on JAX; always
        use the returned array.
        """
        if _active().name == "numpy":
            array[indices] = values
            return array
        return array.at[indices].set(values)

    def get_random_floats(self, seed: int, shape: Any) -> Any:
        """Uniform floats in [0, 1) with ``dtype_float``, the same on every backend."""
        generator = default_np.random.default_rng(seed)
        values = generator.random(shape).astype(self.dtype_float)
        return _active().numpy_module.asarray(values)

    def to_host(self, array: Any) -> default_np.ndarray:
        """Copy ``array`` (any backend) into a NumPy array on the host."""
        return default_np.asarray(array)


class LinalgProxy:
    """Forwards attribute access to ``scipy.linalg`` or ``jax.scipy.linalg``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_active().linalg_module, name)

    def svd(self, matrix: Any) -> tuple[Any, Any, Any]:
        """Thin SVD ``matrix = u @ diag(s) @ vh`` with descending ``s``.

        Shapes: matrix (m, n) -> u (m, k), s (k,), vh (k, n), k = min(m, n).
        On NumPy a wide matrix is factored as its conjugate transpose (LAPACK's
        divide and conquer is 1.2-1.5x faster on the tall form at these sizes).
        """
        if _active().name == "numpy":
            rows, cols = matrix.shape
            if rows < cols:
                u, s, vh = _host_svd(matrix.conj().T)
                return vh.conj().T, s, u.conj().T
            return _host_svd(matrix)
        return _active().linalg_module.svd(matrix, full_matrices=False)


def _host_svd(matrix: Any) -> tuple[Any, Any, Any]:
    """Thin SVD with SciPy's divide and conquer, falling back to the slower but
    more robust QR iteration where it does not converge."""
    try:
        return default_la.svd(
            matrix, full_matrices=False, lapack_driver="gesdd", check_finite=False
        )
    except default_np.linalg.LinAlgError:
        return default_la.svd(
            matrix, full_matrices=False, lapack_driver="gesvd", check_finite=False
        )


np = NumPyProxy()
la = LinalgProxy()

__all__ = ["np", "la", "default_np", "default_la", "NumPyProxy", "LinalgProxy"]
