"""Engines: one implementation per backend of the engine contracts.

:mod:`.base` defines the contracts (window, chain, TEBD) and the capabilities an
engine declares; :mod:`.eager_window`, :mod:`.eager_chain` and :mod:`.eager_tebd`
implement them on the backend proxy's kernels (NumPy), :mod:`.jax` compiled with JAX;
:mod:`.shared` holds what the implementations share. The functions here are the
one place that chooses an engine, from the active backend and the engine
options or an implementation put in place with :func:`use_engines`
(docs/ARCHITECTURE.md, "Adding an engine"), and the one place that refuses a
request the chosen engine's capabilities do not cover: a ``ValueError`` naming
the engine and the option, before any work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..backends.numerical_backend import np
from ..options import EngineOptions, resolve
from ..process_tensors.base import BaseProcessTensor
from .base import (
    ChainCapabilities,
    ChainEngine,
    FinalizeWindowEngine,
    TebdCapabilities,
    TebdEngine,
    TebdSpec,
    TraceWindowEngine,
    WindowCapabilities,
    WindowEngine,
    WindowSpec,
)
from .eager_chain import EagerChainEngine, in_memory
from .eager_tebd import EagerTebdEngine
from .eager_window import EagerWindowEngine, HostWindowEngine

#: the kinds of engine :func:`use_engines` can put in place
ENGINE_KINDS = ("window", "chain", "tebd")

# implementations in place of the backend's choice, by kind (use_engines)
_IN_PLACE: dict[str, Callable[..., Any]] = {}


@contextlib.contextmanager
def use_engines(**factories: Callable[..., Any]) -> Iterator[None]:
    """Within the ``with`` block, the engine of each kind named is made by its factory
    instead of chosen from the active backend, and every algorithm runs on it.

    The kinds: ``window`` and ``tebd`` (factory ``(spec, options)``), ``chain``
    (factory ``(options)``, single runs and batches); ``options`` is the resolved
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


def _capabilities(engine: object, kind: str, expected: type) -> Any:
    """The declared capabilities of ``engine``, a ``TypeError`` if it declares none."""
    declared = getattr(engine, "capabilities", None)
    if not isinstance(declared, expected):
        raise TypeError(
            f"the {kind} engine {type(engine).__name__} declares no capabilities: give it a "
            f"class attribute capabilities = {expected.__name__}(...) (nonmarkov.engines.base)"
        )
    return declared


def _refuse(engine: object, kind: str, option: str, instead: str) -> ValueError:
    return ValueError(
        f"the {kind} engine {type(engine).__name__} does not support {option}: {instead}"
    )


def _window(spec: WindowSpec, options: EngineOptions | None, resume: bool) -> WindowEngine:
    options = resolve(options)
    engine: WindowEngine
    if "window" in _IN_PLACE:
        engine = _IN_PLACE["window"](spec, options)
    elif spec.tail is not None and np.backend_name == "jax":  # not compiled: on the host
        engine = HostWindowEngine(spec, options)
    elif np.backend_name == "jax":
        from .jax.window import JaxWindowEngine

        engine = JaxWindowEngine(spec, options, np.dtype_complex)
    else:
        engine = EagerWindowEngine(spec, options)
    declared: WindowCapabilities = _capabilities(engine, "window", WindowCapabilities)
    if spec.oldest not in declared.modes:
        raise _refuse(
            engine, "window", f"oldest={spec.oldest!r}", f"it runs {list(declared.modes)}"
        )
    if spec.tail is not None and not declared.tail:
        raise _refuse(engine, "window", "tail modes", "use exponential_tail=False")
    if spec.trace_weight != 1.0 and not declared.trace_weight:
        raise _refuse(engine, "window", "a trace_weight other than 1", "use trace_weight=1")
    if resume and not declared.resume:
        raise _refuse(engine, "window", "resume", "it cannot hand over its window")
    return engine


def window_engine(
    spec: WindowSpec, options: EngineOptions | None = None
) -> TraceWindowEngine | FinalizeWindowEngine:
    """The window engine for ``spec`` on the active backend, in the mode ``spec.oldest``:
    typed with the contract of one mode or the other (an algorithm asks
    :func:`trace_window_engine` or :func:`finalize_window_engine`, and calls only the
    methods of its mode)."""
    return _window(spec, options, False)


def trace_window_engine(
    spec: WindowSpec, options: EngineOptions | None = None
) -> TraceWindowEngine:
    """The window engine for a ``'trace'`` ``spec`` (TEMPO) on the active backend."""
    if spec.oldest != "trace":
        raise ValueError(f"a trace window needs spec.oldest='trace'; got {spec.oldest!r}")
    return _window(spec, options, False)


def finalize_window_engine(
    spec: WindowSpec, options: EngineOptions | None = None, resume: bool = False
) -> FinalizeWindowEngine:
    """The window engine for a ``'finalize'`` ``spec`` (PT-TEMPO) on the active backend;
    ``resume``: the caller hands the window over (``host_window``, ``load_window``)."""
    if spec.oldest != "finalize":
        raise ValueError(f"a finalize window needs spec.oldest='finalize'; got {spec.oldest!r}")
    return _window(spec, options, resume)


def chain_engine(
    options: EngineOptions | None = None,
    *,
    batch: bool = False,
    adjoint: bool = False,
    differentiable: Sequence[BaseProcessTensor] | None = None,
) -> ChainEngine:
    """The chain engine of the active backend.

    ``batch``: the caller will run states with a member axis
    (:meth:`~.base.ChainEngine.step_members`, batched runs); ``adjoint``: it will
    use :meth:`~.base.ChainEngine.adjoint`;
    ``differentiable``: the process tensors the caller will pass to
    :meth:`~.base.ChainEngine.differentiable`. Either is refused here, with a
    ``ValueError`` naming the engine, if its capabilities do not cover it.
    """
    options = resolve(options)
    engine: ChainEngine
    if "chain" in _IN_PLACE:
        engine = _IN_PLACE["chain"](options)
    elif np.backend_name == "jax":
        from .jax.engine import JaxChainEngine

        engine = JaxChainEngine(options)
    else:
        engine = EagerChainEngine(options)
    declared: ChainCapabilities = _capabilities(engine, "chain", ChainCapabilities)
    if batch and not declared.batch:
        raise _refuse(
            engine, "chain", "a member axis (batched runs)", "use the NumPy or JAX backend's"
        )
    if adjoint and not declared.adjoint:
        raise _refuse(
            engine, "chain", "the adjoint method", "use the NumPy or JAX backend's chain engine"
        )
    if differentiable is not None:
        if not declared.differentiable:
            raise _refuse(
                engine,
                "chain",
                "automatic differentiation",
                "it needs the JAX backend (nonmarkov.backends.set_backend('jax')); on NumPy "
                "use the adjoint method, state_gradient",
            )
        if not declared.differentiable_files and not all(map(in_memory, differentiable)):
            raise _refuse(
                engine,
                "chain",
                "automatic differentiation of a file-backed process tensor",
                "it streams its steps; load it whole first",
            )
    return engine


def tebd_engine(spec: TebdSpec, options: EngineOptions | None = None) -> TebdEngine:
    """The TEBD engine (chain MPS with augmented legs) for ``spec`` on the active backend."""
    options = resolve(options)
    engine: TebdEngine
    if "tebd" in _IN_PLACE:
        engine = _IN_PLACE["tebd"](spec, options)
    elif np.backend_name == "jax":
        from .jax.tebd import jax_tebd_engine

        engine = jax_tebd_engine(spec, options)
    else:
        engine = EagerTebdEngine(spec, options)
    declared: TebdCapabilities = _capabilities(engine, "tebd", TebdCapabilities)
    if spec.max_rank is not None and not declared.max_rank:
        raise _refuse(engine, "tebd", "max_rank", "use the NumPy backend's TEBD engine")
    return engine
