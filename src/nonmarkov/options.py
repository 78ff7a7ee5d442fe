"""Engine options: the tuning choices of the engines, in one immutable object.

The results do not depend on them beyond rounding, except ``window_sweep``
(the two truncation sweeps of a window step agree within the truncation
tolerance, not to rounding), ``truncation_weights`` (the norm PT-TEMPO
truncates in; docs/truncation_weights.md) and ``trace_weight`` (the norm TEMPO's
window is truncated in; docs/trace_weight.md); the others choose how the JAX engine pads,
factorises, schedules and compiles. Pass one to an algorithm
(``options=EngineOptions(...)``) or set the library default once:

    nonmarkov.set_default_options(compiled="off")
    with nonmarkov.options.use_options(device="host"): ...

The defaults of ``svd`` and ``device`` come from the environment variables
``NONMARKOV_JAX_SVD`` and ``NONMARKOV_JAX_DEVICE``, read once at import
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

#: the default ``trace_weight`` (docs/trace_weight.md: 3-30 measured best on every model)
TRACE_WEIGHT = 10.0
#: the values of the ``compiled`` option: as the planner decides, always, never
COMPILED_CHOICES = ("auto", "on", "off")
#: the values of the ``window_sweep`` option
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
        backends run the same sweep and agree to rounding (on JAX the exact sweep,
        and a window with exponential tail modes, run with the NumPy kernels on the
        host).
    compiled : whether the JAX window engine runs the zip-up steps compiled:
        ``'auto'`` (where the steps left repay the compilation and the compiled
        step is the host's algorithm; :mod:`nonmarkov.engines.jax.planner`),
        ``'on'`` (wherever it is the host's algorithm) or ``'off'`` (the NumPy
        kernels on the host).
    svd : the SVD algorithm of the compiled steps: ``'default'`` (JAX's choice
        for the device), ``'qr'`` or ``'divide_and_conquer'``.
    chunk : the most compiled steps between two fetches of their results.
    device : where the JAX engines run: ``'auto'`` (by the size of the problem:
        small windows and chains on the host CPU, large ones on the accelerator
        when there is one; :mod:`nonmarkov.engines.jax.placement`), ``'host'``
        (always the host CPU) or ``'accelerator'`` (always the GPU/TPU; an error
        where there is none).
    deterministic : replace every choice that depends on measured time
        (whether a compilation pays, how long a chunk is) by a fixed model, and
        wait for a compilation rather than run host steps meanwhile, so that a
        run repeats bit for bit (:mod:`nonmarkov.engines.jax.planner`).
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
    trace_weight : the norm a traced window (TEMPO, MeanFieldTempo) is truncated
        in (docs/trace_weight.md): a finite number w > 0, the weight of a site's
        class sum (the direction along which a point is read once it is older
        than the newest) against the directions orthogonal to it. 1 is the flat
        norm (the cuts of OQuPy); the default, 10, cuts more of what the
        read-out hardly sees and less of what it sees: at the same epsrel
        10-1000 times smaller truncation errors, at smaller bonds.
    """

    window_sweep: str = "auto"
    compiled: str = "auto"
    svd: str = config.JAX_SVD
    chunk: int = 16
    device: str = config.JAX_DEVICE
    deterministic: bool = False
    truncation_weights: float | tuple[float, ...] | None = None
    trace_weight: float = TRACE_WEIGHT

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "trace_weight", check_trace_weight(self.trace_weight, "the trace_weight option")
        )
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
        object.__setattr__(
            self,
            "compiled",
            config.check_choice(self.compiled, COMPILED_CHOICES, "compiled option"),
        )
        if not isinstance(self.deterministic, bool):
            raise TypeError(
                f"the deterministic option must be True or False; got {self.deterministic!r}"
            )
        if isinstance(self.chunk, bool) or not isinstance(self.chunk, int) or self.chunk < 1:
            raise ValueError(f"the chunk option must be an integer >= 1; got {self.chunk!r}")

    def replace(self, **changes: Any) -> EngineOptions:
        """A copy with ``changes`` (field names as above)."""
        unknown = set(changes) - {field.name for field in dataclasses.fields(self)}
        if unknown:
            raise TypeError(
                f"unknown engine options {sorted(unknown)}; valid are "
                f"{[field.name for field in dataclasses.fields(self)]}"
            )
        return dataclasses.replace(self, **changes)


def check_trace_weight(value: Any, name: str = "trace_weight") -> float:
    """A trace weight checked (a finite real number > 0, not a bool), as a float;
    ``name`` says what it is in the error."""
    number = float(value) if isinstance(value, numbers.Real) else math.nan
    if isinstance(value, bool) or not (math.isfinite(number) and number > 0.0):
        raise ValueError(f"{name} must be a finite number > 0 (1: the flat norm); got {value!r}")
    return number


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
