"""``pt_tempo_compute``: the process tensor of a bath by any construction method.

The one place that chooses among the constructions (``method=``); the
constructions themselves do not know of each other.
"""

from __future__ import annotations

import os

from .. import validation
from ..model.bath import Bath
from ..model.parameters import TempoParameters, guess_tempo_parameters
from ..options import EngineOptions
from ..process_tensors.base import BaseProcessTensor
from ..process_tensors.file import FileProcessTensor
from . import checks
from .pt_divide import pt_divide_and_conquer_compute
from .pt_repeated import pt_repeated_block_compute
from .pt_tempo import PtTempo

PT_METHODS = ("sequential", "repeated_block", "divide_and_conquer")


def pt_tempo_compute(
    bath: Bath,
    start_time: float,
    end_time: float,
    parameters: TempoParameters | None = None,
    unique: bool = False,
    tolerance: float | None = None,
    process_tensor_file: str | os.PathLike | bool | None = None,
    overwrite: bool = False,
    backend_config: dict | None = None,
    progress_type: str | None = None,
    name: str | None = None,
    description: str | None = None,
    *,
    method: str = "sequential",
    options: EngineOptions | None = None,
    resume: bool = False,
) -> BaseProcessTensor:
    """One-call PT-TEMPO: the process tensor of ``bath`` on [start_time, end_time].

    The positional order is OQuPy's: ``bath, start_time, end_time,
    parameters, unique, tolerance, process_tensor_file, overwrite,
    backend_config, progress_type, name, description``; ``method`` and
    ``options`` are keywords only.

    If ``parameters`` is None they are guessed (``tolerance`` as given; None:
    the default of :func:`~nonmarkov.guess_tempo_parameters`).
    ``process_tensor_file`` and ``overwrite`` as for :class:`PtTempo`.
    ``backend_config``: accepted for OQuPy scripts and ignored (a non-empty
    dict with a warning; see :func:`nonmarkov.methods.checks.backend_config`).
    ``method`` chooses the construction of the same kind of process tensor
    (docs/long_time.md): ``'sequential'`` is PT-TEMPO step by step;
    ``'divide_and_conquer'`` combines blocks of doubling length
    (:func:`~nonmarkov.pt_divide_and_conquer_compute`, stationary bath, with
    or without memory cut); ``'repeated_block'`` repeats one block of a
    stationary bath with a memory cut
    (:func:`~nonmarkov.pt_repeated_block_compute`: 2K window steps instead of N).
    ``options``: the engine options of the window steps (sequential and
    repeated block; divide and conquer runs on the host); ``truncation_weights``
    (docs/truncation_weights.md) only with ``method='sequential'``.
    ``resume``: continue an interrupted streamed sequential build from its
    checkpoint (:class:`PtTempo`; docs/process_tensor_files.md).
    """
    checks.backend_config(backend_config, "pt_tempo_compute")
    method = validation.choice(method, PT_METHODS, "method")
    if parameters is None:
        parameters = guess_tempo_parameters(bath, start_time, end_time, tolerance=tolerance)
    if method != "sequential":
        if resume is not False:
            raise ValueError("resume applies to the sequential construction only")
        checks.flat_truncation(options, method.replace("_", "-"))
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be True or False; got {overwrite!r}")
        target = checks.process_tensor_file(process_tensor_file, overwrite)  # before the work
        # the constructions of a stationary bath: one call (divide and conquer runs on
        # the host and takes no engine options)
        construction, engine = (
            (pt_repeated_block_compute, {"options": options})
            if method == "repeated_block"
            else (pt_divide_and_conquer_compute, {})
        )
        pt = construction(
            bath,
            start_time,
            end_time,
            parameters,
            unique=unique,
            progress_type=progress_type,
            name=name,
            description=description,
            **engine,
        )
        if target is None:
            return pt
        pt.export(target, overwrite=overwrite)
        return FileProcessTensor("read", target)
    pt_tempo = PtTempo(
        bath,
        start_time,
        end_time,
        parameters,
        unique=unique,
        process_tensor_file=process_tensor_file,
        overwrite=overwrite,
        name=name,
        description=description,
        options=options,
        resume=resume,
    )
    return pt_tempo.get_process_tensor(progress_type=progress_type)
