"""Engines: one implementation per backend of the window and chain interfaces.

:mod:`.base` defines the interfaces, :mod:`.host` implements them on the NumPy
kernels, :mod:`.jax` compiled with JAX. The two functions here are the one place
that chooses: from the active backend and the engine options.
"""

from __future__ import annotations

from ..backends.numerical_backend import np
from ..options import EngineOptions, resolve
from .base import ChainEngine, WindowEngine, WindowSpec
from .host import HostChainEngine, HostWindowEngine


def window_engine(spec: WindowSpec, options: EngineOptions | None = None) -> WindowEngine:
    """The window engine for ``spec`` on the active backend."""
    options = resolve(options)
    if np.backend_name == "jax":
        from .jax.engine import JaxWindowEngine

        return JaxWindowEngine(spec, options)
    return HostWindowEngine(spec, options)


def chain_engine(options: EngineOptions | None = None) -> ChainEngine:
    """The chain engine of the active backend."""
    options = resolve(options)
    if np.backend_name == "jax":
        from .jax.engine import JaxChainEngine

        return JaxChainEngine(options)
    return HostChainEngine(options)
