"""A uniform (time-translation-invariant) process tensor for a stationary bath.

With a memory cut of K steps every influence factor couples points at most K
steps apart, so the influence of the past on the future at any cut is a
function g(f) of the next K classes f = (c_{k+1}, ..., c_{k+K}) only. Take
g_k(f) to be the product of all factors that involve a point of f and no
point later than k + K. One step maps it linearly (c = c_{k+1}):

    g_{k+1}(f') = g_k(c, f'_1..f'_{K-1}) I_0(f'_K) prod_{j=1}^{K} I_j(f'_K, f'_{K-j}),

with f'_0 = c: the oldest point of the window becomes the step's index and a
new point enters at the far end. The map is the same at every step, and a
traced future reads g out with the weight 1/d on each diagonal index in every
slot of f (all factors whose newer point is diagonal equal 1).

The exact bond (the m^K functions of f) is compressed to the span of the
functions a past of K points can produce: the Schmidt vectors, at the
middle cut, of the influence of 2K points (built with the memory-window
kernels). The first K points, split off on the way, form the start block (the
bath with no past, expressed in the same basis at its last bond). Result: K
start tensors, one tensor T[b, b', c] that repeats every later step (cf. Link,
Tu & Strunz, PRL 132, 200403 (2024); the repeating block of Cygorek et al.,
PRX 14, 011010 (2024)), and an end vector.

- The end vector is the fixed point of the trace-weighted transfer matrix
  E = sum_c w_c T[:, :, c] (its leading right eigenvector); T is divided by
  the leading eigenvalue, so that a traced future is stationary.
- Dynamics: the state v[b, alpha] costs O(chi^2 d^2) per step and constant
  memory, for any number of steps.
- Steady state: the leading eigenvector of the one-step transfer operator
  (system propagator times T) on (b, alpha), read out with the end vector.

Untruncated (tiny epsrel) this reproduces sequential PT-TEMPO with the same
memory cut to rounding.

The 2K window steps of the build run on the window engine of the active
backend (:mod:`nonmarkov.engines`); the rest of the build (Schmidt cut,
overlaps, the non-symmetric eigensolver) runs on the host. The dynamics runs
on the chain engine; the steady state builds its transfer matrix on the active
backend and finds its eigenvector on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as default_np

from .. import validation as check
from .._threads import hot_loop_threads
from ..backends import use_backend
from ..backends.host import host_eig, to_backend
from ..backends.numerical_backend import np
from ..engines import finalize_window_engine
from ..influence import DiscretisedInfluence
from ..io.results import Dynamics
from ..kernels.blocks import (
    contract_from_newest,
    dense_transfer,
    left_orthonormalise,
    shifted_overlap,
    split_last_bond,
)
from ..model.bath import Bath
from ..model.parameters import TempoParameters
from ..model.system import BaseSystem, System
from ..options import EngineOptions, resolve
from ..process_tensors.base import trace_weights
from ..process_tensors.uniform import UniformProcessTensor
from ..progress import Progress, check_progress_type
from . import checks
from .dynamics import compute_dynamics
from .pt_tempo import first_point, pt_window_spec


def _window_steps(
    influence: DiscretisedInfluence,
    k: int,
    epsrel: float,
    options: EngineOptions,
    progress: Progress,
) -> tuple[list[Any], list[Any], int]:
    """The 2K window steps of the build (PT-TEMPO's first 2K steps), by the window
    engine of the active backend (host arrays out).

    Returns the window (points K..2K-1, newest first), the finalised sites
    (points 0..K-1, oldest first) and the largest bond.
    """
    front, log_scale = first_point(influence)
    engine = finalize_window_engine(pt_window_spec(influence, front, log_scale, epsrel, k), options)
    progress.update()
    finalized: list[Any] = []
    max_bond = 1
    done_steps = 1
    engine.expect_steps(2 * k - done_steps)
    while done_steps < 2 * k:
        count = min(engine.steps_per_call, 2 * k - done_steps)
        sites, ranks = engine.advance_finalize(count)
        finalized.extend(site for site, _ in sites if site is not None)
        max_bond = max([max_bond] + ranks)
        done_steps += count
        progress.set_postfix(bond=max_bond)
        progress.update(count)
    window, _ = engine.host_window()
    return window, finalized, max_bond


def build_uniform_tensors(
    influence: DiscretisedInfluence,
    dkmax: int,
    epsrel: float,
    build_epsrel: float | None = None,
    progress_type: str = "silent",
    title: str = "uniform PT",
    options: EngineOptions | None = None,
) -> dict[str, Any]:
    """Start block, repeating tensor and end vector of the uniform PT (host arrays).

    Runs the memory window over 2K points (K = ``dkmax``): the first K points
    are split off as the start block (orthonormal tensors, the bath with no
    past), the last K stay in the window. The window's Schmidt vectors at its
    bond to the start block (cut with ``epsrel``) span the functions g of the
    module docstring; the window itself is truncated with ``build_epsrel``
    (default ``epsrel``) and advanced by the window engine of the active
    backend (``options``); the rest runs on the host.
    Returns a dict with 'start_tensors' (K tensors
    T[b, b', c]), 'tensor' (chi, chi, m), 'end' (chi,), 'eigenvalue' (the
    factor T was divided by), 'singular_values' and 'max_bond' (largest bond
    during the build).
    """
    k = int(dkmax)
    build_epsrel = epsrel if build_epsrel is None else build_epsrel
    with Progress(2 * k, progress_type, title) as progress:
        window, finalized, max_bond = _window_steps(
            influence, k, build_epsrel, resolve(options), progress
        )
    with use_backend("numpy"):
        return _uniform_tensors(influence, k, epsrel, window, finalized, max_bond)


def _uniform_tensors(
    influence: DiscretisedInfluence,
    k: int,
    epsrel: float,
    window: list[Any],
    finalized: list[Any],
    max_bond: int,
) -> dict[str, Any]:
    """The rest of :func:`build_uniform_tensors` from the window after 2K steps."""
    own = to_backend(influence.own_factor())
    # the repeating tensor: couplings after an infinitely long past
    lags = [to_backend(influence.stationary_lag_matrix(j)) for j in range(1, k + 1)]
    # window: points k..2k-1 (newest first); finalized: points 0..k-1 (oldest first)
    chain, singular_values, coefficients = split_last_bond(left_orthonormalise(window), epsrel)
    weights = trace_weights(influence.classes, influence.bath.dimension)
    weights_b = to_backend(weights)
    moved = shifted_overlap(chain, own, lags)  # M[c, s', s]
    host_tensor = default_np.transpose(default_np.asarray(np.to_host(moved)), (2, 1, 0))
    trace_end = default_np.asarray(
        np.to_host(contract_from_newest(chain, [weights_b] * len(chain)))
    )
    values, vectors = host_eig(host_tensor @ weights)
    values = default_np.asarray(np.to_host(values))
    vectors = default_np.asarray(np.to_host(vectors))
    leading = int(default_np.argmax(default_np.abs(values)))
    eigenvalue = complex(values[leading])
    end = vectors[:, leading]
    # the eigenvector's scale: that of the exact cap of the uncompressed bond
    end = end * (complex(default_np.vdot(end, trace_end)) / complex(default_np.vdot(end, end)))
    # start block: T[r, l, c] from the split-off sites M[l, c, r]; its last
    # bond goes to the Schmidt basis
    start_tensors = [
        default_np.transpose(default_np.asarray(np.to_host(site)), (2, 0, 1)) for site in finalized
    ]
    coefficients = default_np.asarray(np.to_host(coefficients))
    start_tensors[-1] = default_np.einsum("rbc,sb->rsc", start_tensors[-1], coefficients)
    # normalise: all-diagonal (traced) history evaluates to 1, spread over the block
    vector = end
    for tensor in reversed(start_tensors):
        vector = tensor @ weights @ vector
    total = complex(vector[0])
    factor = total ** (-1.0 / len(start_tensors))
    start_tensors = [tensor * factor for tensor in start_tensors]
    return {
        "start_tensors": start_tensors,
        "tensor": host_tensor / eigenvalue,
        "end": end,
        "eigenvalue": eigenvalue,
        "singular_values": default_np.asarray(np.to_host(singular_values)),
        "max_bond": max_bond,
    }


class UniformPtBuilder:
    """Builds a :class:`UniformProcessTensor` of ``bath`` (stationary, memory cut).

    Parameters
    ----------
    bath : the Bath.
    parameters : TempoParameters with tcut or dkmax (required).
    unique : merge Liouville indices with equal coupling eigenvalue pairs.
    name, description : optional text.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).

    Attributes: ``build_epsrel`` (set before ``compute``) truncates the window
    during the build (None: ``parameters.epsrel``); after ``compute``,
    ``info`` holds the leading eigenvalue T was divided by, the Schmidt values
    of the cut and the largest bond of the build.
    """

    def __init__(
        self,
        bath: Bath,
        parameters: TempoParameters,
        unique: bool = False,
        name: str | None = None,
        description: str | None = None,
        options: EngineOptions | None = None,
    ):
        self._options = resolve(options)
        checks.flat_truncation(self._options, "uniform")
        if not isinstance(bath, Bath):
            raise TypeError(f"bath must be a Bath; got {type(bath).__name__}")
        self._parameters, self._memory = checks.memory_parameters(parameters)
        checks.correlation_time(self._parameters)
        checks.affordable_run(
            2 * self._memory,
            bath.dimension,
            0,
            "pt_uniform_compute",
            self._memory,
            cause=f"dkmax={self._memory}: 2 dkmax window steps",
            remedy="use a shorter memory cut (a smaller dkmax or tcut)",
        )
        self.bath = bath
        self.unique = check.boolean(unique, "unique")
        self.name = "Unnamed UniformProcessTensor" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._influence = DiscretisedInfluence.from_parameters(bath, parameters, unique)
        if self._influence.lumps:  # the coupling after an infinite past (may diverge)
            self._influence.leaving_rows(None)
        self._result: UniformProcessTensor | None = None
        self.build_epsrel: float | None = None
        self.info: dict[str, Any] = {}

    def compute(self, progress_type: str | None = None) -> UniformProcessTensor:
        """Build the uniform PT (once; later calls return the same object)."""
        progress_type = check_progress_type(progress_type)
        if self._result is None:
            parameters = self._parameters
            # the 2K window steps run on the window engine of the active backend; the
            # rest (Schmidt cut, overlaps, non-symmetric eigensolver) is host work,
            # small and of changing shapes that op-by-op JAX would compile anew each time
            with hot_loop_threads():
                built = build_uniform_tensors(
                    self._influence,
                    self._memory,
                    parameters.epsrel,
                    self.build_epsrel,
                    progress_type,
                    options=self._options,
                )
            to_eigen, from_eigen = self._influence.liouville_transforms()
            self.info = {key: built[key] for key in ("eigenvalue", "singular_values", "max_bond")}
            self._result = UniformProcessTensor(
                self.bath.dimension,
                parameters.dt,
                built["start_tensors"],
                built["tensor"],
                built["end"],
                transform_in=to_eigen,
                transform_out=from_eigen,
                classes=self._influence.classes,
                name=self.name,
                description=self.description,
            )
        return self._result


def pt_uniform_compute(
    bath: Bath,
    parameters: TempoParameters,
    unique: bool = False,
    progress_type: str | None = None,
    name: str | None = None,
    description: str | None = None,
    options: EngineOptions | None = None,
) -> UniformProcessTensor:
    """The uniform process tensor of ``bath`` for ``parameters`` (memory cut required).

    Cost: about 2K memory-window steps (K = dkmax), independent of how many
    steps it is used for.
    """
    return UniformPtBuilder(
        bath, parameters, unique=unique, name=name, description=description, options=options
    ).compute(progress_type=progress_type)


def _check_uniform(system: Any, uniform_pt: Any) -> None:
    if not isinstance(system, BaseSystem):
        raise TypeError(
            f"system must be a System or TimeDependentSystem; got {type(system).__name__}"
        )
    if not isinstance(uniform_pt, UniformProcessTensor):
        raise TypeError(
            f"uniform_pt must be a UniformProcessTensor; got {type(uniform_pt).__name__}"
        )
    if uniform_pt.dimension != system.dimension:
        raise ValueError(
            f"uniform_pt has dimension {uniform_pt.dimension} but the system has "
            f"dimension {system.dimension}"
        )


def compute_uniform_dynamics(
    system: BaseSystem,
    initial_state: Any,
    num_steps: int,
    uniform_pt: UniformProcessTensor,
    start_time: float = 0.0,
    record_all: bool = True,
    progress_type: str | None = None,
    options: EngineOptions | None = None,
) -> Dynamics:
    """Reduced dynamics for ``num_steps`` steps from a uniform process tensor.

    :func:`~nonmarkov.compute_dynamics` with ``uniform_pt`` for ``num_steps``
    steps (the uniform process tensor is one like any other). Cost
    O(num_steps chi^2 d^2); with ``record_all=False`` the result holds only the
    first and the last state, and the memory does not grow with ``num_steps``.

    Returns a :class:`Dynamics` with times start_time + k dt, k = 0..num_steps.
    """
    _check_uniform(system, uniform_pt)
    num_steps = check.positive_integer(num_steps, "num_steps", minimum=0)
    return compute_dynamics(
        system,
        initial_state,
        num_steps=num_steps,
        start_time=start_time,
        process_tensor=uniform_pt,
        record_all=record_all,
        progress_type=progress_type,
        options=options,
    )


def compute_steady_state(
    system: System, uniform_pt: UniformProcessTensor, hermitian: bool = True
) -> default_np.ndarray:
    """Steady state (d, d) of ``system`` coupled to the bath of ``uniform_pt``.

    The leading eigenvector v[b, alpha] of the one-step transfer operator
    (half step, PT step, half step on the state (chi, d^2)), computed on the
    host, read out with the end vector and normalised to trace 1.
    ``hermitian`` returns (rho + rho^dagger) / 2 (the truncated PT leaves a
    tiny anti-Hermitian part).
    """
    _check_uniform(system, uniform_pt)
    hermitian = check.boolean(hermitian, "hermitian")
    if not isinstance(system, System):
        raise TypeError(
            f"system must be a time-independent System for a steady state; "
            f"got {type(system).__name__}"
        )
    d = system.dimension
    first, second = system.get_propagators(uniform_pt.time_step())(0)
    before = to_backend(uniform_pt.transform_in @ first)
    after = to_backend(second @ uniform_pt.transform_out)
    transfer = dense_transfer(
        to_backend(uniform_pt.tensor), np.asarray(uniform_pt.classes), before, after
    )
    values, vectors = host_eig(transfer)
    values = default_np.asarray(np.to_host(values))
    vectors = default_np.asarray(np.to_host(vectors))
    leading = int(default_np.argmax(default_np.abs(values)))
    state = vectors[:, leading].reshape(uniform_pt.bond_dimension, d * d)
    rho = (uniform_pt.end_vector @ state).reshape(d, d)
    trace = complex(default_np.trace(rho))
    if abs(trace) == 0.0:
        raise ValueError(
            "the leading eigenvector of the transfer operator has zero trace; "
            "the process tensor is too strongly truncated"
        )
    rho = rho / trace
    if hermitian:
        rho = 0.5 * (rho + rho.conj().T)
    return rho
