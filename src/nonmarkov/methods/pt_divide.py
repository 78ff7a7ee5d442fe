"""Divide-and-conquer construction of the process tensor of a stationary bath.

After Cygorek, Keeling, Lovett & Gauger, PRX 14, 011010 (2024): the
influence functional of a Gaussian bath is a product of two-point factors,
and for a stationary bath the part that belongs to a block of consecutive
time points is the same wherever the block sits. So the process tensor is
built by doubling: a block of 2n points is two blocks of n points, combined
and recompressed, and blocks of every power of two are combined into N.

Block of n points (here). Each point j brings its own factor and its
couplings to all later points within the memory K,

    col_j(alpha_j; x_{j+1}, ..., x_{j+K}) = I_0(alpha_j) prod_{l=1}^{K} I_l(x_{j+l}, alpha_j),

where x_k is the only thing I_l needs of the newer point: its difference
s+_k - s-_k (a "row", :attr:`DiscretisedInfluence.carrier_rows`). The
product of the columns of a block is a function of its n points and of
the rows of the K points after it; it is stored as one chain (MPS) of
n + K sites, the K "tail" sites last. Combining block A with the block B
that follows it identifies A's tail with the rows of B's first K sites: the
chain of the product is A's points, the K site-wise products of A's tail
with B's first K sites (bond chi_A chi_B there), and the rest of B; it is
zipped and recompressed by one SVD sweep (``epsrel``, the library's rule;
:func:`nonmarkov.kernels.combine.multiply_overlapping`). At the end of
the run the tail is closed with the row x = 0 (a population: every factor
I_l(0, .) = 1, so points after the end have no influence), and the n point
sites are the step tensors T[b, b', c] of a PT-TEMPO-format process tensor.

Cost: log2(N) doublings plus one combination per further binary digit of
N; each sweeps a chain of at most N + K sites. With full memory (K = N - 1)
that is O(N log N) small decompositions instead of PT-TEMPO's O(N^2); with a
memory cut it is O(N + K log N). The product on the overlap has bonds
chi^2; it is zipped (split into (chi m) x chi^2 matrices, never chi^2 on both
sides), ~chi^5 per overlap site, so large bond dimensions make this method
expensive; see docs/long_time.md.

The construction runs on the host with NumPy/LAPACK whatever the backend:
its shapes change at every combination, which the JAX backend would compile
anew each time. The result is a host-side :class:`SimpleProcessTensor` like
every process tensor; dynamics and correlations with it run on the active
backend.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as default_np

from .._threads import hot_loop_threads
from ..backends import use_backend
from ..backends.host import to_backend
from ..backends.numerical_backend import np
from ..influence import DiscretisedInfluence
from ..kernels.combine import close_right_end, compress_chain, multiply_overlapping
from ..model.bath import Bath
from ..model.parameters import TempoParameters
from ..process_tensors.base import SimpleProcessTensor
from ..progress import Progress, check_progress_type
from . import checks
from .metadata import process_tensor_metadata

#: The overlap is zipped with cuts at this fraction of epsrel before the final sweep.
ZIP_FACTOR = 0.1


class _Block(NamedTuple):
    """A block of ``num_points`` points: chain of num_points + K sites, norm exp(log_scale)."""

    num_points: int
    sites: list[Any]
    log_scale: float


class _Doubler:
    """Builds and combines blocks of one bath on one grid (the kernels' physics side)."""

    def __init__(self, influence: DiscretisedInfluence, memory: int, epsrel: float):
        self.influence = influence
        self.memory = memory
        self.epsrel = epsrel
        self.carrier_rows = np.asarray(influence.carrier_rows)
        self.max_bond = 1

    def column(self) -> _Block:
        """The block of one point: own factor and couplings to the next K points."""
        influence = self.influence
        m = influence.num_classes
        own = influence.own_factor()
        if self.memory == 0:
            return self._compressed(1, [to_backend(own.reshape(1, m, 1))], 0.0)
        sites = [to_backend(default_np.diag(own)[None, :, :])]  # (1, m, m): carries alpha_j
        for lag in range(1, self.memory + 1):
            rows = influence.lag_matrix_rows(lag).T  # (m, r): [alpha_j, x]
            if lag < self.memory:
                site = rows[:, :, None] * default_np.eye(m)[:, None, :]  # (m, r, m)
            else:
                site = rows[:, :, None]  # (m, r, 1)
            sites.append(to_backend(site))
        return self._compressed(1, sites, 0.0)

    def combine(self, first: _Block, second: _Block) -> _Block:
        """The block of ``first``'s points followed by ``second``'s."""
        n_first, n_second = first.num_points, second.num_points
        tail = first.sites[n_first:]
        rows = [self.carrier_rows if i < n_second else None for i in range(len(tail))]
        chain, log_norm = multiply_overlapping(
            first.sites[:n_first], tail, second.sites, rows, self.epsrel, self.epsrel * ZIP_FACTOR
        )
        self.max_bond = max([self.max_bond] + [site.shape[2] for site in chain])
        return _Block(n_first + n_second, chain, first.log_scale + second.log_scale + log_norm)

    def _compressed(self, num_points: int, sites: list[Any], log_scale: float) -> _Block:
        chain, log_norm = compress_chain(sites, self.epsrel)
        self.max_bond = max([self.max_bond] + [site.shape[2] for site in chain])
        return _Block(num_points, chain, log_scale + log_norm)

    def close(self, block: _Block) -> tuple[list[Any], float]:
        """The point sites of ``block`` with its tail set to the row x = 0.

        Returns the compressed point chain and its log-norm.
        """
        points, tail = block.sites[: block.num_points], block.sites[block.num_points :]
        log_scale = block.log_scale
        if tail:
            zero_row = int(default_np.argmin(default_np.abs(self.influence.row_differences)))
            selector = default_np.zeros(self.influence.num_rows)
            selector[zero_row] = 1.0
            vector, log_tail = close_right_end(tail, [to_backend(selector)] * len(tail))
            points[-1] = np.einsum("lpr,r->lp", points[-1], vector)[:, :, None]
            log_scale += log_tail
        chain, log_norm = compress_chain(points, self.epsrel)
        return chain, log_scale + log_norm


def pt_divide_and_conquer_compute(
    bath: Bath,
    start_time: float,
    end_time: float,
    parameters: TempoParameters,
    unique: bool = False,
    progress_type: str | None = None,
    name: str | None = None,
    description: str | None = None,
) -> SimpleProcessTensor:
    """The process tensor of ``bath`` on [start_time, end_time] by divide and conquer.

    Parameters
    ----------
    bath : the Bath (stationary correlations, as for every Bath).
    start_time, end_time : the PT covers N = round((end - start) / dt) steps.
    parameters : TempoParameters; with a memory cut (tcut/dkmax) of K steps
        each point couples to the next K, without one to all later points.
    unique : merge Liouville indices with equal coupling eigenvalue pairs.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.
    name, description : optional text.

    Returns a :class:`~nonmarkov.SimpleProcessTensor` of N steps in the format
    of PT-TEMPO (same classes, transforms and T[b, b', c] convention).
    Untruncated it equals sequential PT-TEMPO to rounding; truncated, the
    error is set by ``epsrel`` (docs/long_time.md).
    """
    parameters = checks.tempo_parameters(parameters)
    checks.correlation_time(parameters, "divide-and-conquer")
    start_time, end_time, num_steps = checks.pt_interval(bath, start_time, end_time, parameters.dt)
    progress_type = check_progress_type(progress_type)
    influence = DiscretisedInfluence.from_parameters(bath, parameters, unique)
    memory = num_steps - 1 if parameters.dkmax is None else min(parameters.dkmax, num_steps - 1)
    doubler = _Doubler(influence, memory, parameters.epsrel)
    levels = num_steps.bit_length()
    total = levels + bin(num_steps).count("1") - 1  # column, doublings, joins
    with (
        use_backend("numpy"),
        hot_loop_threads(),
        Progress(total, progress_type, "PT divide and conquer") as progress,
    ):
        power = doubler.column()
        progress.update()
        result: _Block | None = None  # the blocks of the lower binary digits, joined
        for p in range(levels):
            if p:
                power = doubler.combine(power, power)
                progress.set_postfix(bond=doubler.max_bond)
                progress.update()
            if p < levels - 1 and num_steps >> p & 1:
                # blocks are alike wherever they sit: the larger one goes first
                result = power if result is None else doubler.combine(power, result)
                if result is not power:
                    progress.update()
        # the highest binary digit is always set: its block goes first
        if result is not None:
            power = doubler.combine(power, result)
            progress.update()
        chain, log_scale = doubler.close(power)
    to_eigen, from_eigen = influence.liouville_transforms()
    metadata = process_tensor_metadata(
        "pt_divide_and_conquer_compute", bath, parameters, start_time, end_time, num_steps, unique
    )
    pt = SimpleProcessTensor(
        bath.dimension,
        parameters.dt,
        to_eigen,
        from_eigen,
        "Unnamed divide-and-conquer PT" if name is None else str(name),
        description,
        classes=influence.classes,
        metadata=metadata,
    )
    share = math.exp(log_scale / num_steps)
    for step, site in enumerate(chain):
        tensor = default_np.transpose(default_np.asarray(np.to_host(site)), (0, 2, 1))
        pt.set(step, tensor * share)
    return pt
