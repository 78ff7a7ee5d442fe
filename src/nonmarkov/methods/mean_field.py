"""Mean-field TEMPO: systems, each with its own bath, coupled through one classical field.

A :class:`~nonmarkov.MeanFieldSystem` holds n systems with Hamiltonians
H_i(t, a) and a complex field a(t) with da/dt = f(t, [rho_1, ..., rho_n], a)
(Fowler-Wright et al., PRL 129, 173001 (2022)). Each system evolves with its
own bath by TEMPO (:class:`MeanFieldTempo`) or through its process tensors
(:func:`compute_dynamics_with_field`); the field couples them.

Step k, from t_k to t_{k+1} = t_k + dt (a second-order scheme):

1. f_k = f(t_k, rho(t_k), a_k);
2. every system takes its step with the field linear over the step,
   a(t) = a_k + f_k (t - t_k), in its half-step propagators;
3. a_{k+1} = a_k + dt/2 [f_k + f(t_{k+1}, rho(t_{k+1}), a_k + dt f_k)] (Heun).

Without baths the error of the states and the field after a fixed time falls
as dt^2 (tests/test_mean_field.py checks it against ``solve_ivp``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as default_np

from .. import config, validation
from .._threads import hot_loop_threads
from ..backends.host import to_backend
from ..backends.numerical_backend import np
from ..engines import chain_engine
from ..io.results import MeanFieldDynamics
from ..kernels.chain import close_bonds
from ..model.bath import Bath
from ..model.control import Control
from ..model.parameters import TempoParameters
from ..model.system import MeanFieldSystem
from ..options import EngineOptions, resolve
from ..progress import Progress, check_progress_type
from . import checks
from .dynamics import as_process_tensor_list, chain_controls, resolve_grid
from .tempo import TempoWindow


def _check_mean_field_system(mean_field_system: Any) -> MeanFieldSystem:
    if not isinstance(mean_field_system, MeanFieldSystem):
        raise TypeError(
            f"mean_field_system must be a MeanFieldSystem; got {type(mean_field_system).__name__}"
        )
    return mean_field_system


def _check_list(values: Any, name: str, count: int) -> list[Any]:
    """``values`` as a list of ``count`` items (one per system)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a list with one item per system ({count})")
    values = list(values)
    if len(values) != count:
        raise ValueError(
            f"{name} has {len(values)} items; the mean-field system has {count} systems"
        )
    return values


def _check_states(initial_state_list: Any, mean_field_system: MeanFieldSystem) -> list[Any]:
    systems = mean_field_system.system_list
    states = _check_list(initial_state_list, "initial_state_list", len(systems))
    return [
        validation.initial_operator(state, f"initial_state_list[{i}]", system.dimension)
        for i, (state, system) in enumerate(zip(states, systems))
    ]


def _check_field(initial_field: Any) -> complex:
    array = default_np.asarray(initial_field)
    if array.shape != () or array.dtype.kind not in "iufc":
        raise TypeError(f"initial_field must be a complex number; got {initial_field!r}")
    value = complex(array)
    if not (math.isfinite(value.real) and math.isfinite(value.imag)):
        raise ValueError(f"initial_field must be finite; got {value}")
    return value


class _FieldStepper:
    """The field of a mean-field system on the time grid (module docstring)."""

    def __init__(self, mean_field_system: MeanFieldSystem, dt: float, start_time: float):
        self._system = mean_field_system
        self._dt = dt
        self._start_time = start_time

    def derivative(self, step: int, states: list[Any], field: complex) -> complex:
        """f(t_step, states, field)."""
        return self._system.field_derivative(self._start_time + step * self._dt, states, field)

    def next(self, step: int, field: complex, derivative: complex, states: list[Any]) -> complex:
        """a_{step+1} from a_step, its derivative f_step and the states at t_{step+1}."""
        predicted = field + self._dt * derivative
        after = self.derivative(step + 1, states, predicted)
        return field + 0.5 * self._dt * (derivative + after)


class MeanFieldTempo:
    """TEMPO for every system of a :class:`~nonmarkov.MeanFieldSystem`, with the field
    stepped alongside (module docstring); can be continued.

    Parameters
    ----------
    mean_field_system : the systems and the field equation.
    bath_list : one :class:`~nonmarkov.Bath` per system (its dimension).
    parameters : TempoParameters shared by all systems.
    initial_state_list : one (d_i, d_i) density matrix per system (any finite
        (d_i, d_i) operator is accepted; the field equation sees it as given).
    initial_field : complex field at ``start_time``.
    start_time : time of the initial states.
    unique : merge Liouville indices with equal coupling eigenvalue pairs.
    backend_config : accepted for OQuPy scripts and ignored.
    name, description : optional text.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).
    """

    def __init__(
        self,
        mean_field_system: MeanFieldSystem,
        bath_list: Sequence[Bath],
        parameters: TempoParameters,
        initial_state_list: Sequence[Any],
        initial_field: complex,
        start_time: float = 0.0,
        unique: bool = False,
        backend_config: dict | None = None,
        name: str | None = None,
        description: str | None = None,
        options: EngineOptions | None = None,
    ):
        checks.backend_config(backend_config, "MeanFieldTempo")
        self._system = _check_mean_field_system(mean_field_system)
        systems = self._system.system_list
        baths = _check_list(bath_list, "bath_list", len(systems))
        for i, (system, bath) in enumerate(zip(systems, baths)):
            if not isinstance(bath, Bath):
                raise TypeError(f"bath_list[{i}] must be a Bath; got {type(bath).__name__}")
            if bath.dimension != system.dimension:
                raise ValueError(
                    f"bath_list[{i}] has dimension {bath.dimension}, its system {system.dimension}"
                )
        self._parameters = checks.tempo_parameters(parameters)
        checks.correlation_time(self._parameters)
        states = _check_states(initial_state_list, self._system)
        field = _check_field(initial_field)
        self._start_time = validation.real_number(start_time, "start_time")
        unique = validation.boolean(unique, "unique")
        self.name = "Unnamed MeanFieldTempo" if name is None else str(name)
        self.description = "" if description is None else str(description)
        dt = self._parameters.dt
        self._field_stepper = _FieldStepper(self._system, dt, self._start_time)
        self._field_stepper.derivative(0, states, field)  # a bad field equation fails here
        self._propagators = [
            system.get_propagators(
                dt,
                self._start_time,
                self._parameters.subdiv_limit,
                self._parameters.liouvillian_epsrel,
            )
            for system in systems
        ]
        engine_options = resolve(options)
        self._windows = [
            TempoWindow(bath, self._parameters, unique, engine_options) for bath in baths
        ]
        self._states = states
        self._initial_states = states
        self._field = field
        self._step = 0
        self._dynamics = MeanFieldDynamics(name=self.name, description=self.description)
        self._dynamics.add(self._start_time, states, field)

    @property
    def max_bond_dimension(self) -> int:
        """Largest MPS bond dimension reached so far, over all systems."""
        return max(window.max_bond_dimension for window in self._windows)

    def compute(self, end_time: float, progress_type: str | None = None) -> MeanFieldDynamics:
        """Propagate up to ``end_time`` (continuing from where it stopped); returns
        the :class:`~nonmarkov.MeanFieldDynamics` so far."""
        end_time = validation.real_number(end_time, "end_time")
        progress_type = check_progress_type(progress_type)
        dt = self._parameters.dt
        if end_time < self._start_time:
            raise ValueError(f"end_time ({end_time}) is before start_time ({self._start_time})")
        current = self._start_time + self._step * dt
        num_steps = max(int(round((end_time - current) / dt)), 0)
        systems = self._system.system_list
        total = self._step + num_steps
        checks.affordable_run(
            num_steps,
            max(system.dimension for system in systems),
            (len(self._dynamics) + num_steps) * len(systems),
            "MeanFieldTempo",
            min(self._parameters.dkmax or total, total),
            members=len(systems),
            unit="system steps",
            cause=f"end_time={end_time:g}, dt={dt:g}, {len(systems)} systems",
        )
        stepper = self._field_stepper
        with hot_loop_threads(), Progress(num_steps, progress_type, "mean-field TEMPO") as progress:
            for _ in range(num_steps):
                step, field = self._step, self._field
                derivative = stepper.derivative(step, self._states, field)
                states = []
                for window, propagators, state in zip(
                    self._windows, self._propagators, self._states
                ):
                    halves = propagators(step, field, derivative)
                    if step == 0:
                        states.append(window.start(state, *halves))
                    else:
                        states.append(window.advance([halves])[0])
                for i, state in enumerate(states):
                    checks.finite_states(
                        [state],
                        step + 1,
                        self._start_time,
                        dt,
                        f"MeanFieldTempo (system {i})",
                        initial=self._initial_states[i],
                    )
                self._field = stepper.next(step, field, derivative, states)
                self._states = states
                self._step += 1
                self._dynamics.add(self._start_time + self._step * dt, states, self._field)
                progress.set_postfix(bond=self.max_bond_dimension)
                progress.update()
        return self._dynamics

    def get_dynamics(self) -> MeanFieldDynamics:
        """The dynamics computed so far."""
        return self._dynamics


def compute_dynamics_with_field(
    mean_field_system: MeanFieldSystem,
    initial_field: complex,
    process_tensor_list: Sequence[Any] | None = None,
    dt: float | None = None,
    num_steps: int | None = None,
    initial_state_list: Sequence[Any] | None = None,
    start_time: float = 0.0,
    control_list: Sequence[Control | None] | None = None,
    record_all: bool = True,
    subdiv_limit: int | None = config.DEFAULT_SUBDIV_LIMIT,
    liouvillian_epsrel: float = config.DEFAULT_LIOUVILLIAN_EPSREL,
    progress_type: str | None = None,
    options: EngineOptions | None = None,
) -> MeanFieldDynamics:
    """The dynamics of a mean-field system from process tensors (module docstring).

    Parameters
    ----------
    mean_field_system : the systems and the field equation.
    initial_field : complex field at ``start_time``.
    process_tensor_list : per system a process tensor, a list of them
        (independent baths) or None (no bath); all on one time grid.
    dt, num_steps : the grid; taken from the process tensors where None.
    initial_state_list : one (d_i, d_i) density matrix per system (any finite
        (d_i, d_i) operator is accepted; the field equation sees it as given).
    start_time : time of the initial states.
    control_list : per system a :class:`~nonmarkov.Control` or None
        (as in :func:`~nonmarkov.compute_dynamics`).
    record_all : record every step, or only the initial and the final states.
    subdiv_limit, liouvillian_epsrel : quadrature of the Liouvillians.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.
    options : engine options (None: the library default).

    Returns a :class:`~nonmarkov.MeanFieldDynamics`. A process tensor serves
    any field: build it once and reuse it for many field equations.
    """
    system = _check_mean_field_system(mean_field_system)
    systems = system.system_list
    n = len(systems)
    if initial_state_list is None:
        raise ValueError("initial_state_list must be given: one density matrix per system")
    states = _check_states(initial_state_list, system)
    field = _check_field(initial_field)
    start_time = validation.real_number(start_time, "start_time")
    progress_type = check_progress_type(progress_type)
    record_all = validation.boolean(record_all, "record_all")
    pt_items = (
        [None] * n
        if process_tensor_list is None
        else _check_list(process_tensor_list, "process_tensor_list", n)
    )
    controls = [None] * n if control_list is None else _check_list(control_list, "control_list", n)
    process_tensors = []
    for i, (item, member) in enumerate(zip(pt_items, systems)):
        pts = as_process_tensor_list(item)
        for pt in pts:
            if pt.dimension != member.dimension:
                raise ValueError(
                    f"process_tensor_list[{i}] has dimension {pt.dimension}, its system "
                    f"{member.dimension}"
                )
        process_tensors.append(pts)
    for i, (control, member) in enumerate(zip(controls, systems)):
        if control is not None and not isinstance(control, Control):
            raise TypeError(f"control_list[{i}] must be a Control or None")
        if control is not None and control.dimension != member.dimension:
            raise ValueError(
                f"control_list[{i}] has dimension {control.dimension}, its system "
                f"{member.dimension}"
            )
    everything = [pt for pts in process_tensors for pt in pts]
    dt, num_steps = resolve_grid(everything, dt, num_steps)
    checks.affordable_run(
        num_steps,
        max(member.dimension for member in systems),
        (num_steps + 1 if record_all else 2) * n,
        "compute_dynamics_with_field",
        members=n,
        unit="system steps",
        cause=f"num_steps={num_steps}, {n} systems",
    )
    stepper = _FieldStepper(system, dt, start_time)
    propagators = [
        member.get_propagators(dt, start_time, subdiv_limit, liouvillian_epsrel)
        for member in systems
    ]
    engine = chain_engine(options)
    prepared = [engine.prepare(pts, num_steps, record_all=True) for pts in process_tensors]
    schedules = [chain_controls(control, dt, start_time) for control in controls]
    recorded = []
    vectors = []
    for rho0, (initial_control, _), ready in zip(states, schedules, prepared):
        vector = rho0.reshape(-1)
        if initial_control is not None:
            vector = initial_control @ vector
        recorded.append(vector.reshape(rho0.shape))
        vectors.append(to_backend(vector.reshape((1,) * len(ready) + (-1,))))
    stepper.derivative(0, recorded, field)  # a bad field equation fails here
    dynamics = MeanFieldDynamics(name="dynamics with field")
    dynamics.add(start_time, recorded, field)
    with (
        engine.stepping(),  # the read-outs between steps run where the steps do
        hot_loop_threads(),
        Progress(num_steps, progress_type, "dynamics with field") as progress,
    ):
        for step in range(num_steps):
            derivative = stepper.derivative(step, recorded, field)
            next_recorded = []
            for i, member in enumerate(systems):
                first, second = propagators[i](step, field, derivative)
                schedule = schedules[i][1]
                before, after = (None, None) if schedule is None else schedule(step)
                vectors[i] = engine.step(
                    vectors[i], step, first, second, prepared[i], before, after
                )
                caps = [pt.cap(step) for pt in prepared[i]]
                state = default_np.asarray(np.to_host(close_bonds(vectors[i], caps)))
                next_recorded.append(state.reshape(member.dimension, member.dimension))
            for i, state in enumerate(next_recorded):
                checks.finite_states(
                    [state],
                    step + 1,
                    start_time,
                    dt,
                    f"compute_dynamics_with_field (system {i})",
                    controls[i] is None,
                    initial=states[i],
                )
            field = stepper.next(step, field, derivative, next_recorded)
            recorded = next_recorded
            if record_all or step == num_steps - 1:
                dynamics.add(start_time + (step + 1) * dt, recorded, field)
            progress.update()
    return dynamics
