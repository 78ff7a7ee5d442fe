"""PT-TEMPO: the process tensor of a Gaussian bath, independent of the system.

The same memory-window MPS as TEMPO, without system propagators; instead of
being traced out, a point whose memory has ended is split off as the process
tensor's step tensor (Joergensen & Pollock, PRL 123, 240602 (2019); Fux et
al., PRL 126, 200401 (2021)). Finalised tensors are right-orthonormal, so
every truncation is measured against an orthonormal environment on the side
of the past.

The running norm is kept as a logarithm L. Each step tensor receives a share
of it when it is finalised (so that it can be written to a file at once and
never rewritten): tensor j, finalised after s normalisations, gets
L_s (j + 1) / s minus what earlier tensors got, i.e. about the mean log-norm
per step; the tensors still in the window at the end share the rest evenly.
The shares add up to L, so the process tensor is exact whatever the split.
With ``process_tensor_file`` the step tensors are streamed to an HDF5 file as
they are finalised, and the whole process tensor is never held in memory.

The window is advanced by a window engine (:mod:`nonmarkov.engines`) in
``'finalize'`` mode; the finalised sites and their log-scales go to the same
sink on every backend, so files and norm shares do not depend on it.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as default_np

from .. import validation
from .._threads import hot_loop_threads
from ..engines import window_engine
from ..engines.base import WindowSpec
from ..influence import DiscretisedInfluence
from ..model.bath import Bath
from ..model.parameters import TempoParameters
from ..options import EngineOptions, resolve
from ..process_tensors.base import BaseProcessTensor, SimpleProcessTensor
from ..process_tensors.file import FileProcessTensor
from ..progress import Progress, check_progress_type
from . import checks as check
from .metadata import process_tensor_metadata


class PtTempo:
    """Builds the process tensor of ``bath`` from ``start_time`` to ``end_time``.

    Parameters
    ----------
    bath : the Bath.
    start_time, end_time : the PT covers round((end - start) / dt) steps.
    parameters : TempoParameters.
    unique : merge Liouville indices with equal coupling eigenvalue pairs.
    process_tensor_file : None/False (keep the process tensor in memory), a
        filename, or True (an automatic name ``pt_<random>.hdf5`` in the
        temporary directory): stream the step tensors to that HDF5 file while
        they are computed; ``get_process_tensor`` then returns a
        :class:`~nonmarkov.FileProcessTensor`. The file appears only when the
        computation is complete.
    overwrite : allow ``process_tensor_file`` to replace an existing file.
    backend_config : accepted for OQuPy scripts and ignored (a ``UserWarning``
        unless None or empty): the engines take ``options``.
    name, description : optional text.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).
    """

    def __init__(
        self,
        bath: Bath,
        start_time: float,
        end_time: float,
        parameters: TempoParameters,
        unique: bool = False,
        process_tensor_file: str | os.PathLike | bool | None = None,
        overwrite: bool = False,
        backend_config: dict | None = None,
        name: str | None = None,
        description: str | None = None,
        options: EngineOptions | None = None,
    ):
        check.backend_config(backend_config, "PtTempo")
        self._options = resolve(options)
        self._parameters = check.tempo_parameters(parameters)
        check.correlation_time(self._parameters)
        self._start_time, self._end_time, self._num_steps = check.pt_interval(
            bath, start_time, end_time, self._parameters.dt, self._parameters.dkmax
        )
        self.bath = bath
        self.unique = validation.boolean(unique, "unique")
        self.name = "Unnamed PtTempo" if name is None else str(name)
        self.description = "" if description is None else str(description)
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be True or False; got {overwrite!r}")
        self._overwrite = overwrite
        self._file = check.process_tensor_file(process_tensor_file, overwrite)
        self._influence = DiscretisedInfluence.from_parameters(bath, parameters, unique)
        self._process_tensor: BaseProcessTensor | None = None
        self._max_bond_dimension = 1
        self._engine: Any = None

    @property
    def process_tensor_file(self) -> str | None:
        """Filename the process tensor is streamed to, or None (in memory)."""
        return self._file

    @property
    def metadata(self) -> dict:
        """JSON-serialisable description of the bath and parameters (stored in files)."""
        return process_tensor_metadata(
            "PtTempo",
            self.bath,
            self._parameters,
            self._start_time,
            self._end_time,
            self._num_steps,
            self.unique,
        )

    @property
    def dimension(self) -> int:
        """Hilbert-space dimension d of the system the bath couples to."""
        return self.bath.dimension

    @property
    def num_steps(self) -> int:
        """Number of steps of the process tensor."""
        return self._num_steps

    @property
    def max_bond_dimension(self) -> int:
        """Largest bond dimension reached during the construction."""
        return self._max_bond_dimension

    @property
    def engine(self) -> Any:
        """The window engine that ran the steps (:mod:`nonmarkov.engines`), or None
        before :meth:`compute` (and for a single step)."""
        return self._engine

    def compute(self, progress_type: str | None = None) -> None:
        """Run PT-TEMPO (once; later calls do nothing)."""
        self.get_process_tensor(progress_type)

    def _build(self, progress_type: str) -> BaseProcessTensor:
        """Run PT-TEMPO into the target; the finished process tensor."""
        sink = _StepSink(self._open_target())
        try:
            self._run(sink, progress_type)
        except BaseException:
            sink.abort()
            raise
        return sink.close()

    def _open_target(self) -> SimpleProcessTensor | FileProcessTensor:
        """An empty process tensor (in memory, or a file being written) for the steps."""
        influence = self._influence
        to_eigen, from_eigen = influence.liouville_transforms()
        d, dt = self.bath.dimension, self._parameters.dt
        if self._file is None:
            return SimpleProcessTensor(
                d,
                dt,
                to_eigen,
                from_eigen,
                self.name,
                self.description,
                classes=influence.classes,
                metadata=self.metadata,
            )
        return FileProcessTensor(
            "overwrite" if self._overwrite else "write",
            self._file,
            d,
            dt,
            to_eigen,
            from_eigen,
            self.name,
            self.description,
            classes=influence.classes,
            metadata=self.metadata,
        )

    def _run(self, sink: _StepSink, progress_type: str) -> None:
        """The PT-TEMPO loop; hands every finalised site to ``sink``."""
        influence = self._influence
        front, log_scale = first_point(influence)
        with hot_loop_threads(), Progress(self._num_steps, progress_type, "PT-TEMPO") as progress:
            progress.update()
            if self._num_steps == 1:
                sink.finish([front.reshape(1, -1, 1)], log_scale)
                return
            engine = window_engine(
                pt_window_spec(
                    influence, front, log_scale, self._parameters.epsrel, self._parameters.dkmax
                ),
                self._options,
            )
            self._engine = engine
            step = 1
            while step < self._num_steps:
                count = min(engine.steps_per_call, self._num_steps - step)
                finalised, ranks = engine.advance_finalize(count)
                for k, (done, log_before) in enumerate(finalised):
                    if done is not None:
                        sink.add(done, log_before, step + k)
                step += count
                self._max_bond_dimension = max([self._max_bond_dimension] + ranks)
                check.window_fits(
                    max(ranks, default=1),
                    influence.num_classes,
                    min(step, self._parameters.dkmax or step),
                    step,
                    self._parameters.dt,
                    "PT-TEMPO",
                )
                progress.set_postfix(bond=self._max_bond_dimension)
                progress.update(count)
            window, log_scale = engine.host_window()
        sink.finish(list(reversed(window)), log_scale)

    def get_process_tensor(self, progress_type: str | None = None) -> BaseProcessTensor:
        """The process tensor (computed first if needed).

        A :class:`~nonmarkov.SimpleProcessTensor`, or a
        :class:`~nonmarkov.FileProcessTensor` open for reading if
        ``process_tensor_file`` was given.
        """
        progress_type = check_progress_type(progress_type)
        if self._process_tensor is None:
            self._process_tensor = self._build(progress_type)
        return self._process_tensor


class _StepSink:
    """Scales finalised window sites and appends them as step tensors to ``target``.

    Site M[l, c, r] (l towards newer points) becomes T[r, l, c] times
    exp(share), with the shares of the running log-norm described in the
    module docstring.
    """

    def __init__(self, target: SimpleProcessTensor | FileProcessTensor):
        self.target = target
        self.assigned = 0.0

    def _write(self, site: Any, share: float) -> None:
        tensor = default_np.transpose(default_np.asarray(site), (2, 0, 1)) * math.exp(share)
        self.target.set(len(self.target), tensor)
        self.assigned += share

    def add(self, site: Any, log_scale: float, num_normalised: int) -> None:
        """A site finalised after ``num_normalised`` normalisations summing to ``log_scale``."""
        share = log_scale * (len(self.target) + 1) / num_normalised - self.assigned
        self._write(site, share)

    def finish(self, sites: list[Any], log_scale: float) -> None:
        """The sites left in the window (oldest first) share the rest of ``log_scale``."""
        share = (log_scale - self.assigned) / len(sites)
        for site in sites:
            self._write(site, share)

    def close(self) -> BaseProcessTensor:
        """The finished process tensor (a file is completed and reopened for reading)."""
        if isinstance(self.target, FileProcessTensor):
            self.target.close()
            return FileProcessTensor("read", self.target.filename)
        return self.target

    def abort(self) -> None:
        """Discard a file being written (nothing appears under its name)."""
        if isinstance(self.target, FileProcessTensor):
            self.target.abort()


def first_point(influence: DiscretisedInfluence) -> tuple[default_np.ndarray, float]:
    """The first point's own factor (m,), normalised, and the log of its norm."""
    own = default_np.asarray(influence.own_factor())
    norm = float(default_np.linalg.norm(own))
    if norm == 0.0:
        return own, 0.0
    return own / norm, math.log(norm)


def pt_window_spec(
    influence: DiscretisedInfluence, front: Any, log_scale: float, epsrel: float, memory: int | None
) -> WindowSpec:
    """PT-TEMPO's memory window holding the first point ``front`` (m,) (normalised,
    its log-scale ``log_scale``): a point's index is its class (projector and
    read-out map the identity), and the oldest point is split off (with the
    lumped coupling of an extra correlation time, if any)."""
    m = influence.num_classes
    own = default_np.asarray(influence.own_factor())
    carrier = default_np.asarray(influence.carrier_rows)
    return WindowSpec(
        front=front,
        log_scale=log_scale,
        projector=default_np.eye(m),
        first=influence.lag_matrix_rows(1)[carrier] * own[:, None],
        carrier=carrier,
        lag_rows=influence.lag_matrix_rows,
        out_map=default_np.eye(m),
        epsrel=epsrel,
        memory=memory,
        oldest="finalize",
        leaving_rows=(
            influence.leaving_rows if influence.lumps and memory == influence.last_lag else None
        ),
    )
