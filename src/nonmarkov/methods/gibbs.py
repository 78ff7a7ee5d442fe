"""Gibbs TEMPO: the mean-force Gibbs state of a system strongly coupled to a bath.

The state Tr_B exp(-beta H) / Tr exp(-beta H) of H = H_S + S B + H_B is a
TEMPO path integral in imaginary time tau in [0, beta] (beta = 1/T): the
operator X(tau) = Tr_B[exp(-(beta - tau) H_B) exp(-tau H)] / Z_B grows from
X(0) = 1 by steps of exp(-delta H_S) (symmetric splitting, delta = beta /
n_steps), the bath coupling every point of the path to every earlier one
through the imaginary-time correlation (:class:`~nonmarkov.influence.ImaginaryTimeInfluence`).
X(beta) = Tr_B exp(-beta H) / Z_B, whose trace is the mean-force partition
function Z / Z_B.

X is carried as a vector of d^2 entries X[r, c] in the eigenbasis of S: the
path lives on the row r, the column c rides along, so one run gives the whole
operator. Any Hermitian coupling operator works (the eigenbasis is a change of
basis of H_S), degenerate ones included. The memory window is advanced by a
window engine, like real-time TEMPO: the NumPy kernels or compiled JAX.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as default_np

from .._threads import hot_loop_threads
from ..engines import trace_window_engine
from ..engines.base import TraceWindowEngine, WindowSpec
from ..influence import ImaginaryTimeInfluence
from ..io.results import Dynamics
from ..model.bath import Bath
from ..model.correlations import CustomSD
from ..model.parameters import GibbsParameters
from ..model.system import System
from ..options import EngineOptions, resolve
from ..progress import Progress, check_progress_type
from . import checks as check
from .metadata import bath_metadata, dynamics_metadata


def _check_gibbs_model(system: Any, bath: Any, parameters: Any) -> CustomSD:
    """Raise unless the input has an equilibrium state Gibbs TEMPO can compute;
    returns the bath's spectral density."""
    if not isinstance(system, System):
        raise TypeError(
            "system must be a time-independent System (a Gibbs state needs a fixed "
            f"Hamiltonian); got {type(system).__name__}"
        )
    check.model(system, bath)
    if len(system.gammas) > 0:
        raise ValueError(
            "Gibbs TEMPO needs a system without Lindblad terms: a Markovian "
            "dissipator has no equilibrium state of H_S + H_I + H_B (remove gammas "
            "and lindblad_operators, or model that environment as a bath)"
        )
    correlations = bath.correlations
    if not isinstance(correlations, CustomSD):
        raise TypeError(
            "Gibbs TEMPO needs the bath's spectral density (CustomSD or PowerLawSD): "
            "imaginary-time correlations cannot be continued from a real-time "
            f"C(tau); got {type(correlations).__name__}"
        )
    if correlations.temperature <= 0.0:
        raise ValueError(
            "Gibbs TEMPO needs a bath temperature > 0 (the imaginary-time interval "
            "is 1/T); got temperature=0"
        )
    if not isinstance(parameters, GibbsParameters):
        raise TypeError(f"parameters must be GibbsParameters; got {type(parameters).__name__}")
    return correlations


class GibbsTempo:
    """The mean-force Gibbs state by TEMPO in imaginary time.

    Parameters
    ----------
    system : System (time-independent, no Lindblad terms), dimension d.
    bath : Bath with a spectral density (CustomSD/PowerLawSD) at T > 0 and any
        Hermitian coupling operator (d, d).
    parameters : GibbsParameters (n_steps, epsrel).
    backend_config : accepted for OQuPy scripts and ignored (see ``Tempo``).
    name, description : optional text.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).
    """

    def __init__(
        self,
        system: System,
        bath: Bath,
        parameters: GibbsParameters,
        backend_config: dict | None = None,
        name: str | None = None,
        description: str | None = None,
        options: EngineOptions | None = None,
    ):
        check.backend_config(backend_config, "GibbsTempo")
        self._temperature = float(_check_gibbs_model(system, bath, parameters).temperature)
        n = parameters.n_steps
        check.affordable_run(n, system.dimension, n + 1, "GibbsTempo", n, cause=f"n_steps={n}")
        self.system = system
        self.bath = bath
        self._parameters = parameters
        self.name = "Unnamed GibbsTempo" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._options = resolve(options)
        self._influence = ImaginaryTimeInfluence(bath, parameters.n_steps)
        self._dynamics = Dynamics(
            name=self.name,
            metadata=dynamics_metadata(
                "GibbsTempo",
                system,
                n_steps=parameters.n_steps,
                epsrel=parameters.epsrel,
                bath=bath_metadata(bath),
            ),
        )
        self._engine: TraceWindowEngine | None = None
        self._step = 0
        self._log_trace = 0.0
        self._shift = 0.0  # the energy subtracted from H_S (set by the first step)
        self.max_bond_dimension = 1

    @property
    def dimension(self) -> int:
        """System dimension d."""
        return self.system.dimension

    @property
    def temperature(self) -> float:
        """The bath temperature T."""
        return self._temperature

    @property
    def parameters(self) -> GibbsParameters:
        """The GibbsParameters in use."""
        return self._parameters

    def _energy_shift(self, energies: default_np.ndarray) -> float:
        """A constant E subtracted from H_S so that every path weight stays O(1):
        E_min - lambda_n max s^2, with beta lambda_n the discrete sum rule."""
        influence = self._influence
        n = self._parameters.n_steps
        beta_lambda = n * influence.eta(0) + sum(
            (n - lag) * influence.eta(lag) for lag in range(1, n)
        )
        largest = float(default_np.max(influence.values**2))
        return float(energies[0]) - self.temperature * beta_lambda * largest

    def _start(self) -> default_np.ndarray:
        """The first point of the path; returns X(delta) / Tr (d, d)."""
        influence = self._influence
        d = self.dimension
        unitary = self.bath.unitary_transform
        hamiltonian = unitary.conj().T @ self.system.hamiltonian @ unitary
        energies, vectors = default_np.linalg.eigh(0.5 * (hamiltonian + hamiltonian.conj().T))
        self._shift = self._energy_shift(energies)
        delta = influence.delta

        def left(tau: float) -> default_np.ndarray:
            """exp(-tau (H - shift)) acting from the left on vec(X), (d^2, d^2)."""
            factor = (vectors * default_np.exp(-tau * (energies - self._shift))) @ vectors.conj().T
            return default_np.kron(factor, default_np.eye(d))

        half, whole = left(0.5 * delta), left(delta)
        self._between, self._second = whole, half
        classes = default_np.repeat(influence.classes, d)  # the class of x = r d + c is that of r
        own = influence.own_factor()[classes]
        front = own * (half @ default_np.eye(d).reshape(-1))
        norm = float(default_np.linalg.norm(front))
        self._out_map = default_np.kron(unitary, unitary.conj())
        projector = default_np.zeros((d * d, influence.num_classes))
        projector[default_np.arange(d * d), classes] = 1.0
        spec = WindowSpec(
            front=front / norm,
            log_scale=math.log(norm),
            projector=projector,
            first=influence.lag_matrix(1)[classes] * own[:, None],
            carrier=classes,
            lag_rows=influence.lag_matrix,
            out_map=self._out_map,
            epsrel=self._parameters.epsrel,
            memory=None,
            oldest="trace",
        )
        self._engine = trace_window_engine(spec, self._options)
        return self._out_map @ (half @ front)

    def _record(self, vector: default_np.ndarray) -> None:
        """Add X(tau_k) (vectorised, up to a positive factor) as a unit-trace state."""
        d = self.dimension
        matrix = default_np.asarray(vector).reshape(d, d)
        trace = complex(default_np.trace(matrix))
        if not math.isfinite(abs(trace)) or trace.real <= 0.0:
            raise ValueError(
                f"Gibbs TEMPO broke down at imaginary-time step {self._step} (trace "
                f"{trace}); decrease epsrel or increase n_steps"
            )
        self._log_trace = math.log(trace.real)
        if self._step == self._parameters.n_steps:  # X(beta) is Hermitian: drop the rounding
            matrix = 0.5 * (matrix + matrix.conj().T)
        self._dynamics.add(self._step * self._influence.delta, matrix / trace.real)

    def compute(self, progress_type: str | None = None) -> Dynamics:
        """Run all ``n_steps`` imaginary-time steps (once; a second call returns the
        same result). Returns the :class:`Dynamics` of the unit-trace operators
        X(tau_k) / Tr X(tau_k) at tau_k = k beta / n_steps, k = 0..n_steps; the
        last one is the mean-force Gibbs state."""
        progress_type = check_progress_type(progress_type)
        n = self._parameters.n_steps
        with hot_loop_threads(), Progress(n - self._step, progress_type, "Gibbs TEMPO") as bar:
            if self._step == 0:
                self._dynamics.add(0.0, default_np.eye(self.dimension) / self.dimension)
                self._step = 1
                self._record(self._start())
                bar.update()
            engine = self._engine
            if engine is None:
                raise RuntimeError("the window engine is made by the first step")
            engine.expect_steps(n - self._step)
            while self._step < n:
                count = min(engine.steps_per_call, n - self._step)
                readouts, ranks = engine.advance([(self._between, self._second)] * count)
                self.max_bond_dimension = max([self.max_bond_dimension] + list(ranks))
                for vector in readouts:
                    self._step += 1
                    self._record(vector)
                bar.set_postfix(bond=self.max_bond_dimension)
                bar.update(count)
        return self._dynamics

    def get_dynamics(self) -> Dynamics:
        """The imaginary-time Dynamics computed so far."""
        return self._dynamics

    def get_state(self) -> default_np.ndarray:
        """The mean-force Gibbs state (d, d), Hermitian with unit trace."""
        if self._step < self._parameters.n_steps:
            raise ValueError("call compute() before get_state()")
        state = default_np.asarray(self._dynamics.states[-1])
        return state / default_np.trace(state)

    @property
    def log_partition_function(self) -> float:
        """log(Z / Z_B) = log Tr_S Tr_B exp(-beta H) - log Tr_B exp(-beta H_B): minus
        beta times the free energy the system adds (computed with ``compute``)."""
        if self._step < self._parameters.n_steps:
            raise ValueError("call compute() before log_partition_function")
        return self._log_trace - self._shift / self.temperature


def gibbs_tempo_compute(
    system: System,
    bath: Bath,
    parameters: GibbsParameters,
    backend_config: dict | None = None,
    progress_type: str | None = None,
    name: str | None = None,
    description: str | None = None,
    *,
    options: EngineOptions | None = None,
) -> default_np.ndarray:
    """One-call Gibbs TEMPO: the mean-force Gibbs state (d, d) of ``system`` with
    ``bath`` (arguments as :class:`GibbsTempo`; OQuPy's positional order)."""
    gibbs = GibbsTempo(system, bath, parameters, backend_config, name, description, options)
    gibbs.compute(progress_type=progress_type)
    return gibbs.get_state()
