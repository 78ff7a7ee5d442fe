"""Engines: one implementation per backend of the engine interfaces.

:mod:`.base` defines the interfaces (window, chain, TEBD), :mod:`.host` implements
them on the NumPy kernels, :mod:`.batched` the batched chain engine, :mod:`.jax`
compiled with JAX. The functions here are the one place that chooses: from the
active backend and the engine options, or an implementation put in place with
:func:`use_engines` (docs/ARCHITECTURE.md, "Adding an engine").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ..backends.numerical_backend import np
from ..options import EngineOptions, resolve
from .base import ChainEngine, TebdEngine, TebdSpec, WindowEngine, WindowSpec
from .batched import BatchedChainEngine, HostBatchedChainEngine
from .host import HostChainEngine, HostTebdEngine, HostWindowEngine

#: the kinds of engine :func:`use_engines` can put in place
ENGINE_KINDS = ("window", "chain", "batched_chain", "tebd")

# implementations in place of the backend's choice, by kind (use_engines)
_IN_PLACE: dict[str, Callable[..., Any]] = {}


@contextlib.contextmanager
def use_engines(**factories: Callable[..., Any]) -> Iterator[None]:
    """Within the ``with`` block, the engine of each kind named is made by its factory
    instead of chosen from the active backend, and every algorithm runs on it.

    The kinds: ``window`` and ``tebd`` (factory ``(spec, options)``), ``chain`` and
    ``batched_chain`` (factory ``(options)``); ``options`` is the resolved
    :class:`~nonmarkov.options.EngineOptions`. This is how a new engine runs the
    library's algorithms and tests before a backend chooses it (docs/ARCHITECTURE.md,
    "Adding an engine"). The setting is process-wide (not per thread); blocks nest,
    and leaving one restores what was in place before it. An unknown kind is a
    ``TypeError``, a factory that is not callable too.
    """
    for kind, factory in factories.items():
        if kind not in ENGINE_KINDS:
            raise TypeError(f"unknown engine kind {kind!r}; the kinds are {list(ENGINE_KINDS)}")
        if not callable(factory):
            raise TypeError(f"the {kind} engine factory must be callable; got {factory!r}")
    before = dict(_IN_PLACE)
    _IN_PLACE.update(factories)
    try:
        yield
    finally:
        _IN_PLACE.clear()
        _IN_PLACE.update(before)


def window_engine(spec: WindowSpec, options: EngineOptions | None = None) -> WindowEngine:
    """The window engine for ``spec`` on the active backend."""
    options = resolve(options)
    if "window" in _IN_PLACE:
        return _IN_PLACE["window"](spec, options)
    if np.backend_name == "jax":
        from .jax.window import JaxWindowEngine

        return JaxWindowEngine(spec, options, np.dtype_complex)
    return HostWindowEngine(spec, options)


def chain_engine(options: EngineOptions | None = None) -> ChainEngine:
    """The chain engine of the active backend."""
    options = resolve(options)
    if "chain" in _IN_PLACE:
        return _IN_PLACE["chain"](options)
    if np.backend_name == "jax":
        from .jax.engine import JaxChainEngine

        return JaxChainEngine(options)
    return HostChainEngine(options)


def tebd_engine(spec: TebdSpec, options: EngineOptions | None = None) -> TebdEngine:
    """The TEBD engine (chain MPS with augmented legs) for ``spec`` on the active backend."""
    options = resolve(options)
    if "tebd" in _IN_PLACE:
        return _IN_PLACE["tebd"](spec, options)
    if np.backend_name == "jax":
        from .jax.tebd import jax_tebd_engine

        return jax_tebd_engine(spec, options)
    return HostTebdEngine(spec, options)


def batched_chain_engine(options: EngineOptions | None = None) -> BatchedChainEngine:
    """The batched chain engine (a batch of states, :mod:`.batched`) of the active backend."""
    options = resolve(options)
    if "batched_chain" in _IN_PLACE:
        return _IN_PLACE["batched_chain"](options)
    if np.backend_name == "jax":
        from .jax.batched import JaxBatchedChainEngine

        return JaxBatchedChainEngine(options)
    return HostBatchedChainEngine(options)
