"""TEMPO: reduced dynamics of a system coupled to a Gaussian bath.

The augmented density tensor over the last ``dkmax`` time points is kept as
an MPS (see :mod:`nonmarkov.kernels.window`). Each step applies the system
propagator between two points, couples the new point to every point in the
memory window, truncates with ``epsrel`` and traces out the point whose memory
has ended (Strathearn et al., Nat. Commun. 9, 3322 (2018)).

Time stepping (symmetric Trotter splitting): step k takes rho(t_k) to
rho(t_k + dt) by a half step of the system, the bath influence of the
interval [t_k, t_k + dt], and another half step.

With the JAX backend the window lives on the device and every step after the
first runs as one compiled kernel (:class:`nonmarkov.engines.jax.window.CompiledWindow`);
the states are fetched in chunks of steps.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as default_np

from .. import validation
from .._threads import hot_loop_threads
from ..backends.host import to_backend
from ..backends.numerical_backend import np
from ..influence import DiscretisedInfluence
from ..io.results import Dynamics
from ..kernels.window import advance_window, normalise, trace_vectors
from ..model.bath import Bath
from ..model.parameters import TempoParameters, guess_tempo_parameters
from ..model.system import BaseSystem
from ..progress import Progress, check_progress_type
from . import checks as check


class Tempo:
    """TEMPO computation of the reduced dynamics; can be continued.

    Parameters
    ----------
    system : System or TimeDependentSystem (dimension d).
    bath : Bath with a coupling operator of dimension d.
    parameters : TempoParameters (dt, epsrel, memory cut).
    initial_state : (d, d) density matrix at ``start_time``.
    start_time : time of the initial state.
    unique : merge Liouville indices with equal coupling eigenvalue pairs
        (smaller tensors when S is degenerate; same result within epsrel).
    name, description : optional text.
    """

    def __init__(self, system: BaseSystem, bath: Bath, parameters: TempoParameters,
                 initial_state: Any, start_time: float, unique: bool = False,
                 name: str | None = None, description: str | None = None):
        check.model(system, bath)
        self._parameters = check.tempo_parameters(parameters)
        self._start_time = validation.real_number(start_time, "start_time")
        initial = validation.density_matrix(initial_state, "initial_state", system.dimension)
        self.system = system
        self.bath = bath
        self.unique = bool(unique)
        self.name = "Unnamed Tempo" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._influence = DiscretisedInfluence.from_parameters(bath, parameters, unique)
        self._propagators = system.get_propagators(
            parameters.dt, self._start_time, parameters.subdiv_limit,
            parameters.liouvillian_epsrel)
        self._to_eigen, self._from_eigen = self._influence.liouville_transforms()
        self._initial_vector = self._to_eigen @ initial.reshape(-1)
        self._dynamics = Dynamics(name=self.name)
        self._dynamics.add(self._start_time, initial)
        self._window: list[Any] = []
        self._log_scale = 0.0
        self._step = 0
        self._max_bond_dimension = 1
        self._backend_cache: dict[str, Any] = {}
        self._previous_second: default_np.ndarray | None = None
        self._propagator_cache: tuple[Any, ...] | None = None
        # the JAX backend runs the compiled window (decided when the object is made)
        self._compiled = np.backend_name == "jax"
        self._engine: Any = None
        self._between_cache: tuple[Any, Any, Any] | None = None

    @property
    def parameters(self) -> TempoParameters:
        """The TempoParameters in use."""
        return self._parameters

    @property
    def dimension(self) -> int:
        """System dimension d."""
        return self.system.dimension

    @property
    def max_bond_dimension(self) -> int:
        """Largest MPS bond dimension reached so far."""
        return self._max_bond_dimension

    def _eigen_propagators(self, step: int) -> tuple[default_np.ndarray, default_np.ndarray]:
        """Half-step propagators of ``step`` in the coupling eigenbasis.

        A ``System`` returns the same arrays at every step; they are
        transformed once.
        """
        first, second = self._propagators(step)
        cached = self._propagator_cache
        if cached is None or first is not cached[0] or second is not cached[1]:
            cached = (first, second, self._to_eigen @ first @ self._from_eigen,
                      self._to_eigen @ second @ self._from_eigen)
            self._propagator_cache = cached
        return cached[2], cached[3]

    def _backend_arrays(self) -> tuple[Any, Any, Any]:
        """Own factor (m,), classes (d^2,) and class projector (d^2, m) on the backend."""
        if not self._backend_cache:
            influence = self._influence
            self._backend_cache["own"] = to_backend(influence.own_factor())
            self._backend_cache["classes"] = np.asarray(influence.classes)
            self._backend_cache["projector"] = to_backend(influence.class_projector)
            self._backend_cache["rows"] = np.asarray(influence.carrier_rows[influence.classes])
            self._backend_cache["lags"] = []
        cache = self._backend_cache
        return cache["own"], cache["classes"], cache["projector"]

    def _lag(self, lag: int) -> Any:
        """Distinct rows of the lag matrix I_lag (r, m) on the backend, computed once."""
        lags = self._backend_cache["lags"]
        while len(lags) < lag:
            lags.append(to_backend(self._influence.lag_matrix_rows(len(lags) + 1)))
        return lags[lag - 1]

    def _advance(self) -> default_np.ndarray:
        """Do one step; return rho at the end of it, (d, d)."""
        own, classes, projector = self._backend_arrays()
        step = self._step
        epsrel = self._parameters.epsrel
        first, second = self._eigen_propagators(step)
        if step == 0:
            vector = to_backend(first @ self._initial_vector)
            front = (own[classes] * vector).reshape(1, -1, 1)
            window = [front]
        else:
            between = to_backend(first @ self._previous_second)
            window = self._window
            dkmax = self._parameters.dkmax
            n = len(window)
            oldest = "trace" if dkmax is not None and n >= dkmax else "keep"
            lag_matrices = [self._lag(j + 1) for j in range(n)]
            theta = np.einsum("ba,ac,ar->bcr", between, projector, window[0][0])
            window, _ = advance_window(
                window, theta, classes, lag_matrices, own, epsrel, oldest,
                carrier_rows=self._backend_cache["rows"])
        self._previous_second = second
        window[0], log_norm = normalise(window[0])
        self._log_scale += log_norm
        self._window = window
        self._step += 1
        bonds = [site.shape[2] for site in window[:-1]]
        if bonds:
            self._max_bond_dimension = max(self._max_bond_dimension, max(bonds))
        vector, log_rest = trace_vectors(window[1:]) if len(window) > 1 else (None, 0.0)
        state = window[0][0] if vector is None else window[0][0] @ vector
        state = np.to_host(state).reshape(-1) * math.exp(self._log_scale + log_rest)
        rho_vector = self._from_eigen @ (second @ state)
        return rho_vector.reshape(self.dimension, self.dimension)

    def compute(self, end_time: float, progress_type: str | None = None) -> Dynamics:
        """Propagate up to ``end_time`` (continuing from where it stopped).

        Returns the :class:`Dynamics` so far. The number of new steps is
        round((end_time - current_time) / dt).
        """
        end_time = validation.real_number(end_time, "end_time")
        progress_type = check_progress_type(progress_type)
        dt = self._parameters.dt
        current = self._start_time + self._step * dt
        if end_time < self._start_time:
            raise ValueError(f"end_time ({end_time}) is before start_time ({self._start_time})")
        num_steps = int(round((end_time - current) / dt))
        with hot_loop_threads(), Progress(max(num_steps, 0), progress_type, "TEMPO") as progress:
            if self._compiled:
                self._compute_compiled(max(num_steps, 0), progress)
                return self._dynamics
            for _ in range(max(num_steps, 0)):
                state = self._advance()
                self._dynamics.add(self._start_time + self._step * dt, state)
                progress.set_postfix(bond=self._max_bond_dimension)
                progress.update()
        return self._dynamics

    def _compute_compiled(self, num_steps: int, progress: Progress) -> None:
        """``num_steps`` steps with the compiled window (JAX backend)."""
        from ..engines.jax import host_start
        from ..engines.jax.window import CompiledWindow

        dt = self._parameters.dt
        d = self.dimension
        if num_steps > 0 and self._step == 0:
            first, second = self._eigen_propagators(0)
            influence = self._influence
            own = influence.own_factor()
            front = own[influence.classes] * (first @ self._initial_vector)
            norm = float(default_np.linalg.norm(front))
            log_scale = math.log(norm) if norm > 0.0 else 0.0
            front = front / norm if norm > 0.0 else front
            state = self._from_eigen @ (second @ (front * math.exp(log_scale)))
            self._previous_second = second
            self._step = 1
            self._dynamics.add(self._start_time + dt, state.reshape(d, d))
            lag_one = influence.lag_matrix_rows(1)[influence.carrier_rows[influence.classes]]
            self._engine = CompiledWindow(
                front, influence.class_projector, lag_one * own[influence.classes][:, None],
                influence.carrier_rows[influence.classes], influence.lag_matrix_rows,
                self._from_eigen, self._parameters.epsrel, self._parameters.dkmax,
                np.dtype_complex, log_scale=log_scale)
            num_steps -= 1
            progress.update()
            if host_start.wanted(self._engine, num_steps):
                num_steps -= self._start_on_host(front, log_scale, num_steps, progress)
        engine = self._engine
        chunk = 64
        while num_steps > 0:
            count = min(chunk, num_steps)
            propagators = [self._step_propagators(self._step + k) for k in range(count)]
            readouts, ranks = engine.advance(propagators)
            for k, readout in enumerate(readouts):
                self._dynamics.add(self._start_time + (self._step + k + 1) * dt,
                                   readout.reshape(d, d))
            self._step += count
            num_steps -= count
            self._max_bond_dimension = max([self._max_bond_dimension] + ranks)
            progress.set_postfix(bond=self._max_bond_dimension)
            progress.update(count)

    def _start_on_host(self, front: Any, log_scale: float, num_steps: int,
                       progress: Progress) -> int:
        """Steps after the first on the host while the step kernel compiles
        (:mod:`nonmarkov.engines.jax.host_start`); the window then moves to the device.
        ``front`` (x,): the first point, normalised, with log-scale ``log_scale``.
        Returns the number of steps done."""
        from ..engines.jax import host_start

        dt = self._parameters.dt
        self._window = [default_np.asarray(front, dtype=np.dtype_complex).reshape(1, -1, 1)]
        self._log_scale = log_scale

        def host_step() -> list[Any]:
            state = self._advance()
            self._dynamics.add(self._start_time + self._step * dt, state)
            progress.set_postfix(bond=self._max_bond_dimension)
            progress.update()
            return self._window

        done, bucket = host_start.run_host_steps(self._engine, host_step, num_steps)
        if done:
            self._engine.load_host_window(self._window, self._log_scale, bucket)
        self._window = []
        return done

    def _step_propagators(self, step: int) -> tuple[Any, Any]:
        """(between, second) of ``step`` >= 1 on the host; the same objects while unchanged."""
        first, second = self._eigen_propagators(step)
        previous = self._previous_second
        cached = self._between_cache
        if cached is None or cached[0] is not first or cached[1] is not previous:
            cached = (first, previous, first @ previous)
            self._between_cache = cached
        self._previous_second = second
        return cached[2], second

    def get_dynamics(self) -> Dynamics:
        """The dynamics computed so far."""
        return self._dynamics


def tempo_compute(system: BaseSystem, bath: Bath, initial_state: Any, start_time: float,
                  end_time: float, parameters: TempoParameters | None = None,
                  tolerance: float | None = None, unique: bool = False,
                  progress_type: str | None = None, name: str | None = None,
                  description: str | None = None) -> Dynamics:
    """One-call TEMPO: build a :class:`Tempo` and compute up to ``end_time``.

    If ``parameters`` is None they are guessed with
    :func:`~nonmarkov.guess_tempo_parameters` (``tolerance`` as given).
    """
    if parameters is None:
        kwargs = {} if tolerance is None else {"tolerance": tolerance}
        parameters = guess_tempo_parameters(bath, start_time, end_time, system, **kwargs)
    tempo = Tempo(system, bath, parameters, initial_state, start_time, unique=unique, name=name,
                  description=description)
    return tempo.compute(end_time, progress_type=progress_type)
