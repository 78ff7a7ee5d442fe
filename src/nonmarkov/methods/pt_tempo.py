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

Weighted truncation (the ``truncation_weights`` engine option,
docs/truncation_weights.md): the couplings act elementwise on a site's class
index, so a point's class c can carry a weight w_c > 0 from the moment it
enters the window (its own factor and lag-1 coupling times w_c, in the
window's ``front`` and ``first``) until it leaves (the split-off site, or a
site left at the end, divided by w_c). Every truncation in between is then
made in the weighted norm, on any engine, and the weighting itself is undone
exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from typing import Any

import numpy as default_np

from .. import validation
from .._threads import hot_loop_threads
from ..engines import finalize_window_engine
from ..engines.base import FinalizeWindowEngine, WindowSpec
from ..influence import DiscretisedInfluence
from ..io.atomic import atomic_path
from ..kernels.tail import fit_geometric, tail_depth, tail_operators
from ..model.bath import Bath
from ..model.parameters import TempoParameters
from ..options import EngineOptions, resolve
from ..process_tensors.base import BaseProcessTensor, SimpleProcessTensor
from ..process_tensors.file import FileProcessTensor
from ..progress import Progress, check_progress_type, logger
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
    resume : continue an interrupted build of the same ``process_tensor_file``
        from its checkpoint (``<file>.checkpoint.npz``); the same process tensor
        as an uninterrupted build. Without a checkpoint the build starts afresh.
    checkpoint_interval : seconds between checkpoints of a streamed build (the
        memory window and its position, next to the file; the step tensors are
        written to the file at each checkpoint, and a checkpoint comes sooner
        when they would hold more than ``CHECKPOINT_BYTES`` of this module in
        memory), or
        None for none. A build that
        is killed or raises keeps its temporary file and checkpoint for ``resume``.
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
        *,
        resume: bool = False,
        checkpoint_interval: float | None = 60.0,
    ):
        check.backend_config(backend_config, "PtTempo")
        self._options = resolve(options)
        self._parameters = check.tempo_parameters(parameters)
        check.correlation_time(self._parameters)
        self._start_time, self._end_time, self._num_steps = check.pt_interval(
            bath, start_time, end_time, self._parameters.dt, self._parameters.dkmax
        )
        check.tight_epsrel(
            self._parameters.epsrel,
            bath.dimension**2,
            min(self._parameters.dkmax or self._num_steps, self._num_steps),
            "PtTempo",
        )
        self.bath = bath
        self.unique = validation.boolean(unique, "unique")
        self.name = "Unnamed PtTempo" if name is None else str(name)
        self.description = "" if description is None else str(description)
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be True or False; got {overwrite!r}")
        self._overwrite = overwrite
        self._file = check.process_tensor_file(process_tensor_file, overwrite)
        self._resume = validation.boolean(resume, "resume")
        if checkpoint_interval is not None:
            checkpoint_interval = validation.non_negative_number(
                checkpoint_interval, "checkpoint_interval"
            )
        # an automatic name cannot be found again: no checkpoints for it
        automatic = self._file is None or process_tensor_file is True
        self._checkpoint_interval = None if automatic else checkpoint_interval
        if self._resume and (process_tensor_file is True or self._checkpoint_interval is None):
            raise ValueError(
                "resume=True needs a named process_tensor_file and checkpoints "
                "(checkpoint_interval not None)"
            )
        self._influence = DiscretisedInfluence.from_parameters(bath, parameters, unique, tail=True)
        self._weights = class_weights(self._influence, self._options.truncation_weights)
        if self._weights is not None and self._parameters.exponential_tail:
            raise ValueError(
                "the truncation_weights option and exponential_tail do not go together; "
                "use one of them"
            )
        self._tail = exponential_tail(self._influence, self._parameters)
        self._process_tensor: BaseProcessTensor | None = None
        self._max_bond_dimension = 1
        self._engine: FinalizeWindowEngine | None = None

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
    def engine(self) -> FinalizeWindowEngine | None:
        """The window engine that ran the steps (:mod:`nonmarkov.engines`), or None
        before :meth:`compute` (and for a single step)."""
        return self._engine

    def compute(self, progress_type: str | None = None) -> None:
        """Run PT-TEMPO (once; later calls do nothing)."""
        self.get_process_tensor(progress_type)

    @property
    def checkpoint_file(self) -> str | None:
        """Where a streamed build keeps its checkpoint, or None."""
        if self._file is None or self._checkpoint_interval is None:
            return None
        return self._file + CHECKPOINT_SUFFIX

    def _fingerprint(self) -> str:
        """What a checkpoint must have been made by: the bath, parameters, interval and
        the window sweep, as JSON."""
        made_by: dict[str, Any] = {
            "metadata": self.metadata,
            "window_sweep": self._options.window_sweep,
        }
        if self._weights is not None:
            made_by["truncation_weights"] = self._weights.tolist()
        return json.dumps(made_by, sort_keys=True)

    def _build(self, progress_type: str) -> BaseProcessTensor:
        """Run PT-TEMPO into the target; the finished process tensor."""
        saved = self._load_checkpoint() if self._resume else None
        if saved is None:
            self._drop_checkpoint()
        sink = _StepSink(self._open_target(saved), buffered=self.checkpoint_file is not None)
        if saved is not None:
            sink.assigned = saved.assigned
            logger.info(
                "PT-TEMPO: resuming the build of %s at step %d from %s",
                self._file,
                saved.step,
                self.checkpoint_file,
            )
        try:
            self._run(sink, progress_type, saved)
        except BaseException:
            checkpoint = self.checkpoint_file
            if checkpoint is not None and os.path.exists(checkpoint):
                sink.suspend()  # the file and checkpoint stay for resume=True
            else:
                sink.abort()
            raise
        process_tensor = sink.close()
        self._drop_checkpoint(keep_partial=True)
        if isinstance(process_tensor, FileProcessTensor):
            logger.info("PT-TEMPO: wrote the process tensor to %s", process_tensor.filename)
        return process_tensor

    def _drop_checkpoint(self, keep_partial: bool = False) -> None:
        """Remove a checkpoint of this target (and, unless ``keep_partial``, the
        temporary file it points to), and what a checkpoint write cut short left
        (``.tmp-<random><checkpoint name>`` beside it)."""
        checkpoint = self.checkpoint_file
        if checkpoint is None:
            return
        folder, name = os.path.split(os.path.abspath(checkpoint))
        for leftover in os.listdir(folder):
            if leftover.startswith(".tmp-") and leftover.endswith(name):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(folder, leftover))
        if not os.path.exists(checkpoint):
            return
        if not keep_partial:
            with contextlib.suppress(Exception):
                with default_np.load(checkpoint) as data:
                    partial = str(data["temporary"])
                if os.path.basename(partial).startswith(".tmp-"):
                    os.remove(partial)
        with contextlib.suppress(FileNotFoundError):
            os.remove(checkpoint)

    def _load_checkpoint(self) -> _Checkpoint | None:
        """The checkpoint of an interrupted build of this target, or None."""
        checkpoint = self.checkpoint_file
        if checkpoint is None or not os.path.exists(checkpoint):
            return None
        try:
            with default_np.load(checkpoint, allow_pickle=False) as data:
                saved = _Checkpoint(
                    step=int(data["step"]),
                    count=int(data["count"]),
                    assigned=float(data["assigned"]),
                    log_scale=float(data["log_scale"]),
                    window=[data[f"site_{i}"] for i in range(int(data["num_sites"]))],
                    temporary=str(data["temporary"]),
                    fingerprint=str(data["fingerprint"]),
                )
        except Exception as error:  # a damaged checkpoint, named
            raise ValueError(
                f"checkpoint {checkpoint!r} cannot be read ({error}); remove it to start afresh"
            ) from error
        for i, site in enumerate(saved.window):
            if not default_np.all(default_np.isfinite(site)) or not math.isfinite(saved.log_scale):
                raise ValueError(
                    f"checkpoint {checkpoint!r} is damaged: its window (site_{i} or log_scale) "
                    "has NaN or infinite entries; remove it to start afresh"
                )
        if saved.fingerprint != self._fingerprint():
            raise ValueError(
                f"checkpoint {checkpoint!r} belongs to another build (other bath, parameters "
                "or interval); remove it, or resume with the arguments that made it"
            )
        if not os.path.exists(saved.temporary):
            raise ValueError(
                f"checkpoint {checkpoint!r} points to the partial file {saved.temporary!r}, "
                "which is gone; remove the checkpoint to start afresh"
            )
        return saved

    def _save_checkpoint(self, engine: FinalizeWindowEngine, sink: _StepSink, step: int) -> None:
        """Write the buffered step tensors, put the file on disk, then the checkpoint."""
        checkpoint, target = self.checkpoint_file, sink.target
        if checkpoint is None or not isinstance(target, FileProcessTensor):
            raise RuntimeError("a checkpoint needs a streamed build")
        sink.commit()
        target.flush()
        window, log_scale = engine.host_window()
        contents: dict[str, Any] = {
            "step": step,
            "count": sink.count,
            "assigned": sink.assigned,
            "log_scale": log_scale,
            "num_sites": len(window),
            "temporary": str(target.temporary_filename),
            "fingerprint": self._fingerprint(),
        }
        contents.update({f"site_{i}": default_np.asarray(site) for i, site in enumerate(window)})
        with atomic_path(checkpoint) as temporary, open(temporary, "wb") as handle:
            default_np.savez(handle, **contents)

    def _open_target(
        self, saved: _Checkpoint | None = None
    ) -> SimpleProcessTensor | FileProcessTensor:
        """An empty process tensor (in memory, or a file being written) for the steps;
        with ``saved``, the partial file of an interrupted build."""
        to_eigen, from_eigen = self._influence.liouville_transforms()
        # the same process tensor in memory or in a file
        header = (self.bath.dimension, self._parameters.dt, to_eigen, from_eigen)
        described: dict[str, Any] = {"classes": self._influence.classes, "metadata": self.metadata}
        if self._file is None:
            return SimpleProcessTensor(*header, self.name, self.description, **described)
        return FileProcessTensor(
            "overwrite" if self._overwrite else "write",
            self._file,
            *header,
            self.name,
            self.description,
            **described,
            resume_from=None if saved is None else saved.temporary,
            keep=0 if saved is None else saved.count,
        )

    def _run(self, sink: _StepSink, progress_type: str, saved: _Checkpoint | None = None) -> None:
        """The PT-TEMPO loop; hands every finalised site to ``sink``."""
        influence = self._influence
        front, log_scale = first_point(influence)
        with hot_loop_threads(), Progress(self._num_steps, progress_type, "PT-TEMPO") as progress:
            progress.update()
            if self._num_steps == 1:
                sink.finish([front.reshape(1, -1, 1)], log_scale)
                return
            weights = self._weights
            engine = finalize_window_engine(
                pt_window_spec(
                    influence,
                    front,
                    log_scale,
                    self._parameters.epsrel,
                    self._parameters.dkmax,
                    weights,
                    self._tail,
                ),
                self._options,
                resume=saved is not None,
            )
            self._engine = engine
            step = 1
            if saved is not None:
                engine.load_window(saved.window, saved.log_scale, steps=saved.step - 1)
                step = saved.step
                progress.update(step - 1)
            last_checkpoint = time.monotonic()
            engine.expect_steps(self._num_steps - step)
            while step < self._num_steps:
                count = min(engine.steps_per_call, self._num_steps - step)
                finalised, ranks = engine.advance_finalize(count)
                for k, (done, log_before) in enumerate(finalised):
                    if done is not None:
                        sink.add(unweighted(done, weights), log_before, step + k)
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
                interval = self._checkpoint_interval
                if interval is not None and step < self._num_steps:
                    due = time.monotonic() - last_checkpoint >= interval
                    if due or sink.pending_bytes > CHECKPOINT_BYTES:
                        self._save_checkpoint(engine, sink, step)
                        last_checkpoint = time.monotonic()
            window, log_scale = engine.host_window()
        if self._tail is not None and len(window) > (self._parameters.dkmax or 0):
            window = close_tail(window)
        sink.finish([unweighted(site, weights) for site in reversed(window)], log_scale)

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


CHECKPOINT_SUFFIX = ".checkpoint.npz"

#: The most bytes of step tensors a checkpointed build holds in memory before it
#: writes them to its file (a checkpoint sooner than its interval).
CHECKPOINT_BYTES = 256 * 2**20


@dataclasses.dataclass
class _Checkpoint:
    """Where an interrupted streamed build stood: ``step`` (the loop's next step),
    ``count`` step tensors in the partial file ``temporary``, the norm shares
    ``assigned`` to them, the window (newest first) and its ``log_scale``."""

    step: int
    count: int
    assigned: float
    log_scale: float
    window: list[Any]
    temporary: str
    fingerprint: str


class _StepSink:
    """Scales finalised window sites and appends them as step tensors to ``target``.

    Site M[l, c, r] (l towards newer points) becomes T[r, l, c] times
    exp(share), with the shares of the running log-norm described in the
    module docstring. ``buffered``: the tensors wait in memory until
    :meth:`commit` (a checkpointed build touches its file only at checkpoints,
    so that a kill between them leaves it consistent).
    """

    def __init__(self, target: SimpleProcessTensor | FileProcessTensor, buffered: bool = False):
        self.target = target
        self.assigned = 0.0
        self.count = len(target)
        self._buffered = buffered
        self._pending: list[Any] = []
        self.pending_bytes = 0  # of the buffered step tensors

    def _write(self, site: Any, share: float) -> None:
        tensor = default_np.transpose(default_np.asarray(site), (2, 0, 1)) * math.exp(share)
        if self._buffered:
            self._pending.append(tensor)
            self.pending_bytes += tensor.nbytes
        else:
            self.target.set(len(self.target), tensor)
        self.count += 1
        self.assigned += share

    def commit(self) -> None:
        """Write the buffered step tensors to the target."""
        for tensor in self._pending:
            self.target.set(len(self.target), tensor)
        self._pending = []
        self.pending_bytes = 0

    def add(self, site: Any, log_scale: float, num_normalised: int) -> None:
        """A site finalised after ``num_normalised`` normalisations summing to ``log_scale``."""
        share = log_scale * (self.count + 1) / num_normalised - self.assigned
        self._write(site, share)

    def finish(self, sites: list[Any], log_scale: float) -> None:
        """The sites left in the window (oldest first) share the rest of ``log_scale``."""
        share = (log_scale - self.assigned) / len(sites)
        for site in sites:
            self._write(site, share)
        self.commit()

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

    def suspend(self) -> None:
        """Leave a file being written as it was at the last checkpoint (for a resume)."""
        if isinstance(self.target, FileProcessTensor):
            self.target.suspend()


def first_point(influence: DiscretisedInfluence) -> tuple[default_np.ndarray, float]:
    """The first point's own factor (m,), normalised, and the log of its norm."""
    own = default_np.asarray(influence.own_factor())
    norm = float(default_np.linalg.norm(own))
    if norm == 0.0:
        return own, 0.0
    return own / norm, math.log(norm)


def class_weights(
    influence: DiscretisedInfluence, option: float | tuple[float, ...] | None
) -> default_np.ndarray | None:
    """The weight (m,) of each class for the ``truncation_weights`` engine option
    (see :class:`~nonmarkov.options.EngineOptions`), or None for the flat norm.

    A number w weights the population classes (s+ = s-) by w and the coherences
    by 1; a sequence gives one weight per class and must have m values.
    """
    if option is None:
        return None
    m = influence.num_classes
    if isinstance(option, tuple):
        if len(option) != m:
            raise ValueError(
                f"the truncation_weights option has {len(option)} values; this bath's "
                f"process tensor has {m} classes (one weight per class, or one number "
                "for the population classes)"
            )
        return default_np.asarray(option, dtype=float)
    populations = default_np.abs(influence.s_plus - influence.s_minus) <= 1e-12
    return default_np.where(populations, float(option), 1.0)


def unweighted(site: Any, weights: default_np.ndarray | None) -> Any:
    """A window site M[l, c, r] (host array) with the class weights divided out."""
    if weights is None:
        return site
    return default_np.asarray(site) / weights[None, :, None]


def close_tail(window: list[Any]) -> list[Any]:
    """The window (host arrays, newest first) with its last site, the tail modes,
    closed with their vacuum (nothing comes after the end) and absorbed into the
    oldest point."""
    modes, oldest = window[-1], window[-2]
    closed = default_np.tensordot(oldest, modes[:, 0, :], axes=([2], [0]))
    return window[:-2] + [closed]


def exponential_tail(
    influence: DiscretisedInfluence, parameters: TempoParameters
) -> tuple[default_np.ndarray, default_np.ndarray] | None:
    """The tail modes' (couple, merge) matrices of ``parameters.exponential_tail``
    (:mod:`nonmarkov.kernels.tail`: the couplings beyond the cut fitted by decaying
    exponentials, one mode per rate), or None without it."""
    if not parameters.exponential_tail:
        return None
    epsrel = parameters.epsrel
    couplings, tolerance = influence.tail_couplings(epsrel)
    rates, injections = influence.tail_modes(*fit_geometric(couplings, tolerance))
    rows = influence.row_differences
    depth = tail_depth(rates, injections, rows, epsrel)
    return tail_operators(rates, injections, rows, depth)


def pt_window_spec(
    influence: DiscretisedInfluence,
    front: Any,
    log_scale: float,
    epsrel: float,
    memory: int | None,
    weights: default_np.ndarray | None = None,
    tail: tuple[Any, Any] | None = None,
) -> WindowSpec:
    """PT-TEMPO's memory window holding the first point ``front`` (m,) (normalised,
    its log-scale ``log_scale``): a point's index is its class (projector and
    read-out map the identity), and the oldest point is split off (with the
    lumped coupling of an extra correlation time, if any). With ``weights``
    (m,) every point enters the window weighted by its class's weight (the
    caller divides it out of every site that leaves, :func:`unweighted`)."""
    m = influence.num_classes
    own = default_np.asarray(influence.own_factor())
    carrier = default_np.asarray(influence.carrier_rows)
    first = influence.lag_matrix_rows(1)[carrier] * own[:, None]
    if weights is not None:
        front = default_np.asarray(front) * weights
        first = first * weights[:, None]
    return WindowSpec(
        front=front,
        log_scale=log_scale,
        projector=default_np.eye(m),
        first=first,
        carrier=carrier,
        lag_rows=influence.lag_matrix_rows,
        out_map=default_np.eye(m),
        epsrel=epsrel,
        memory=memory,
        oldest="finalize",
        leaving_rows=(
            influence.leaving_rows if influence.lumps and memory == influence.last_lag else None
        ),
        tail=tail,
    )
