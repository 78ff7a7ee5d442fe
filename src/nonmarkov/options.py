"""Engine options: the tuning choices of the engines, in one immutable object.

The results do not depend on them beyond rounding, except ``window_sweep``
(the two truncation sweeps of a window step agree within the truncation
tolerance, not to rounding) and ``truncation_weights`` (the norm PT-TEMPO
truncates in; docs/truncation_weights.md); the others choose how the JAX engine pads,
factorises, schedules and compiles. Pass one to an algorithm
(``options=EngineOptions(...)``) or set the library default once:

    nonmarkov.set_default_options(host_start=False)
    with nonmarkov.options.use_options(sitewise="off"): ...

The defaults of ``svd``, ``sitewise``, ``site_levels``, ``host_start`` and
``device`` come from the environment variables ``NONMARKOV_JAX_SVD``,
``NONMARKOV_JAX_SITEWISE``, ``NONMARKOV_JAX_SITE_LEVELS``,
``NONMARKOV_JAX_HOST_START`` and ``NONMARKOV_JAX_DEVICE``, read once at import
(:mod:`nonmarkov.config`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
from collections.abc import Iterator
from typing import Any

from . import config

_CHOICE = ("auto", "on", "off")
WINDOW_SWEEPS = ("auto", "zip_up", "exact")


@dataclasses.dataclass(frozen=True)
class EngineOptions:
    """How the engines run (the NumPy engine ignores the JAX-only fields).

    Parameters
    ----------
    window_sweep : how a window step couples the new point and truncates
        (:mod:`nonmarkov.kernels.window`): ``'zip_up'`` (cut while coupling,
        from the oldest site, then an exact cut of that state; bonds never grow
        by the carrier's num_rows), ``'exact'`` (couple without truncation, then
        the optimal cut of the exact product), or ``'auto'``: ``'zip_up'``. Both
        backends run the same sweep and agree to rounding.
    compiled : whether the JAX window engine runs the zip-up steps compiled:
        ``'auto'`` (where the steps left repay the compilation and the compiled
        step is the host's algorithm; :mod:`nonmarkov.engines.jax.planner`),
        ``'on'`` (wherever it is the host's algorithm) or ``'off'`` (the NumPy
        kernels on the host).
    svd : the SVD algorithm of the compiled steps: ``'default'`` (JAX's choice
        for the device), ``'qr'`` or ``'divide_and_conquer'``.
    sitewise : ``'auto'``, ``'on'`` or ``'off'``: from bond bucket 64 on, run
        the compiled steps site by site, each site padded to its own bucket
        (``'auto'``: on CPUs, where it was measured to pay).
    site_levels : ``'auto'``, ``'on'`` or ``'off'``: let the whole-step kernel
        of a large bucket also work on each site at a few smaller sizes, the
        smallest that holds the site (``'auto'``: on CPUs).
    host_start : run the first steps of a window with a memory cut on the host
        with NumPy while the step kernel compiles in the background.
    initial_bond : the first bond bucket of a compiled window (a smaller bond
        is padded up to it).
    chunk : the most compiled steps between two fetches of their results.
    device : where the JAX engines run: ``'auto'`` (by the size of the problem:
        small windows and chains on the host CPU, large ones on the accelerator
        when there is one; :mod:`nonmarkov.engines.jax.placement`), ``'host'``
        (always the host CPU) or ``'accelerator'`` (always the GPU/TPU; an error
        where there is none).
    deterministic : replace every choice that depends on measured time (how
        many host steps run while the kernel compiles, how long a chunk is,
        whether a bucket shrinks) by a fixed rule, so that a run repeats bit for
        bit (:mod:`nonmarkov.engines.jax.scheduling`).
    truncation_weights : the norm PT-TEMPO's window is truncated in
        (docs/truncation_weights.md): None (the flat norm, the default), a
        number w > 0 (the population classes, s+ = s-, weighted by w, the
        coherence classes by 1), or one positive number per class of the
        process tensor (m values, in the order of its ``classes``). A point is
        weighted when it enters the window and unweighted when it is split off,
        so the process tensor is the same up to the truncation. Sequential
        PT-TEMPO only (:class:`~nonmarkov.PtTempo`, ``pt_tempo_compute``'s
        ``method='sequential'``; the other constructions refuse it, TEMPO and
        the other window algorithms ignore it).
    """

    window_sweep: str = "auto"
    compiled: str = "auto"
    svd: str = config.JAX_SVD
    sitewise: str = config.JAX_SITEWISE
    site_levels: str = config.JAX_SITE_LEVELS
    host_start: bool = config.JAX_HOST_START == "on"
    initial_bond: int = 10
    chunk: int = 16
    device: str = config.JAX_DEVICE
    deterministic: bool = False
    truncation_weights: float | tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "truncation_weights", check_truncation_weights(self.truncation_weights)
        )
        object.__setattr__(
            self, "svd", config.check_choice(self.svd, config.VALID_JAX_SVD, "svd option")
        )
        object.__setattr__(
            self,
            "window_sweep",
            config.check_choice(self.window_sweep, WINDOW_SWEEPS, "window_sweep option"),
        )
        object.__setattr__(
            self,
            "device",
            config.check_choice(self.device, config.VALID_JAX_DEVICES, "device option"),
        )
        for name in ("sitewise", "site_levels", "compiled"):
            object.__setattr__(
                self, name, config.check_choice(getattr(self, name), _CHOICE, f"{name} option")
            )
        for name in ("host_start", "deterministic"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(
                    f"the {name} option must be True or False; got {getattr(self, name)!r}"
                )
        for name, least in (("initial_bond", 1), ("chunk", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"the {name} option must be an integer >= {least}; got {value!r}")

    def replace(self, **changes: Any) -> EngineOptions:
        """A copy with ``changes`` (field names as above)."""
        unknown = set(changes) - {field.name for field in dataclasses.fields(self)}
        if unknown:
            raise TypeError(
                f"unknown engine options {sorted(unknown)}; valid are "
                f"{[field.name for field in dataclasses.fields(self)]}"
            )
        return dataclasses.replace(self, **changes)


def check_truncation_weights(value: Any) -> float | tuple[float, ...] | None:
    """The ``truncation_weights`` option checked: None, a finite number > 0, or a
    non-empty sequence of them (returned as a tuple of floats)."""
    allowed = (
        "None (flat), a finite number > 0 (the weight of the population classes) or a "
        "sequence of finite numbers > 0 (one per class)"
    )

    def positive(item: Any) -> float | None:
        if isinstance(item, bool) or not isinstance(item, numbers.Real):
            return None
        item = float(item)
        return item if math.isfinite(item) and item > 0.0 else None

    if value is None:
        return None
    if isinstance(value, str | bytes):
        raise ValueError(f"the truncation_weights option must be {allowed}; got {value!r}")
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = positive(value)
        if number is None:
            raise ValueError(f"the truncation_weights option must be {allowed}; got {value!r}")
        return number
    try:
        items = list(value)
    except TypeError:
        raise ValueError(
            f"the truncation_weights option must be {allowed}; got {value!r}"
        ) from None
    weights = [positive(item) for item in items]
    if not weights or any(weight is None for weight in weights):
        raise ValueError(f"the truncation_weights option must be {allowed}; got {value!r}")
    return tuple(float(weight) for weight in weights)  # type: ignore[arg-type]


_default = EngineOptions()


def default_options() -> EngineOptions:
    """The library default, used where an algorithm gets ``options=None``."""
    return _default


def set_default_options(options: EngineOptions | None = None, **changes: Any) -> EngineOptions:
    """Set the library default: ``options`` (default: the current default) with
    ``changes``; returns the previous default."""
    global _default
    if options is not None and not isinstance(options, EngineOptions):
        raise TypeError(f"options must be EngineOptions; got {type(options).__name__}")
    previous = _default
    _default = (previous if options is None else options).replace(**changes)
    return previous


@contextlib.contextmanager
def use_options(options: EngineOptions | None = None, **changes: Any) -> Iterator[EngineOptions]:
    """Set the library default for a ``with`` block (as :func:`set_default_options`)."""
    previous = set_default_options(options, **changes)
    try:
        yield _default
    finally:
        set_default_options(previous)


def resolve(options: EngineOptions | None) -> EngineOptions:
    """``options`` checked, or the library default for None."""
    if options is None:
        return _default
    if not isinstance(options, EngineOptions):
        raise TypeError(f"options must be EngineOptions or None; got {type(options).__name__}")
    return options
