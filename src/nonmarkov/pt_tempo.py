"""PT-TEMPO: the process tensor of a Gaussian bath, independent of the system.

The same memory-window MPS as TEMPO, without system propagators; instead of
being traced out, a point whose memory has ended is split off as the process
tensor's step tensor (Joergensen & Pollock, PRL 123, 240602 (2019); Fux et
al., PRL 126, 200401 (2021)). Finalised tensors are right-orthonormal, so
every truncation is measured against an orthonormal environment on the side
of the past; the running norm is kept as a logarithm and spread evenly over
the step tensors at the end.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as default_np

from . import _validation as check
from ._threads import hot_loop_threads
from .backends.host import to_backend
from .backends.numerical_backend import np
from .bath import Bath
from .influence import DiscretisedInfluence
from .parameters import TempoParameters
from .process_tensor import SimpleProcessTensor
from .progress import Progress, check_progress_type
from .tempo import check_parameters
from .tn.window import advance_window, normalise


class PtTempo:
    """Builds the process tensor of ``bath`` from ``start_time`` to ``end_time``.

    Parameters
    ----------
    bath : the Bath.
    start_time, end_time : the PT covers round((end - start) / dt) steps.
    parameters : TempoParameters.
    unique : merge Liouville indices with equal coupling eigenvalue pairs.
    name, description : optional text.
    """

    def __init__(self, bath: Bath, start_time: float, end_time: float,
                 parameters: TempoParameters, unique: bool = False,
                 name: str | None = None, description: str | None = None):
        if not isinstance(bath, Bath):
            raise TypeError(f"bath must be a Bath; got {type(bath).__name__}")
        self._parameters = check_parameters(parameters)
        self._start_time = check.real_number(start_time, "start_time")
        self._end_time = check.real_number(end_time, "end_time")
        if self._end_time <= self._start_time:
            raise ValueError(f"end_time ({end_time}) must be after start_time ({start_time})")
        self.bath = bath
        self.unique = bool(unique)
        self.name = "Unnamed PtTempo" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._num_steps = int(round((self._end_time - self._start_time) / parameters.dt))
        if self._num_steps < 1:
            raise ValueError(f"end_time - start_time ({self._end_time - self._start_time}) is "
                             f"shorter than half a time step dt={parameters.dt}")
        self._influence = DiscretisedInfluence(
            bath, parameters.dt, unique=unique,
            add_correlation_time=parameters.add_correlation_time,
            last_lag=parameters.dkmax, subdiv_limit=parameters.integral_subdiv_limit)
        self._process_tensor: SimpleProcessTensor | None = None
        self._max_bond_dimension = 1

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
        influence = self._influence
        m = influence.num_classes
        dkmax = self._parameters.dkmax
        epsrel = self._parameters.epsrel
        own = to_backend(influence.own_factor())
        class_index = np.arange(m)
        lags: list[Any] = []
        finalized: list[Any] = []
        window: list[Any] = []
        log_scale = 0.0
        with hot_loop_threads(), Progress(self._num_steps, progress_type, "PT-TEMPO") as progress:
            for step in range(self._num_steps):
                if step == 0:
                    window = [own.reshape(1, m, 1)]
                else:
                    n = len(window)
                    while len(lags) < n:
                        lags.append(to_backend(influence.lag_matrix(len(lags) + 1)))
                    oldest = "finalize" if dkmax is not None and n >= dkmax else "keep"
                    theta = np.broadcast_to(window[0][0][None], (m,) + window[0].shape[1:])
                    window, done = advance_window(
                        window, theta, class_index, lags, own, epsrel, oldest)
                    if done is not None:
                        finalized.append(done)
                window[0], log_norm = normalise(window[0])
                log_scale += log_norm
                bond = max([site.shape[2] for site in window] + [1])
                self._max_bond_dimension = max(self._max_bond_dimension, bond)
                progress.set_postfix(bond=self._max_bond_dimension)
                progress.update()
        self._process_tensor = self._assemble(finalized + list(reversed(window)), log_scale)

    def _assemble(self, sites: list[Any], log_scale: float) -> SimpleProcessTensor:
        """Turn window sites M[l, c, r] (oldest first) into step tensors T[r, l, c]."""
        influence = self._influence
        to_eigen, from_eigen = influence.liouville_transforms()
        pt = SimpleProcessTensor(
            self.bath.dimension, self._parameters.dt, transform_in=to_eigen,
            transform_out=from_eigen, classes=influence.classes, name=self.name,
            description=self.description)
        factor = math.exp(log_scale / len(sites))
        for step, site in enumerate(sites):
            tensor = default_np.transpose(np.to_host(site), (2, 0, 1)) * factor
            pt.set(step, tensor)
        return pt

    def get_process_tensor(self, progress_type: str | None = None) -> SimpleProcessTensor:
        """The process tensor (computed first if needed)."""
        if self._process_tensor is None:
            self.compute(progress_type=progress_type)
        return self._process_tensor


def pt_tempo_compute(bath: Bath, start_time: float, end_time: float,
                     parameters: TempoParameters | None = None,
                     tolerance: float | None = None, unique: bool = False,
                     progress_type: str | None = None, name: str | None = None,
                     description: str | None = None) -> SimpleProcessTensor:
    """One-call PT-TEMPO: the process tensor of ``bath`` on [start_time, end_time].

    If ``parameters`` is None they are guessed (``tolerance`` as given).
    """
    from .parameters import guess_tempo_parameters

    if parameters is None:
        kwargs = {} if tolerance is None else {"tolerance": tolerance}
        parameters = guess_tempo_parameters(bath, start_time, end_time, **kwargs)
    pt_tempo = PtTempo(bath, start_time, end_time, parameters, unique=unique, name=name,
                       description=description)
    return pt_tempo.get_process_tensor(progress_type=progress_type)
