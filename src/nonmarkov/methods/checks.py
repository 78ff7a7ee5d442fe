"""Checks shared by the algorithms: model objects, parameters, intervals, target files.

Each raises a ``TypeError``/``ValueError`` naming the argument and what is
allowed, before any computation starts.
"""

from __future__ import annotations

import math
import os
import tempfile
import uuid
import warnings
from typing import Any

import numpy

from .. import validation
from ..cost import affordable_run, physical_memory
from ..model.bath import Bath
from ..model.parameterized import ParameterizedSystem
from ..model.parameters import TempoParameters, check_bath_interval
from ..model.system import BaseSystem, System, TimeDependentSystemWithField


def system_without_field(system: Any, parameterized: bool = False) -> None:
    """Raise unless ``system`` is a System or TimeDependentSystem (a ParameterizedSystem
    where ``parameterized``)."""
    if isinstance(system, ParameterizedSystem) and not parameterized:
        raise TypeError(
            "a ParameterizedSystem needs its parameters: use compute_gradient_and_dynamics "
            "or state_gradient, or give compute_dynamics a TimeDependentSystem"
        )
    if isinstance(system, TimeDependentSystemWithField):
        raise TypeError(
            "a TimeDependentSystemWithField needs its field: use MeanFieldTempo or "
            "compute_dynamics_with_field with a MeanFieldSystem"
        )
    if not isinstance(system, BaseSystem):
        raise TypeError(
            f"system must be a System or TimeDependentSystem; got {type(system).__name__}"
        )


def model(system: Any, bath: Any) -> None:
    """Raise unless ``system`` and ``bath`` are of the right types and dimensions."""
    system_without_field(system)
    if not isinstance(bath, Bath):
        raise TypeError(f"bath must be a Bath; got {type(bath).__name__}")
    if system.dimension != bath.dimension:
        raise ValueError(
            f"the system has dimension {system.dimension} but the bath's coupling "
            f"operator has dimension {bath.dimension}"
        )


def tempo_parameters(parameters: Any) -> TempoParameters:
    """Raise unless ``parameters`` is a ``TempoParameters``."""
    if not isinstance(parameters, TempoParameters):
        raise TypeError(f"parameters must be TempoParameters; got {type(parameters).__name__}")
    return parameters


def memory_parameters(parameters: Any) -> tuple[TempoParameters, int]:
    """``parameters`` as TempoParameters with a memory cut, and the cut (dkmax), else a
    clear error."""
    parameters = tempo_parameters(parameters)
    if parameters.dkmax is None:
        raise ValueError(
            "a uniform process tensor needs a memory cut: give TempoParameters "
            "with tcut or dkmax (full memory has no repeating tensor)"
        )
    return parameters, parameters.dkmax


def backend_config(value: Any, function: str) -> None:
    """Accept OQuPy's ``backend_config`` and ignore it.

    OQuPy configured its tensor-network backend with this dict; here the
    engine is chosen by the numerical backend (``nonmarkov.backends``) and
    tuned with ``options=`` (:class:`~nonmarkov.EngineOptions`). None or an
    empty dict (OQuPy's default) is accepted silently, any other dict with a
    ``UserWarning`` that it is ignored; anything else is a TypeError.
    """
    if value is None:
        return
    if not isinstance(value, dict):
        raise TypeError(
            "backend_config must be None or a dict (OQuPy's backend configuration, "
            f"ignored here); got {type(value).__name__}. Tune the engine "
            "with options=EngineOptions(...)"
        )
    if value:
        warnings.warn(
            f"{function}: backend_config {value!r} is ignored; nonmarkov "
            "chooses its engine from the numerical backend (nonmarkov.backends) and "
            "takes its settings as options=EngineOptions(...)",
            UserWarning,
            stacklevel=3,
        )


def flat_truncation(options: Any, construction: str) -> None:
    """Refuse ``truncation_weights`` for a construction that truncates in the flat
    norm only (the weighting is done by sequential PT-TEMPO's window)."""
    from ..options import resolve

    if resolve(options).truncation_weights is not None:
        raise ValueError(
            f"the truncation_weights option applies to sequential PT-TEMPO only, not to "
            f"the {construction} construction; use method='sequential' (PtTempo) or "
            "truncation_weights=None"
        )


def correlation_time(parameters: TempoParameters, construction: str | None = None) -> None:
    """Raise where ``parameters.add_correlation_time`` cannot be honoured: a memory
    cut of one step (the lumped coupling needs the oldest point to be a window
    site), or a ``construction`` that assumes couplings depending on the lag only
    (the lumped coupling of a finite past depends on the time)."""
    if not parameters.add_correlation_time or parameters.dkmax is None:
        return
    if parameters.dkmax < 2:
        raise ValueError(
            "add_correlation_time needs a memory cut of at least two steps (dkmax >= 2); "
            f"got dkmax={parameters.dkmax}"
        )
    if construction is not None:
        raise ValueError(
            f"add_correlation_time is not supported by the {construction} construction "
            "(its couplings depend on the lag only): use method='sequential', or "
            "add_correlation_time=None"
        )


#: dt times a frequency of the model above this is warned: the discretisation error
#: (the splitting of system and bath, the sampling of the bath) then dominates
DISCRETISATION_WARNING = 10.0


def discretisation(dt: float, method: str, system: Any = None, bath: Any = None) -> None:
    """Warn where dt times the largest system frequency (the spread of the eigenvalues
    of a time-independent Hamiltonian) or times the bath's cutoff frequency is far
    above 1 (:data:`DISCRETISATION_WARNING`): the result is then mostly discretisation
    error. Nothing is refused: the user may know better."""
    found = []
    if isinstance(system, System):
        energies = numpy.linalg.eigvalsh(system.hamiltonian)
        spread = float(energies[-1] - energies[0])
        if dt * spread > DISCRETISATION_WARNING:
            found.append(f"dt x the system's largest frequency = {dt:g} x {spread:.3g}")
    cutoff = getattr(getattr(bath, "correlations", None), "cutoff", None)
    if isinstance(cutoff, (int, float)) and math.isfinite(cutoff):
        if dt * cutoff > DISCRETISATION_WARNING:
            found.append(f"dt x the bath's cutoff = {dt:g} x {cutoff:g}")
    if found:
        warnings.warn(
            f"{method}: {' and '.join(found)} is far above 1: the discretisation error "
            f"dominates the result; use a dt below about 1 / frequency",
            UserWarning,
            stacklevel=3,
        )


#: an epsrel below this truncates almost nothing (double-precision rounding is ~1e-16)
TIGHT_EPSREL = 1e-10


def tight_epsrel(epsrel: float, d2: int, memory: int, method: str) -> None:
    """Warn, with the estimate, where ``epsrel`` is so small that the memory window of
    ``memory`` points may grow towards its exact bond dimension (d^2)^(memory / 2)
    and that window would not fit in half the memory: the run will be slow and stop
    (:func:`window_fits`) when the window outgrows the memory."""
    if epsrel >= TIGHT_EPSREL or memory < 2:
        return
    half = memory // 2
    exponent = half * math.log10(d2)
    size_log = math.log10(memory * d2 * 16) + 2 * exponent
    budget = physical_memory() // 2
    if size_log <= math.log10(budget):
        return
    warnings.warn(
        f"{method}: epsrel={epsrel:g} truncates almost nothing: the memory window of "
        f"{memory} points may grow towards bond dimension {d2}^{half} (about 1e{exponent:.0f}), "
        f"about 1e{size_log - 30 * math.log10(2):.0f} GiB against "
        f"{budget / 2**30:.3g} GiB at hand, before truncation helps: expect slow steps and "
        "a stop when the window outgrows the memory; epsrel 1e-7 to 1e-5 is usual",
        UserWarning,
        stacklevel=3,
    )


def pt_interval(
    bath: Any, start_time: Any, end_time: Any, dt: float, memory: int | None = None
) -> tuple[float, float, int]:
    """Check a process tensor's bath and interval (and that a window of ``memory``
    points, None: the whole interval, can be held); (start, end, number of steps)."""
    start_time, end_time = check_bath_interval(bath, start_time, end_time)
    num_steps = int(round((end_time - start_time) / dt))
    window = num_steps if memory is None else min(memory, num_steps)
    discretisation(dt, "the process tensor", bath=bath)
    affordable_run(
        num_steps, bath.dimension, 0, "a process tensor", window, cause=f"end_time={end_time:g}"
    )
    if num_steps < 1:
        raise ValueError(
            f"end_time - start_time ({end_time - start_time}) is shorter than "
            f"half a time step dt={dt}"
        )
    return start_time, end_time, num_steps


def process_tensor_file(process_tensor_file: Any, overwrite: bool) -> str | None:
    """None, or the checked target filename (True: an automatic name)."""
    overwrite = validation.boolean(overwrite, "overwrite")
    if process_tensor_file is None or process_tensor_file is False:
        return None
    if process_tensor_file is True:
        return os.path.join(tempfile.gettempdir(), f"pt_{uuid.uuid4().hex[:12]}.hdf5")
    if not isinstance(process_tensor_file, (str, os.PathLike)) or not os.fspath(
        process_tensor_file
    ):
        raise TypeError(
            f"process_tensor_file must be None, True or a filename; got {process_tensor_file!r}"
        )
    filename = os.fspath(process_tensor_file)
    directory = os.path.dirname(os.path.abspath(filename))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"process_tensor_file {filename!r}: directory {directory!r} does not exist"
        )
    if os.path.exists(filename) and not overwrite:
        raise FileExistsError(
            f"process_tensor_file {filename!r} exists; pass overwrite=True to replace it"
        )
    return filename


#: a state whose trace is further than this from 1 gets a warning (once per call)
TRACE_WARNING_TOLERANCE = 0.1


def finite_states(
    states: Any,
    first_step: int,
    start_time: float,
    dt: float,
    method: str,
    trace: bool = True,
    initial: Any = None,
) -> None:
    """Raise if a computed state (n, d, d) is not finite, naming its step and time and
    the likely causes; if ``trace``, warn when a trace drifts from the initial trace by
    more than ``TRACE_WARNING_TOLERANCE`` times the initial operator's trace norm (a
    trace-preserving run keeps it to epsrel; controls need not preserve it).
    ``initial``: the (d, d) operator the run started from (None: a density matrix,
    trace 1)."""
    array = numpy.asarray(states)
    if array.size == 0:
        return
    flat = array.reshape(array.shape[0], -1)
    bad = ~numpy.all(numpy.isfinite(flat), axis=1)
    if numpy.any(bad):
        k = first_step + int(numpy.argmax(bad))
        raise ValueError(
            f"{method} broke down at step {k} (t = {start_time + k * dt:g}): the state has "
            "NaN or infinite entries. Likely causes: a time step too large for the bath's "
            "cutoff, an epsrel too loose, or a coupling too strong for the memory cut"
        )
    if not trace:
        return
    traces = numpy.trace(array, axis1=1, axis2=2)
    reference, scale = initial_trace(initial)
    drift = numpy.abs(traces - reference)
    if numpy.any(drift > TRACE_WARNING_TOLERANCE * scale):
        k = first_step + int(numpy.argmax(drift > TRACE_WARNING_TOLERANCE * scale))
        warnings.warn(
            f"{method}: the trace of the state at step {k} (t = {start_time + k * dt:g}) is "
            f"{complex(traces[k - first_step]):.6g}, the initial trace "
            f"{complex(reference):.6g}; the result is suspicious (epsrel too "
            "loose, dt too large, or Lindblad terms / controls that do not preserve the trace)",
            UserWarning,
            stacklevel=3,
        )


def initial_trace(initial: Any) -> tuple[complex, float]:
    """(trace, trace norm) of the (d, d) operator a run started from; (1, 1) for None
    (a density matrix). The trace norm (sum of singular values) bounds |trace| and is
    1 for a density matrix, so it scales the drift tolerance of any operator, a
    traceless one included (a zero operator: 1)."""
    if initial is None:
        return 1.0, 1.0
    matrix = numpy.asarray(initial)
    norm = float(numpy.sum(numpy.linalg.svd(matrix, compute_uv=False)))
    return complex(numpy.trace(matrix)), norm if norm > 0 else 1.0


def window_fits(bond: int, classes: int, points: int, step: int, dt: float, method: str) -> None:
    """Stop a run whose memory window (``points`` sites of bond ``bond`` and ``classes``
    classes, complex128) outgrows half the physical memory, naming the step; a looser
    epsrel or a shorter memory cut are the ways on."""
    size = points * bond * bond * classes * 16
    budget = physical_memory() // 2
    if size > budget:
        raise ValueError(
            f"{method}: at step {step} (t = {step * dt:g} after the start) the memory window "
            f"holds {points} points of bond dimension {bond}, about {size / 2**30:.3g} GiB, "
            f"more than half of this machine's memory ({budget / 2**30:.3g} GiB); use a "
            "looser epsrel or a shorter memory cut"
        )
