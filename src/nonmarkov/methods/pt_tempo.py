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

With the JAX backend every step after the first runs as one compiled kernel
(:class:`nonmarkov.engines.jax.window.CompiledWindow` with ``oldest='finalize'``);
the finalised sites and their log-scales are fetched in chunks of steps and
handed to the same sink, so files and norm shares are as with NumPy.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as default_np

from .._threads import hot_loop_threads
from ..backends.host import to_backend
from ..backends.numerical_backend import np
from ..influence import DiscretisedInfluence
from ..kernels.window import advance_window, normalise
from ..model.bath import Bath
from ..model.parameters import TempoParameters
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
    name, description : optional text.
    """

    def __init__(self, bath: Bath, start_time: float, end_time: float,
                 parameters: TempoParameters, unique: bool = False,
                 process_tensor_file: str | os.PathLike | bool | None = None,
                 overwrite: bool = False,
                 name: str | None = None, description: str | None = None):
        self._parameters = check.tempo_parameters(parameters)
        self._start_time, self._end_time, self._num_steps = check.pt_interval(
            bath, start_time, end_time, self._parameters.dt)
        self.bath = bath
        self.unique = bool(unique)
        self.name = "Unnamed PtTempo" if name is None else str(name)
        self.description = "" if description is None else str(description)
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be True or False; got {overwrite!r}")
        self._overwrite = overwrite
        self._file = check.process_tensor_file(process_tensor_file, overwrite)
        self._influence = DiscretisedInfluence.from_parameters(bath, parameters, unique)
        self._process_tensor: BaseProcessTensor | None = None
        self._max_bond_dimension = 1
        self._engine: Any = None  # the compiled window of a JAX run

    @property
    def process_tensor_file(self) -> str | None:
        """Filename the process tensor is streamed to, or None (in memory)."""
        return self._file

    @property
    def metadata(self) -> dict:
        """JSON-serialisable description of the bath and parameters (stored in files)."""
        return process_tensor_metadata("PtTempo", self.bath, self._parameters,
                                       self._start_time, self._end_time, self._num_steps,
                                       self.unique)

    @property
    def num_steps(self) -> int:
        """Number of steps of the process tensor."""
        return self._num_steps

    @property
    def max_bond_dimension(self) -> int:
        """Largest bond dimension reached during the construction."""
        return self._max_bond_dimension

    def compute(self, progress_type: str | None = None) -> None:
        """Run PT-TEMPO (once; later calls do nothing)."""
        progress_type = check_progress_type(progress_type)
        if self._process_tensor is not None:
            return
        sink = _StepSink(self._open_target())
        try:
            self._run(sink, progress_type)
        except BaseException:
            sink.abort()
            raise
        self._process_tensor = sink.close()

    def _open_target(self) -> SimpleProcessTensor | FileProcessTensor:
        """An empty process tensor (in memory, or a file being written) for the steps."""
        influence = self._influence
        to_eigen, from_eigen = influence.liouville_transforms()
        arguments = (self.bath.dimension, self._parameters.dt, to_eigen, from_eigen,
                     influence.classes, self.name, self.description, self.metadata)
        if self._file is None:
            return SimpleProcessTensor(*arguments)
        mode = "overwrite" if self._overwrite else "write"
        return FileProcessTensor(self._file, mode, *arguments)

    def _run(self, sink: _StepSink, progress_type: str) -> None:
        """The PT-TEMPO loop; hands every finalised site to ``sink``."""
        if np.backend_name == "jax":
            self._run_compiled(sink, progress_type)
            return
        own = to_backend(self._influence.own_factor())
        lags: list[Any] = []
        with hot_loop_threads(), Progress(self._num_steps, progress_type, "PT-TEMPO") as progress:
            front, log_scale = normalise(own.reshape(1, -1, 1))
            window = [front]
            self._record_step(window, progress)
            for step in range(1, self._num_steps):
                window, log_scale = self._window_step(window, log_scale, step, own, lags, sink,
                                                      progress)
        sink.finish(list(reversed(window)), log_scale)

    def _window_step(self, window: list[Any], log_scale: float, step: int, own: Any,
                     lags: list[Any], sink: _StepSink,
                     progress: Progress) -> tuple[list[Any], float]:
        """Step ``step`` >= 1 of the window on the active backend (NumPy in the host
        start): the finalised site goes to ``sink``; ``lags`` (the lag rows on the
        backend) grows as needed. Returns the window and the log-scale after it."""
        influence = self._influence
        while len(lags) < len(window):
            lags.append(to_backend(influence.lag_matrix_rows(len(lags) + 1)))
        dkmax = self._parameters.dkmax
        oldest = "finalize" if dkmax is not None and len(window) >= dkmax else "keep"
        window, done, log_norm = pt_window_step(window, lags, own,
                                                np.asarray(influence.carrier_rows),
                                                self._parameters.epsrel, oldest)
        if done is not None:
            sink.add(done, log_scale, step)
        self._record_step(window, progress)
        return window, log_scale + log_norm

    def _record_step(self, window: list[Any], progress: Progress) -> None:
        bond = max(site.shape[2] for site in window)
        self._max_bond_dimension = max(self._max_bond_dimension, bond)
        progress.set_postfix(bond=self._max_bond_dimension)
        progress.update()

    def _run_compiled(self, sink: _StepSink, progress_type: str) -> None:
        """The PT-TEMPO loop with the compiled window (:func:`compiled_pt_window`)."""
        from ..engines.jax import host_start

        influence = self._influence
        m = influence.num_classes
        front, log_scale = _first_point(influence)
        with hot_loop_threads(), Progress(self._num_steps, progress_type, "PT-TEMPO") as progress:
            progress.update()
            if self._num_steps == 1:
                sink.finish([front.reshape(1, m, 1).astype(np.dtype_complex)], log_scale)
                return
            engine = compiled_pt_window(influence, self._parameters.epsrel,
                                        self._parameters.dkmax)
            self._engine = engine
            between, identity = default_np.ones((m, m)), default_np.eye(m)
            step = 1
            if host_start.wanted(engine, self._num_steps - 1):
                step += self._start_on_host(engine, sink, front, log_scale, progress)
            chunk = 64
            while step < self._num_steps:
                count = min(chunk, self._num_steps - step)
                finalised, ranks = engine.advance_finalize(count, between, identity)
                for k, (done, log_before) in enumerate(finalised):
                    if done is not None:
                        sink.add(done, log_before, step + k)
                step += count
                self._max_bond_dimension = max([self._max_bond_dimension] + ranks)
                progress.set_postfix(bond=self._max_bond_dimension)
                progress.update(count)
            window, log_scale = engine.host_window()
        sink.finish(list(reversed(window)), log_scale)

    def _start_on_host(self, engine: Any, sink: _StepSink, front: Any, log_scale: float,
                       progress: Progress) -> int:
        """Steps 1, 2, ... on the host while the step kernel compiles
        (:mod:`nonmarkov.engines.jax.host_start`); the window then moves to ``engine``.
        ``front`` (m,): the first point, normalised, with log-scale ``log_scale``.
        Returns the number of steps done."""
        from ..engines.jax import host_start

        own = default_np.asarray(self._influence.own_factor(), dtype=np.dtype_complex)
        lags: list[Any] = []
        state = {"window": [default_np.asarray(front, dtype=np.dtype_complex).reshape(1, -1, 1)],
                 "log_scale": log_scale, "step": 1}

        def host_step() -> list[Any]:  # runs on NumPy (host_start.run_host_steps)
            state["window"], state["log_scale"] = self._window_step(
                state["window"], state["log_scale"], state["step"], own, lags, sink, progress)
            state["step"] += 1
            return state["window"]

        done, bucket = host_start.run_host_steps(engine, host_step, self._num_steps - 1)
        if done:
            engine.load_host_window(state["window"], state["log_scale"], bucket)
        return done

    def get_process_tensor(self, progress_type: str | None = None) -> BaseProcessTensor:
        """The process tensor (computed first if needed).

        A :class:`~nonmarkov.SimpleProcessTensor`, or a
        :class:`~nonmarkov.FileProcessTensor` open for reading if
        ``process_tensor_file`` was given.
        """
        if self._process_tensor is None:
            self.compute(progress_type=progress_type)
        return self._process_tensor


def pt_window_step(window: list[Any], lags: list[Any], own: Any, carrier_rows: Any,
                   epsrel: float, oldest: str) -> tuple[list[Any], Any, float]:
    """One PT-TEMPO step of the window on the active backend (no system: the new
    point couples to the front through all classes).

    window: front (1, m, k) then sites (k, m, k'); lags[j] (r, m) the lag rows of
    window position j; own (m,) the new point's own factor; carrier_rows (m,).
    Returns the new window with its front normalised, the finalised site (k, m,
    k') or None, and the log of the front's norm.
    """
    m = own.shape[0]
    theta = np.broadcast_to(window[0][0][None], (m,) + window[0].shape[1:])
    window, done = advance_window(window, theta, np.arange(m), lags, own, epsrel, oldest,
                                  carrier_rows=carrier_rows)
    window[0], log_norm = normalise(window[0])
    return window, done, log_norm


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
        tensor = default_np.transpose(np.to_host(site), (2, 0, 1)) * math.exp(share)
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
            return FileProcessTensor(self.target.filename, "read")
        return self.target

    def abort(self) -> None:
        """Discard a file being written (nothing appears under its name)."""
        if isinstance(self.target, FileProcessTensor):
            self.target.abort()


def _first_point(influence: DiscretisedInfluence) -> tuple[default_np.ndarray, float]:
    """The first point's own factor (m,), normalised, and the log of its norm."""
    own = default_np.asarray(influence.own_factor())
    norm = float(default_np.linalg.norm(own))
    if norm == 0.0:
        return own, 0.0
    return own / norm, math.log(norm)


def compiled_pt_window(influence: DiscretisedInfluence, epsrel: float,
                       memory: int | None) -> Any:
    """PT-TEMPO's memory window as the compiled kernel (JAX), holding the first point.

    A :class:`nonmarkov.engines.jax.window.CompiledWindow` with ``oldest='finalize'``;
    its steps are ``advance_finalize(count, ones((m, m)), eye(m))`` (the TEMPO
    step with no system: the new point couples to the front through an
    all-ones ``between`` and the identity as class projector).
    """
    from ..engines.jax.window import CompiledWindow

    m = influence.num_classes
    front, log_scale = _first_point(influence)
    own = default_np.asarray(influence.own_factor())
    carrier_rows = default_np.asarray(influence.carrier_rows)
    return CompiledWindow(
        front, default_np.eye(m), influence.lag_matrix_rows(1)[carrier_rows] * own[:, None],
        carrier_rows, influence.lag_matrix_rows, default_np.eye(m), epsrel, memory,
        np.dtype_complex, log_scale=log_scale, oldest="finalize")
