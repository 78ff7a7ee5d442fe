"""TEMPO: reduced dynamics of a system coupled to a Gaussian bath.

The augmented density tensor over the last ``dkmax`` time points is kept as
an MPS (see :mod:`nonmarkov.kernels.window`). Each step applies the system
propagator between two points, couples the new point to every point in the
memory window, truncates with ``epsrel`` and traces out the point whose memory
has ended (Strathearn et al., Nat. Commun. 9, 3322 (2018)).

Time stepping (symmetric Trotter splitting): step k takes rho(t_k) to
rho(t_k + dt) by a half step of the system, the bath influence of the
interval [t_k, t_k + dt], and another half step.

The window is advanced by a window engine (:mod:`nonmarkov.engines`): the
NumPy kernels on the NumPy backend, compiled kernels on JAX.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as default_np

from .. import config, validation
from .._threads import hot_loop_threads
from ..engines import trace_window_engine
from ..engines.base import TraceWindowEngine, WindowSpec
from ..engines.shared import LastArguments
from ..influence import DiscretisedInfluence
from ..io.results import Dynamics
from ..model.bath import Bath
from ..model.parameters import TempoParameters, guess_tempo_parameters
from ..model.system import BaseSystem
from ..options import EngineOptions, resolve
from ..progress import Progress, check_progress_type
from . import checks as check
from .error_ladder import climb
from .metadata import bath_metadata, dynamics_metadata, parameters_metadata, run_statistics
from .pt_tempo import exponential_tail


class TempoWindow:
    """The TEMPO memory window of one system and its bath, advanced by the
    system's half-step propagators (``Tempo`` and ``MeanFieldTempo`` run it).

    Parameters
    ----------
    bath : the Bath (dimension d).
    parameters : TempoParameters (dt, epsrel, memory cut).
    unique : merge Liouville indices with equal coupling eigenvalue pairs.
    options : resolved :class:`~nonmarkov.options.EngineOptions`.
    """

    def __init__(
        self, bath: Bath, parameters: TempoParameters, unique: bool, options: EngineOptions
    ):
        self._parameters = parameters
        self._options = options
        self._dimension = bath.dimension
        self._influence = DiscretisedInfluence.from_parameters(bath, parameters, unique, tail=True)
        self._tail = exponential_tail(self._influence, parameters)
        self._to_eigen, self._from_eigen = self._influence.liouville_transforms()
        to_eigen, from_eigen = self._to_eigen, self._from_eigen
        #: (first, second) half-step propagators in the coupling eigenbasis
        self._eigen = LastArguments(
            lambda first, second: (to_eigen @ first @ from_eigen, to_eigen @ second @ from_eigen)
        )
        self._between = LastArguments(lambda first, previous: first @ previous)
        self._previous_second: default_np.ndarray | None = None
        self._engine: TraceWindowEngine | None = None
        #: largest MPS bond dimension reached so far
        self.max_bond_dimension = 1
        #: classes m of a window site
        self.num_classes = self._influence.num_classes

    def start(self, initial: default_np.ndarray, first: Any, second: Any) -> default_np.ndarray:
        """Step 0 from rho(t_0) (d, d) with its half-step propagators (d^2, d^2), on
        the host; makes the window engine that holds the point. Returns rho(t_1)."""
        influence = self._influence
        first, second = self._eigen(first, second)
        own = influence.own_factor()
        front = own[influence.classes] * (first @ (self._to_eigen @ initial.reshape(-1)))
        norm = float(default_np.linalg.norm(front))
        log_scale = math.log(norm) if norm > 0.0 else 0.0
        front = front / norm if norm > 0.0 else front
        state = self._from_eigen @ (second @ (front * math.exp(log_scale)))
        self._previous_second = second
        carrier = influence.carrier_rows[influence.classes]
        spec = WindowSpec(
            front=front,
            log_scale=log_scale,
            projector=influence.class_projector,
            first=influence.lag_matrix_rows(1)[carrier] * own[influence.classes][:, None],
            carrier=carrier,
            lag_rows=influence.lag_matrix_rows,
            out_map=self._from_eigen,
            epsrel=self._parameters.epsrel,
            memory=self._parameters.dkmax,
            oldest="trace",
            leaving_rows=influence.leaving_rows if influence.lumps else None,
            tail=self._tail,
            trace_weight=self._options.trace_weight,
        )
        self._engine = trace_window_engine(spec, self._options)
        d = self._dimension
        return state.reshape(d, d)

    @property
    def engine(self) -> TraceWindowEngine:
        """The window engine that holds the window (made by :meth:`start`)."""
        if self._engine is None:
            raise RuntimeError("the window has no engine before start()")
        return self._engine

    def advance(self, halves: list[tuple[Any, Any]]) -> default_np.ndarray:
        """Steps 1, 2, ... from their half-step propagators (first, second), each
        (d^2, d^2); returns the states after each step, (steps, d, d)."""
        pairs = []
        for first, second in halves:
            first, second = self._eigen(first, second)
            pairs.append((self._between(first, self._previous_second), second))
            self._previous_second = second
        readouts, ranks = self.engine.advance(pairs)
        self.max_bond_dimension = max([self.max_bond_dimension] + list(ranks))
        d = self._dimension
        return default_np.asarray(readouts).reshape(-1, d, d)


class Tempo:
    """TEMPO computation of the reduced dynamics; can be continued.

    Parameters
    ----------
    system : System or TimeDependentSystem (dimension d).
    bath : Bath with a coupling operator of dimension d.
    parameters : TempoParameters (dt, epsrel, memory cut).
    initial_state : (d, d) density matrix at ``start_time``, or any (d, d)
        operator (the map is linear).
    start_time : time of the initial state.
    unique : merge Liouville indices with equal coupling eigenvalue pairs
        (smaller tensors when S is degenerate; same result within epsrel).
    backend_config : accepted for OQuPy scripts and ignored (a ``UserWarning``
        unless None or empty): the engines take ``options``.
    name, description : optional text.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).
    """

    def __init__(
        self,
        system: BaseSystem,
        bath: Bath,
        parameters: TempoParameters,
        initial_state: Any,
        start_time: float,
        unique: bool = False,
        backend_config: dict | None = None,
        name: str | None = None,
        description: str | None = None,
        options: EngineOptions | None = None,
    ):
        check.backend_config(backend_config, "Tempo")
        check.model(system, bath)
        self._parameters = check.tempo_parameters(parameters)
        check.correlation_time(self._parameters)
        check.discretisation(self._parameters.dt, "TEMPO", system, bath)
        self._start_time = validation.real_number(start_time, "start_time")
        initial = validation.initial_operator(initial_state, "initial_state", system.dimension)
        self._initial = initial
        self.system = system
        self.bath = bath
        self.unique = validation.boolean(unique, "unique")
        self.name = "Unnamed Tempo" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._propagators = system.get_propagators(
            parameters.dt, self._start_time, parameters.subdiv_limit, parameters.liouvillian_epsrel
        )
        self._window = TempoWindow(bath, self._parameters, self.unique, resolve(options))
        self._dynamics = Dynamics(
            name=self.name,
            metadata=dynamics_metadata(
                "Tempo",
                system,
                start_time=self._start_time,
                unique=self.unique,
                parameters=parameters_metadata(self._parameters),
                bath=bath_metadata(bath),
            ),
        )
        self._dynamics.add(self._start_time, initial)
        self._step = 0
        self._wall_time = 0.0
        self._first_state = self._window.start(initial, *self._propagators(0))

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
        return self._window.max_bond_dimension

    @property
    def engine(self) -> TraceWindowEngine:
        """The window engine that runs the steps (:mod:`nonmarkov.engines`)."""
        return self._window.engine

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
        num_steps = max(int(round((end_time - current) / dt)), 0)
        total = self._step + num_steps
        check.tight_epsrel(
            self._parameters.epsrel,
            self.dimension**2,
            min(self._parameters.dkmax or total, total),
            "TEMPO",
        )
        check.affordable_run(
            num_steps,
            self.dimension,
            len(self._dynamics) + num_steps,
            "TEMPO",
            min(self._parameters.dkmax or self._step + num_steps, self._step + num_steps),
        )
        started = time.perf_counter()
        with hot_loop_threads(), Progress(num_steps, progress_type, "TEMPO") as progress:
            if num_steps > 0 and self._step == 0:
                self._step = 1
                self._dynamics.add(self._start_time + dt, self._first_state)
                num_steps -= 1
                progress.update()
            self.engine.expect_steps(num_steps)
            while num_steps > 0:
                count = min(self.engine.steps_per_call, num_steps)
                halves = [self._propagators(self._step + k) for k in range(count)]
                states = self._window.advance(halves)
                check.finite_states(
                    states, self._step + 1, self._start_time, dt, "TEMPO", initial=self._initial
                )
                for k, state in enumerate(states):
                    self._dynamics.add(self._start_time + (self._step + k + 1) * dt, state)
                self._step += count
                num_steps -= count
                check.window_fits(
                    self._window.max_bond_dimension,
                    self._window.num_classes,
                    min(self._step, self._parameters.dkmax or self._step),
                    self._step,
                    dt,
                    "TEMPO",
                )
                progress.set_postfix(bond=self.max_bond_dimension)
                progress.update(count)
        self._wall_time += time.perf_counter() - started
        self._dynamics.metadata["statistics"] = run_statistics(
            self._wall_time, self._step, self.max_bond_dimension
        )
        return self._dynamics

    def get_dynamics(self) -> Dynamics:
        """The dynamics computed so far."""
        return self._dynamics


def tempo_compute(
    system: BaseSystem,
    bath: Bath,
    initial_state: Any,
    start_time: float,
    end_time: float,
    parameters: TempoParameters | None = None,
    tolerance: float | None = None,
    unique: bool = False,
    backend_config: dict | None = None,
    progress_type: str | None = None,
    name: str | None = None,
    description: str | None = None,
    *,
    options: EngineOptions | None = None,
    converge: bool = False,
    max_cost: float | None = None,
    max_seconds: float | None = None,
) -> Dynamics:
    """One-call TEMPO: build a :class:`Tempo` and compute up to ``end_time``.

    The positional order is OQuPy's: ``system, bath, initial_state,
    start_time, end_time, parameters, tolerance, unique, backend_config,
    progress_type, name, description``; ``options`` is a keyword only.
    If ``parameters`` is None they are guessed with
    :func:`~nonmarkov.guess_tempo_parameters` (``tolerance`` as given).
    ``backend_config``: accepted for OQuPy scripts and ignored (None or {}
    silently, another dict with a ``UserWarning``, anything else a
    TypeError; :func:`nonmarkov.methods.checks.backend_config`).
    ``options``: the engine options (None: the library default).

    ``converge=True`` (keyword only): converge dt, the memory cut and epsrel
    until the estimated error of the states is within ``tolerance`` (None: the
    default of :func:`~nonmarkov.guess_tempo_parameters`), starting from
    ``parameters`` (None: the guess), within ``max_cost`` cost units and
    ``max_seconds``; the result carries its error estimate per time and the
    ladder (:func:`~nonmarkov.converge`, which also offers observables and
    process tensors).
    """
    check.backend_config(backend_config, "tempo_compute")

    def run(params: TempoParameters) -> list[Dynamics]:
        tempo = Tempo(
            system,
            bath,
            params,
            initial_state,
            start_time,
            unique=unique,
            name=name,
            description=description,
            options=options,
        )
        return [tempo.compute(end_time, progress_type=progress_type)]

    if validation.boolean(converge, "converge"):
        check.model(system, bath)
        return climb(
            run,
            system,
            bath,
            start_time,
            end_time,
            config.DEFAULT_TOLERANCE if tolerance is None else tolerance,
            parameters=parameters,
            max_cost=max_cost,
            max_seconds=max_seconds,
            name=name,
            method="tempo_compute",
        )[0]
    if max_cost is not None or max_seconds is not None:
        raise ValueError("max_cost and max_seconds limit the ladder of converge=True only")
    if parameters is None:
        parameters = guess_tempo_parameters(bath, start_time, end_time, system, tolerance)
    return run(parameters)[0]
