"""Engines: one implementation per backend of the window and chain interfaces.

:mod:`.base` defines the interfaces, :mod:`.host` implements them on the NumPy
kernels, :mod:`.jax` compiled with JAX. The functions here are the one place
that chooses: from the active backend and the engine options.
"""

from __future__ import annotations

from ..backends.numerical_backend import np
from ..options import EngineOptions, resolve
from .base import ChainEngine, TebdEngine, TebdSpec, WindowEngine, WindowSpec
from .batched import BatchedChainEngine, HostBatchedChainEngine
from .host import HostChainEngine, HostTebdEngine, HostWindowEngine


def window_engine(spec: WindowSpec, options: EngineOptions | None = None) -> WindowEngine:
    """The window engine for ``spec`` on the active backend."""
    options = resolve(options)
    if np.backend_name == "jax":
        from .jax.window import JaxWindowEngine

        return JaxWindowEngine(spec, options, np.dtype_complex)
    return HostWindowEngine(spec, options)


def chain_engine(options: EngineOptions | None = None) -> ChainEngine:
    """The chain engine of the active backend."""
    options = resolve(options)
    if np.backend_name == "jax":
        from .jax.engine import JaxChainEngine

        return JaxChainEngine(options)
    return HostChainEngine(options)


def tebd_engine(spec: TebdSpec, options: EngineOptions | None = None) -> TebdEngine:
    """The TEBD engine (chain MPS with augmented legs) for ``spec`` on the active backend."""
    options = resolve(options)
    if np.backend_name == "jax":
        from .jax.tebd import jax_tebd_engine

        return jax_tebd_engine(spec, options)
    return HostTebdEngine(spec, options)


def batched_chain_engine(options: EngineOptions | None = None) -> BatchedChainEngine:
    """The batched chain engine (a batch of states, :mod:`.batched`) of the active backend."""
    options = resolve(options)
    if np.backend_name == "jax":
        from .jax.batched import JaxBatchedChainEngine

        return JaxBatchedChainEngine(options)
    return HostBatchedChainEngine(options)
