"""PT-TEBD: a chain of small systems, each site with its own non-Markovian bath.

The chain state is an MPS of vectorised density matrices (Liouville space),
one tensor per site with an extra *augmented* leg: the open bond of that
site's process tensor, which carries the bath's memory (Fux et al.,
arXiv:2201.05529; the process tensor of each bath from any construction,
e.g. :func:`~nonmarkov.pt_tempo_compute`). One step of length dt from t_k to
t_{k+1}:

1. post-controls of step k (:class:`~nonmarkov.ChainControl`);
2. half a step of the chain, e^{L dt/2}, as Trotter layers of two-site gates;
3. each bathed site's process-tensor step k on its augmented leg;
4. the other half step;
5. pre-controls of step k+1, then the read-out at t_{k+1}.

The Trotter layers of a half step tau = dt/2 split the chain's Liouvillian
into the pairs (0, 1), (2, 3), ... ("even") and (1, 2), (3, 4), ... ("odd"),
each pair's Liouvillian with the site terms shared out
(:meth:`~nonmarkov.SystemChain.get_nn_full_liouvillians`): order 1 is
even(tau) odd(tau), order 2 the symmetric even(tau/2) odd(tau) even(tau/2).
Every bond is truncated with ``epsrel`` (:mod:`nonmarkov.kernels.truncation`).

Read-out: each augmented leg is closed with its process tensor's traced
future (the cap, as in :func:`~nonmarkov.compute_dynamics`), the sites not
asked for are traced. States are returned as computed, not divided by the
chain's trace (``norm`` in the results), as in OQuPy.

The MPS lives in a TEBD engine (:func:`nonmarkov.engines.tebd_engine`): NumPy
kernels on the host, compiled kernels on JAX.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as default_np
from scipy import linalg as default_la

from .. import validation as check
from .._threads import hot_loop_threads
from ..engines import chain_engine, tebd_engine
from ..engines.base import PreparedProcessTensor, TebdEngine, TebdSpec
from ..io.results import Dynamics
from ..model.system_chain import ChainControl, SystemChain
from ..options import EngineOptions
from ..process_tensors.base import BaseProcessTensor, TrivialProcessTensor
from ..progress import Progress, check_progress_type
from . import checks

#: relative tolerance within which a process tensor's dt must equal the parameters' dt
DT_TOLERANCE = 1e-10
PT_TEBD_DEFAULT_ORDER = 2
PT_TEBD_DEFAULT_EPSREL = 1.0e-5
TEBD_ORDERS = (1, 2)
#: the cap of an augmented leg of size 1 (no bath, or before the first step)
_NO_BOND = default_np.ones(1, dtype=complex)


class PtTebdParameters:
    """Parameters of a PT-TEBD computation.

    Parameters
    ----------
    dt : time step (> 0); every process tensor must have this one.
    epsrel : truncation threshold of every bond of the chain MPS: the
        discarded singular values at a cut have norm <= epsrel times the
        largest (the library's rule, as in OQuPy).
    order : Trotter order, 1 or 2 (see the module docstring).
    name, description : optional text.
    """

    def __init__(
        self,
        dt: float,
        epsrel: float = PT_TEBD_DEFAULT_EPSREL,
        order: int = PT_TEBD_DEFAULT_ORDER,
        name: str | None = None,
        description: str | None = None,
    ):
        self.dt = dt
        self.epsrel = epsrel
        self.order = order
        self.name = "Unnamed PtTebdParameters" if name is None else str(name)
        self.description = "" if description is None else str(description)

    @property
    def dt(self) -> float:
        """The time step."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._dt = check.positive_number(value, "dt")

    @property
    def epsrel(self) -> float:
        """The truncation threshold."""
        return self._epsrel

    @epsrel.setter
    def epsrel(self, value: float) -> None:
        epsrel = check.positive_number(value, "epsrel")
        if epsrel > 1.0:
            raise ValueError(
                f"epsrel must lie in (0, 1] (the discarded norm relative to the largest "
                f"singular value), as in TempoParameters; got {epsrel}"
            )
        self._epsrel = epsrel

    @property
    def order(self) -> int:
        """The Trotter order, 1 or 2."""
        return self._order

    @order.setter
    def order(self, value: int) -> None:
        order = check.positive_integer(value, "order")
        if order not in TEBD_ORDERS:
            raise ValueError(f"order must be one of {list(TEBD_ORDERS)}; got {order}")
        self._order = order

    def __str__(self) -> str:
        return (
            f"PtTebdParameters {self.name!r}: dt = {self.dt}, epsrel = {self.epsrel}, "
            f"order = {self.order}"
        )


def _as_array(value: Any, name: str) -> default_np.ndarray:
    try:
        array = default_np.array(value, dtype=complex)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be an array of numbers; got {value!r}") from error
    if not default_np.all(default_np.isfinite(array)):
        raise ValueError(f"{name} has NaN or infinite entries")
    return array


class AugmentedMPS:
    """The initial state of a chain: an MPS of vectorised density matrices, in
    Vidal's form, each site with an augmented leg (the open bond of its process
    tensor, 1 at the start).

    Parameters
    ----------
    gammas : one tensor per site, by its rank:

        - rank 1: a vectorised density matrix (d^2,) (product state);
        - rank 2: a density matrix (d, d) (product state);
        - rank 3: (l, d^2, r), an MPS site tensor;
        - rank 4: (l, d^2, r, a), with the augmented leg a last.

        Vectorisation is row-major (vec(rho)[i d + j] = rho[i, j]).
    lambdas : None (all identities), or the n - 1 bond weights: each None,
        a vector of positive numbers (r,) or a diagonal matrix. The chain
        state is gamma_0 lambda_0 gamma_1 lambda_1 ... gamma_{n-1}.
    name, description : optional text.
    """

    def __init__(
        self,
        gammas: Sequence[Any],
        lambdas: Sequence[Any] | None = None,
        name: str | None = None,
        description: str | None = None,
    ):
        if isinstance(gammas, default_np.ndarray) or not isinstance(gammas, Sequence):
            raise TypeError(f"gammas must be a list of arrays (one per site); got {gammas!r}")
        if len(gammas) == 0:
            raise ValueError("gammas must hold at least one site")
        self.name = "Unnamed AugmentedMPS" if name is None else str(name)
        self.description = "" if description is None else str(description)
        tensors = []  # (l, p, r, a)
        for k, gamma in enumerate(gammas):
            array = _as_array(gamma, f"gammas[{k}]")
            if array.ndim == 1:
                array = array.reshape(1, -1, 1, 1)
            elif array.ndim == 2:
                if array.shape[0] != array.shape[1]:
                    raise ValueError(
                        f"gammas[{k}] of rank 2 must be a square density matrix; got {array.shape}"
                    )
                array = array.reshape(1, -1, 1, 1)
            elif array.ndim == 3:
                array = array[:, :, :, None]
            elif array.ndim != 4:
                raise ValueError(f"gammas[{k}] must have rank 1 to 4; got shape {array.shape}")
            p = array.shape[1]
            if math.isqrt(p) ** 2 != p or 0 in array.shape:
                raise ValueError(
                    f"gammas[{k}]: the physical leg must be a vectorised density matrix "
                    f"(d^2 entries); got shape {array.shape}"
                )
            tensors.append(array)
        if tensors[0].shape[0] != 1 or tensors[-1].shape[2] != 1:
            raise ValueError(
                "the outer bonds of the chain (gammas[0] left, gammas[-1] right) must be 1"
            )
        for k in range(len(tensors) - 1):
            if tensors[k].shape[2] != tensors[k + 1].shape[0]:
                raise ValueError(
                    f"bond {k}: gammas[{k}] has right bond {tensors[k].shape[2]}, "
                    f"gammas[{k + 1}] left bond {tensors[k + 1].shape[0]}"
                )
        self._gammas = tensors
        self._lambdas = self._check_lambdas(lambdas)

    def _check_lambdas(self, lambdas: Sequence[Any] | None) -> list[default_np.ndarray]:
        bonds = [t.shape[2] for t in self._gammas[:-1]]
        if lambdas is None:
            return [default_np.ones(b, dtype=complex) for b in bonds]
        if len(lambdas) != len(bonds):
            raise ValueError(
                f"lambdas must hold {len(bonds)} entries (one per bond); got {len(lambdas)}"
            )
        checked = []
        for k, (bond, value) in enumerate(zip(bonds, lambdas)):
            if value is None:
                checked.append(default_np.ones(bond, dtype=complex))
                continue
            array = _as_array(value, f"lambdas[{k}]")
            if array.ndim == 2:
                if array.shape[0] != array.shape[1] or default_np.any(
                    array != default_np.diag(default_np.diagonal(array))
                ):
                    raise ValueError(f"lambdas[{k}] as a matrix must be square and diagonal")
                array = default_np.diagonal(array).copy()
            if array.shape != (bond,):
                raise ValueError(
                    f"lambdas[{k}] must have {bond} entries (bond {k}); got {array.shape}"
                )
            if default_np.any(array.imag != 0) or default_np.any(array.real <= 0):
                raise ValueError(f"lambdas[{k}] must be positive real numbers")
            checked.append(array)
        return checked

    def __len__(self) -> int:
        return len(self._gammas)

    @property
    def gammas(self) -> list[default_np.ndarray]:
        """The site tensors (l, p, r, a) (copies)."""
        return [g.copy() for g in self._gammas]

    @property
    def lambdas(self) -> list[default_np.ndarray]:
        """The bond weights (r,) (copies)."""
        return [lam.copy() for lam in self._lambdas]

    @property
    def physical_dimensions(self) -> list[int]:
        """The Liouville dimension d_k^2 of each site."""
        return [int(g.shape[1]) for g in self._gammas]

    @property
    def augmented_dimensions(self) -> list[int]:
        """The augmented leg of each site."""
        return [int(g.shape[3]) for g in self._gammas]

    def site_tensors(self) -> list[default_np.ndarray]:
        """The chain as a plain MPS (l, p, a, r): each bond weight multiplied into the
        site on its left."""
        sites = []
        for k, gamma in enumerate(self._gammas):
            tensor = default_np.transpose(gamma, (0, 1, 3, 2))
            if k < len(self._lambdas):
                tensor = tensor * self._lambdas[k][None, None, None, :]
            sites.append(tensor)
        return sites


#: how far an initial chain state may be from Hermitian, unit trace and positive
STATE_TOLERANCE = 1e-8


def _check_initial_state(mps: AugmentedMPS) -> None:
    """Raise unless ``mps`` is a physical chain state: every site of product form
    (bonds and augmented leg 1) a density matrix (Hermitian, positive semi-definite),
    and the chain of trace 1 (where the augmented legs are 1 and the trace is defined
    without the process tensors)."""
    gammas = mps.gammas
    for k, gamma in enumerate(gammas):
        if gamma.shape[0] == gamma.shape[2] == gamma.shape[3] == 1:
            d = math.isqrt(gamma.shape[1])
            rho = gamma.reshape(d, d)
            if k < len(gammas) - 1:
                rho = rho * mps.lambdas[k][0]
            deviation = float(default_np.max(default_np.abs(rho - rho.conj().T)))
            if deviation > STATE_TOLERANCE * max(1.0, float(default_np.max(default_np.abs(rho)))):
                raise ValueError(
                    f"initial_augmented_mps: site {k} is not Hermitian (max |rho - rho^dagger| "
                    f"= {deviation:.3g}); a chain state is a density matrix"
                )
            smallest = float(default_np.linalg.eigvalsh(0.5 * (rho + rho.conj().T))[0])
            scale = max(1e-300, abs(complex(default_np.trace(rho))))
            if smallest < -STATE_TOLERANCE * scale:
                raise ValueError(
                    f"initial_augmented_mps: site {k} has a negative eigenvalue "
                    f"({smallest:.3g}); a chain state is positive semi-definite"
                )
    if any(gamma.shape[3] != 1 for gamma in gammas):
        return
    vector = default_np.ones((1,), dtype=complex)
    for tensor in mps.site_tensors():  # (l, p, a, r)
        d = math.isqrt(tensor.shape[1])
        identity = default_np.identity(d, dtype=complex).reshape(-1)
        vector = default_np.einsum("l,lpr,p->r", vector, tensor[:, :, 0, :], identity)
    trace = complex(vector[0])
    if abs(trace - 1.0) > STATE_TOLERANCE**0.5:
        raise ValueError(
            f"initial_augmented_mps has trace {trace:.6g}; the initial chain state must have "
            "trace 1 (normalise it)"
        )


def _dynamics_sites(value: Any, length: int) -> list[int | tuple[int, ...]]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise TypeError(
            f"dynamics_sites must be a list of sites (int) or tuples of sites; got {value!r}"
        )
    checked: list[int | tuple[int, ...]] = []
    for entry in value:
        group = entry if isinstance(entry, tuple) else (entry,)
        if not group:
            raise ValueError("dynamics_sites: an empty tuple of sites")
        for site in group:
            if isinstance(site, bool) or not isinstance(site, (int, default_np.integer)):
                raise TypeError(f"dynamics_sites: a site must be an integer; got {site!r}")
            if not 0 <= site < length:
                raise ValueError(
                    f"dynamics_sites: site {site} is outside the chain (sites 0..{length - 1})"
                )
        if any(b <= a for a, b in zip(group[:-1], group[1:])):
            raise ValueError(f"dynamics_sites: the sites of {entry!r} must be strictly ascending")
        checked.append(int(entry) if not isinstance(entry, tuple) else tuple(int(s) for s in entry))
    return checked


def _groups(entry: int | tuple[int, ...]) -> tuple[int, ...]:
    return entry if isinstance(entry, tuple) else (entry,)


def density_matrix(vector: default_np.ndarray) -> default_np.ndarray:
    """The density matrix (D, D) of sites i < j < ... from their joint state
    (p_i, p_j, ...) with p = d^2 (row-major Liouville index of each site):
    rows (a_i, a_j, ...), columns (b_i, b_j, ...)."""
    dims = [math.isqrt(p) for p in vector.shape]
    split = vector.reshape([x for d in dims for x in (d, d)])
    count = len(dims)
    order = [2 * k for k in range(count)] + [2 * k + 1 for k in range(count)]
    total = int(default_np.prod(dims))
    return default_np.transpose(split, order).reshape(total, total)


class PtTebd:
    """Dynamics of a chain of systems, each site with its own bath, by PT-TEBD.

    Parameters
    ----------
    initial_augmented_mps : :class:`AugmentedMPS`, the chain state at
        ``start_time`` (site k of Liouville dimension d_k^2).
    system_chain : :class:`~nonmarkov.SystemChain` of the same sites.
    process_tensors : a list with one entry per site: a process tensor of
        dimension d_k and time step ``parameters.dt`` (any construction:
        PT-TEMPO, divide and conquer, uniform, from a file), or None (no bath).
    parameters : :class:`PtTebdParameters`.
    chain_control : optional :class:`~nonmarkov.ChainControl` of the same sites.
    start_time : time of the initial state; step k is at start_time + (k -
        start_step) dt.
    start_step : the step of the initial state (the first process-tensor step
        applied is this one).
    dynamics_sites : sites whose reduced states are recorded at every step:
        an int (one site, (d_k, d_k)) or a tuple of ascending sites (their
        joint state, (d_i d_j ..., d_i d_j ...), site i's index first).
    backend_config : OQuPy's backend options; accepted and ignored (with a
        warning if not empty): the engine follows the numerical backend.
    options : :class:`~nonmarkov.options.EngineOptions` (None: the library default).

    Every argument is checked here, before any computation.
    """

    def __init__(
        self,
        initial_augmented_mps: AugmentedMPS,
        system_chain: SystemChain,
        process_tensors: Sequence[BaseProcessTensor | None],
        parameters: PtTebdParameters,
        chain_control: ChainControl | None = None,
        start_time: float = 0.0,
        start_step: int = 0,
        dynamics_sites: Sequence[int | tuple[int, ...]] | None = None,
        backend_config: dict | None = None,
        options: EngineOptions | None = None,
    ):
        if not isinstance(initial_augmented_mps, AugmentedMPS):
            raise TypeError(
                "initial_augmented_mps must be an AugmentedMPS; got "
                f"{type(initial_augmented_mps).__name__}"
            )
        if not isinstance(system_chain, SystemChain):
            raise TypeError(
                f"system_chain must be a SystemChain; got {type(system_chain).__name__}"
            )
        if not isinstance(parameters, PtTebdParameters):
            raise TypeError(f"parameters must be PtTebdParameters; got {type(parameters).__name__}")
        checks.backend_config(backend_config, "PtTebd")
        dims = [int(d) for d in system_chain.hs_dims]
        n = len(dims)
        if len(initial_augmented_mps) != n:
            raise ValueError(
                f"initial_augmented_mps has {len(initial_augmented_mps)} sites, the chain {n}"
            )
        for k, (p, d) in enumerate(zip(initial_augmented_mps.physical_dimensions, dims)):
            if p != d * d:
                raise ValueError(
                    f"site {k}: initial_augmented_mps has a physical leg of {p} (a {math.isqrt(p)}"
                    f"-dimensional site), the chain's site has dimension {d}"
                )
        self._start_step = check.positive_integer(start_step, "start_step", minimum=0)
        _check_initial_state(initial_augmented_mps)
        self._start_time = check.real_number(start_time, "start_time")
        self._pts = self._check_process_tensors(process_tensors, dims, parameters.dt)
        for k, (a, pt) in enumerate(zip(initial_augmented_mps.augmented_dimensions, self._pts)):
            expected = self._bond_before(pt, self._start_step)
            if a != expected:
                raise ValueError(
                    f"site {k}: the augmented leg of initial_augmented_mps is {a}, but the "
                    f"process tensor's bond before step {self._start_step} is {expected}"
                )
        if chain_control is None:
            chain_control = ChainControl(dims)
        self._check_control(chain_control, dims)
        self._chain_control = chain_control
        self._dynamics_sites = _dynamics_sites(dynamics_sites, n)
        self.name = "Unnamed PtTebd"
        self.description = ""
        self._initial = initial_augmented_mps
        self._system_chain = system_chain
        self._parameters = parameters
        self._dims = dims
        self._options = options
        self._engine: TebdEngine | None = None
        self._prepared: list[PreparedProcessTensor | None] = []
        self._half_step: list[list[tuple[int, Any]]] = []
        self._step: int | None = None
        self._results: dict[str, Any] = {}

    # ------------------------------------------------------------------ checks

    @staticmethod
    def _check_process_tensors(
        process_tensors: Any, dims: list[int], dt: float
    ) -> list[BaseProcessTensor | None]:
        if isinstance(process_tensors, (BaseProcessTensor, str)) or not isinstance(
            process_tensors, Sequence
        ):
            raise TypeError(
                "process_tensors must be a list with one process tensor (or None) per site; "
                f"got {type(process_tensors).__name__}"
            )
        if len(process_tensors) != len(dims):
            raise ValueError(
                f"process_tensors has {len(process_tensors)} entries, the chain {len(dims)} sites"
            )
        checked: list[BaseProcessTensor | None] = []
        for k, pt in enumerate(process_tensors):
            if pt is None or isinstance(pt, TrivialProcessTensor):
                checked.append(None)
                continue
            if not isinstance(pt, BaseProcessTensor):
                raise TypeError(
                    f"process_tensors[{k}] must be a process tensor or None; got "
                    f"{type(pt).__name__}"
                )
            if pt.dimension != dims[k]:
                raise ValueError(
                    f"process_tensors[{k}] has dimension {pt.dimension}, site {k} of the chain "
                    f"{dims[k]}"
                )
            if pt.dt is None:
                raise ValueError(f"process_tensors[{k}] has no time step")
            if abs(pt.dt - dt) > DT_TOLERANCE * max(1.0, dt):
                raise ValueError(
                    f"process_tensors[{k}] has dt = {pt.dt}, the PT-TEBD parameters dt = {dt}"
                )
            if pt.num_steps == 0:
                raise ValueError(f"process_tensors[{k}] has no steps")
            checked.append(pt)
        return checked

    @staticmethod
    def _bond_before(pt: BaseProcessTensor | None, step: int) -> int:
        if pt is None or step == 0:
            return 1
        if pt.num_steps is not None and step > pt.num_steps:
            raise ValueError(
                f"start_step {step} is beyond the process tensor's {pt.num_steps} steps"
            )
        tensor, _ = pt.get_step_tensor(step - 1)
        return int(tensor.shape[1])

    @staticmethod
    def _check_control(chain_control: Any, dims: list[int]) -> None:
        if not isinstance(chain_control, ChainControl):
            raise TypeError(
                f"chain_control must be a ChainControl; got {type(chain_control).__name__}"
            )
        if [int(d) for d in chain_control.hs_dims] != dims:
            raise ValueError(
                f"chain_control has site dimensions {chain_control.hs_dims.tolist()}, the "
                f"chain {dims}"
            )

    # ------------------------------------------------------------------ state

    @property
    def step(self) -> int | None:
        """The current step (None before the first :meth:`compute`)."""
        return self._step

    def time(self, step: int) -> float:
        """The time of ``step``."""
        return self._start_time + self._parameters.dt * (step - self._start_step)

    @property
    def chain_control(self) -> ChainControl:
        """The chain's controls (settable; None resets to no controls)."""
        return self._chain_control

    @chain_control.setter
    def chain_control(self, value: ChainControl | None) -> None:
        if value is None:
            value = ChainControl(self._dims)
        self._check_control(value, self._dims)
        self._chain_control = value

    @property
    def max_step(self) -> int | float:
        """The last step the process tensors reach (inf without finite ones)."""
        ends = [pt.num_steps for pt in self._pts if pt is not None and pt.num_steps is not None]
        return min(ends) if ends else math.inf

    def _layers(self) -> list[list[tuple[int, Any]]]:
        """The gate layers of half a step, as (site, gate or site map) lists."""
        tau = 0.5 * self._parameters.dt
        n = len(self._dims)
        if n == 1:
            liouvillian = self._system_chain.site_liouvillians[0]
            return [[(0, default_la.expm(tau * liouvillian))]]
        liouvillians = self._system_chain.get_nn_full_liouvillians()
        plan = (
            [(0, tau), (1, tau)]
            if self._parameters.order == 1
            else [
                (0, tau / 2),
                (1, tau),
                (0, tau / 2),
            ]
        )
        merged: list[list[float]] = []
        for parity, length in plan:
            if parity >= n - 1:
                continue  # no pair of that parity (two sites: no odd pairs)
            if merged and merged[-1][0] == parity:
                merged[-1][1] += length
            else:
                merged.append([parity, length])
        return [
            [(k, default_la.expm(length * liouvillians[k])) for k in range(int(parity), n - 1, 2)]
            for parity, length in merged
        ]

    @property
    def _running(self) -> TebdEngine:
        """The TEBD engine of the run (made by :meth:`initialize`)."""
        if self._engine is None:
            raise RuntimeError("the chain has no engine before initialize()")
        return self._engine

    def initialize(self) -> None:
        """Prepare the engine, the gates and the process tensors; record the initial
        state (after the pre-controls of the start step)."""
        self._step = self._start_step
        self._half_step = self._layers()
        spec = TebdSpec(self._initial.site_tensors(), self._parameters.epsrel)
        self._engine = tebd_engine(spec, self._options)
        chain = chain_engine(self._options)
        self._prepared = []
        for pt in self._pts:
            if pt is None:
                self._prepared.append(None)
                continue
            length = pt.num_steps if pt.num_steps is not None else self._start_step + 1
            self._prepared.append(chain.prepare([pt], length, True)[0])
        pt_bonds = {
            k: (pt.get_bond_dimensions() if pt is not None else default_np.zeros(0, dtype=int))
            for k, pt in enumerate(self._pts)
        }
        self._results = {
            "time": [],
            "norm": [],
            "bond_dimensions": [],
            "dynamics": {entry: Dynamics(name=f"site{entry}") for entry in self._dynamics_sites},
            "pt_bond_dimensions": pt_bonds,
        }
        self._apply_controls(self._step, post=False)
        self._record()

    def _apply_controls(self, step: int, post: bool) -> None:
        controls = self._chain_control.get_single_site_controls(step, post)
        if controls is not None:
            self._running.apply_site_maps([(k, c) for k, c in enumerate(controls) if c is not None])

    def _started(self) -> int:
        """The current step, initialising the chain on the first call."""
        if self._step is None:
            self.initialize()
        if self._step is None:
            raise RuntimeError("PtTebd.initialize did not set the step")
        return self._step

    def _caps(self) -> list[Any]:
        step = self._started()
        caps = []
        for prepared in self._prepared:
            if prepared is None or step == 0:
                caps.append(_NO_BOND)
            else:
                caps.append(prepared.cap(step - 1))
        return caps

    def _read(self, groups: list[tuple[int, ...]]) -> tuple[complex, list[default_np.ndarray]]:
        return self._running.read_out(self._caps(), groups)

    def _record(self) -> None:
        entries = list(self._results["dynamics"])
        norm, vectors = self._read([_groups(entry) for entry in entries])
        time = self.time(self._step)  # type: ignore[arg-type]
        self._results["time"].append(time)
        self._results["norm"].append(norm)
        self._results["bond_dimensions"].append(default_np.array(self._running.bond_dimensions()))
        for entry, vector in zip(entries, vectors):
            self._results["dynamics"][entry].add(time, density_matrix(vector))

    def compute_step(self) -> None:
        """One step (see the module docstring) and its read-out."""
        step = self._started()
        if step + 1 > self.max_step:
            raise ValueError(
                f"step {step + 1} is beyond the process tensors' {self.max_step} steps"
            )
        self._apply_controls(step, post=True)
        self._half()
        self._running.apply_process_steps(
            [
                (k, prepared, step)
                for k, prepared in enumerate(self._prepared)
                if prepared is not None
            ]
        )
        self._half()
        self._step = step + 1
        self._apply_controls(self._step, post=False)
        self._record()

    def _half(self) -> None:
        if len(self._dims) == 1:
            self._running.apply_site_maps(self._half_step[0])
            return
        for layer in self._half_step:
            self._running.apply_gates(layer)

    def compute(self, end_step: int, progress_type: str | None = None) -> dict[str, Any]:
        """Propagate up to step ``end_step`` (absolute; at most the process tensors'
        length) and return the results (:meth:`get_results`)."""
        end_step = check.positive_integer(end_step, "end_step", minimum=0)
        progress_type = check_progress_type(progress_type)
        if end_step > self.max_step:
            raise ValueError(
                f"end_step {end_step} is beyond the process tensors' {self.max_step} steps"
            )
        now = self._start_step if self._step is None else self._step
        count = max(0, end_step - now)
        records = len(self._results.get("time", [])) + count + 1
        state_bytes = sum(
            int(default_np.prod([self._dims[k] for k in _groups(entry)])) ** 2 * 16
            for entry in self._dynamics_sites
        )
        checks.affordable_run(
            count,
            max(self._dims),
            0,
            "PtTebd.compute",
            members=len(self._dims),
            unit="site steps",
            cause=f"end_step={end_step} from step {now}, {len(self._dims)} sites",
            held_bytes=records * state_bytes,
        )
        missed = sorted(
            step for step in self._chain_control.steps if step < self._start_step or step > end_step
        )
        if missed:
            warnings.warn(
                f"chain_control {self._chain_control.name!r}: the controls at steps "
                f"{missed[:10]}{' ...' if len(missed) > 10 else ''} lie outside this run "
                f"(steps {self._start_step}..{end_step}) and are not applied",
                UserWarning,
                stacklevel=2,
            )
        count = max(0, end_step - self._started())
        with hot_loop_threads(), Progress(count, progress_type, "PT-TEBD") as progress:
            for _ in range(count):
                self.compute_step()
                progress.update(1)
        return self.get_results()

    def get_results(self) -> dict[str, Any]:
        """The results so far: ``'time'`` (steps + 1,), ``'norm'`` (the chain's trace,
        complex, per step), ``'bond_dimensions'`` (steps + 1, n - 1), ``'dynamics'``
        (a :class:`~nonmarkov.Dynamics` per entry of ``dynamics_sites``) and
        ``'pt_bond_dimensions'`` (site -> the process tensor's bonds)."""
        if not self._results:
            return {
                "time": default_np.zeros(0),
                "norm": default_np.zeros(0, dtype=complex),
                "bond_dimensions": default_np.zeros((0, len(self._dims) - 1), dtype=int),
                "dynamics": {
                    entry: Dynamics(name=f"site{entry}") for entry in self._dynamics_sites
                },
                "pt_bond_dimensions": {},
            }
        return {
            "time": default_np.array(self._results["time"]),
            "norm": default_np.array(self._results["norm"]),
            "bond_dimensions": default_np.array(self._results["bond_dimensions"]).reshape(
                len(self._results["time"]), len(self._dims) - 1
            ),
            "dynamics": self._results["dynamics"],
            "pt_bond_dimensions": self._results["pt_bond_dimensions"],
        }

    def get_current_density_matrix(self, sites: int | tuple[int, ...]) -> default_np.ndarray:
        """The reduced state of ``sites`` (an int or a tuple of ascending sites) now."""
        entry = _dynamics_sites([sites], len(self._dims))[0]
        if self._step is None:
            self.initialize()
        _, vectors = self._read([_groups(entry)])
        return density_matrix(vectors[0])

    def get_augmented_mps(self) -> AugmentedMPS:
        """The current chain state as an :class:`AugmentedMPS` (gammas (l, p, r, a),
        identity lambdas); the initial one before any computation."""
        if self._engine is None:
            return self._initial
        sites = self._engine.host_sites()
        return AugmentedMPS([default_np.transpose(s, (0, 1, 3, 2)) for s in sites])
