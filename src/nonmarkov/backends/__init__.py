"""The numerical backend layer: choose NumPy/SciPy or JAX, and the precision.

- ``set_backend(name, precision=None)`` switches at run time,
- ``use_backend(name, precision=None)`` switches for a ``with`` block,
- ``enable_jax_features()`` is short for ``set_backend('jax')``,
- ``info()`` describes the active backend (name, version, devices, dtypes),
- ``enable_compilation_cache(path)`` keeps compiled JAX kernels on disk.

The start-up choice comes from ``NONMARKOV_BACKEND`` and
``NONMARKOV_PRECISION``, the cache from ``NONMARKOV_JAX_CACHE_DIR`` (see
:mod:`nonmarkov.config`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from . import numerical_backend as _nb
from .numerical_backend import compilation_cache_dir as compilation_cache_dir
from .numerical_backend import enable_compilation_cache as enable_compilation_cache
from .numerical_backend import la as la
from .numerical_backend import np as np


def get_backend() -> str:
    """Name of the active backend, ``'numpy'`` or ``'jax'``."""
    return _nb.get_state().name


def get_precision() -> str:
    """Active precision, ``'double'`` or ``'single'``."""
    return _nb.get_state().precision


def set_backend(name: str, precision: str | None = None) -> None:
    """Make ``name`` (``'numpy'`` or ``'jax'``) the active backend.

    ``precision`` (``'double'`` or ``'single'``) defaults to the current one.
    Raises ``ValueError`` for an unknown name and ``ImportError`` (with the
    install command) if JAX is requested but not installed.
    """
    precision = get_precision() if precision is None else precision
    _nb.set_state(_nb.make_state(name, precision))


@contextlib.contextmanager
def use_backend(name: str, precision: str | None = None) -> Iterator[None]:
    """Use backend ``name`` inside a ``with`` block, then restore the previous one."""
    previous = _nb.get_state()
    set_backend(name, precision)
    try:
        yield
    finally:
        _nb.set_state(previous)


def enable_jax_features(precision: str | None = None) -> None:
    """Switch to the JAX backend (short form of ``set_backend('jax')``)."""
    set_backend("jax", precision)


def info() -> dict[str, Any]:
    """Describe the active backend.

    Returns a dict with ``backend``, ``version``, ``precision``,
    ``dtype_complex``, ``dtype_float``, ``devices`` (list of strings,
    ``'platform:id (kind)'``, the default device first) and ``default_device``
    (where computations run: JAX's default device, e.g. ``'cuda:0 (NVIDIA
    H200)'``; choose the platform with ``JAX_PLATFORMS=cpu|cuda``).
    """
    state = _nb.get_state()
    if state.name == "numpy":
        import numpy
        import scipy

        version = f"numpy {numpy.__version__}, scipy {scipy.__version__}"
        devices = ["cpu"]
    else:
        import jax

        version = f"jax {jax.__version__}"
        default = jax.config.jax_default_device  # type: ignore[attr-defined]  # set at run time
        if default is None or isinstance(default, str):
            default = jax.devices(default)[0] if isinstance(default, str) else jax.devices()[0]
        others = [device for device in jax.devices() if device != default]
        devices = [_describe(device) for device in [default] + others]
    return {
        "backend": state.name,
        "version": version,
        "precision": state.precision,
        "dtype_complex": np.dtype(np.dtype_complex).name,
        "dtype_float": np.dtype(np.dtype_float).name,
        "devices": devices,
        "default_device": devices[0],
    }


def _describe(device: Any) -> str:
    """'platform:id (kind)' of a JAX device, e.g. 'cuda:0 (NVIDIA H200)'."""
    platform = "cuda" if device.platform == "gpu" else device.platform
    return f"{platform}:{device.id} ({device.device_kind})"


def format_info(details: dict[str, Any] | None = None) -> str:
    """``info()`` as aligned text lines."""
    details = info() if details is None else details
    width = max(len(key) for key in details)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in details.items())


__all__ = [
    "np",
    "la",
    "get_backend",
    "get_precision",
    "set_backend",
    "use_backend",
    "enable_jax_features",
    "info",
    "format_info",
    "enable_compilation_cache",
    "compilation_cache_dir",
]
