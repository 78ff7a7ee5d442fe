"""Process tensors of any length from one repeating block (stationary bath).

For a stationary bath with a memory cut of K steps the process tensor of N
steps consists of a start block of K steps (the bath has no past), one
tensor that repeats for every later step, and a cap at the end (Cygorek,
Keeling, Lovett & Gauger, PRX 14, 011010 (2024): with a memory cut the
PT-MPO is built from repeatable blocks, so the cost stops growing with N).
The block is computed once by :mod:`nonmarkov.methods.uniform` (2K memory-window
steps, then one Schmidt decomposition at the cut between the two halves) and
assembled into a :class:`~nonmarkov.SimpleProcessTensor` in exactly the
format of PT-TEMPO: the same classes, basis transforms and T[b, b', c]
convention, usable by :func:`~nonmarkov.compute_dynamics`.

Cost: independent of N for the tensors (about 2K window steps); the N step
tensors share one array on the host. For N <= 2K sequential PT-TEMPO is not
more expensive and is used instead (same format, same result).
"""

from __future__ import annotations

from ..model.bath import Bath
from ..model.parameters import TempoParameters
from ..options import EngineOptions
from ..process_tensors.base import BaseProcessTensor
from ..progress import check_progress_type
from . import checks
from .pt_tempo import PtTempo
from .uniform import pt_uniform_compute


def pt_repeated_block_compute(
    bath: Bath,
    start_time: float,
    end_time: float,
    parameters: TempoParameters,
    unique: bool = False,
    progress_type: str | None = None,
    name: str | None = None,
    description: str | None = None,
    options: EngineOptions | None = None,
) -> BaseProcessTensor:
    """The process tensor of ``bath`` on [start_time, end_time] from a repeating block.

    Parameters
    ----------
    bath : the Bath (its correlations must be stationary, as for every Bath).
    start_time, end_time : the PT covers round((end - start) / dt) steps.
    parameters : TempoParameters with a memory cut (tcut or dkmax).
    unique : merge Liouville indices with equal coupling eigenvalue pairs.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.
    name, description : optional text.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).

    Returns a :class:`SimpleProcessTensor` of round((end - start) / dt) steps.
    Agrees with sequential PT-TEMPO to rounding when untruncated; truncated,
    the error is set by ``epsrel`` like PT-TEMPO's (see docs/long_time.md).
    """
    parameters, memory = checks.memory_parameters(parameters)
    checks.correlation_time(parameters, "repeated-block")
    checks.flat_truncation(options, "repeated-block")
    start_time, end_time, num_steps = checks.pt_interval(bath, start_time, end_time, parameters.dt)
    progress_type = check_progress_type(progress_type)
    label = "Unnamed repeated-block PT" if name is None else str(name)
    if num_steps <= 2 * memory:
        sequential = PtTempo(
            bath,
            start_time,
            end_time,
            parameters,
            unique=unique,
            name=label,
            description=description,
            options=options,
        )
        return sequential.get_process_tensor(progress_type=progress_type)
    uniform = pt_uniform_compute(
        bath, parameters, unique, progress_type, label, description, options=options
    )
    return uniform.to_process_tensor(num_steps)
