"""Where a JAX computation runs: on the accelerator (GPU, TPU) or on the host CPU.

One rule, :func:`choose`, decides from the size of a problem; the JAX engines
(window, chain, batched chain) ask it through :func:`place` with the work of
their problem (:func:`window_work`, :func:`chain_work`) and the ``device``
engine option (:class:`nonmarkov.options.EngineOptions`):

- ``'auto'`` (default): the accelerator when JAX sees one and the work per
  dependent kernel of a step is at least :data:`~.planner.ACCELERATOR_WORK`; else the host
  CPU. A step of a small window is hundreds of small dependent kernels, one QR
  and one SVD per site: on a GPU each waits on its launch, so the host runs
  them faster; a large window's kernels are big enough to repay the launches;
- ``'host'``: always the host CPU (``jax.devices('cpu')``), also on a GPU machine;
- ``'accelerator'``: always the accelerator; a ``RuntimeError`` that says so
  where JAX sees none (nothing falls back silently).

On a machine without an accelerator ``'auto'`` is the CPU. A window that grows
past the threshold during a run moves to the accelerator once, at the bucket
growth that crosses it (its arrays are re-padded there anyway), and stays there:
a bucket that shrinks again does not move it back.

:data:`~.planner.ACCELERATOR_WORK` is where a launch-bound model of the step
time (a fixed cost per kernel launch plus work over throughput), fitted to
timings on a GPU and one CPU core, has the two devices cross, times a margin:
the host side of the choice is JAX on all CPU cores, and a move costs a
compilation on the accelerator (the timings: benchmarks/README.md, "On a GPU").
For PT-TEMPO windows with m = 4 classes and r = 3 carrier rows it is bucket 48.
``benchmarks/bench_device.py --calibrate`` (run by ``gpu_check.sh``) times the
whole-step kernel on both devices at a few buckets and prints the crossover.

Requires JAX for :func:`place`; :func:`choose` and the work measures are plain
Python.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from ... import config
from . import planner

HOST = "host"
ACCELERATOR = "accelerator"


def accelerators() -> list[Any]:
    """The accelerator devices JAX sees (GPUs, TPUs), the default one first; ``[]`` on
    a machine with none (or with ``JAX_PLATFORMS=cpu``). The one place that asks JAX
    which devices there are."""
    import jax

    return [device for device in jax.devices() if device.platform != "cpu"]


def host_device() -> Any | None:
    """JAX's first CPU device, or None where the CPU backend is not enabled
    (``JAX_PLATFORMS`` without ``cpu``)."""
    import jax

    try:
        return jax.devices("cpu")[0]
    except RuntimeError:
        return None


def window_work(bond: int, num_rows: int, num_classes: int) -> float:
    """Work per site of a window step at bond bucket ``bond``: m (D r)^3 for m classes
    and a carrier of r rows (a QR of (D r m, D r) and an SVD of (D r, m D))."""
    return float(num_classes) * float(bond * num_rows) ** 3


def chain_work(members: int, bonds: Sequence[int], dim_d2: int) -> float:
    """Work per step of a (batched) chain scan: ``members`` states of shape
    (bonds..., d^2), each multiplied by a d^2 x d^2 propagator and contracted with a
    step tensor over one bond: members prod(bonds) d^2 (d^2 + max(bonds))."""
    size = math.prod(int(bond) for bond in bonds) if bonds else 1
    largest = max((int(bond) for bond in bonds), default=1)
    return float(members) * size * dim_d2 * (dim_d2 + largest)


def choose(choice: str, work: float, have_accelerator: bool) -> str:
    """The rule: ``'host'`` or ``'accelerator'`` for a computation of ``work`` (see
    :func:`window_work`, :func:`chain_work`) under the ``device`` option ``choice``
    (:data:`nonmarkov.config.VALID_JAX_DEVICES`), where an accelerator is present or
    not. Raises ``ValueError`` for an unknown choice and ``RuntimeError`` for
    ``'accelerator'`` without one."""
    choice = config.check_choice(choice, config.VALID_JAX_DEVICES, "device option")
    if choice == HOST:
        return HOST
    if choice == ACCELERATOR:
        if not have_accelerator:
            raise RuntimeError(
                "the device option is 'accelerator' but JAX sees no GPU or TPU; install a "
                "CUDA (or TPU) build of JAX, check JAX_PLATFORMS, or use device='auto' "
                "(or 'host') to run on the CPU"
            )
        return ACCELERATOR
    return ACCELERATOR if have_accelerator and work >= planner.ACCELERATOR_WORK else HOST


@dataclasses.dataclass(frozen=True)
class Placement:
    """A decision of :func:`place`: ``where`` (``'host'`` or ``'accelerator'``) and
    the JAX ``device`` it names."""

    where: str
    device: Any

    @property
    def platform(self) -> str:
        """The device's platform: ``'cpu'``, ``'gpu'`` (CUDA/ROCm) or ``'tpu'``."""
        return str(self.device.platform)


def place(choice: str, work: float) -> Placement:
    """The device for a computation of ``work`` under the ``device`` option ``choice``
    (:func:`choose` with the devices of :func:`accelerators`).

    Where the host CPU backend is not enabled (``JAX_PLATFORMS=cuda``), ``'auto'``
    runs everything on the accelerator and ``'host'`` is a ``RuntimeError``; set
    ``JAX_PLATFORMS=cuda,cpu`` (or leave it unset) to have both.
    """
    found = accelerators()
    where = choose(choice, work, bool(found))
    if where == ACCELERATOR:
        return Placement(ACCELERATOR, found[0])
    host = host_device()
    if host is not None:
        return Placement(HOST, host)
    if choice == HOST or not found:
        raise RuntimeError(
            "the device option asks for the host CPU, but JAX's CPU backend is not "
            "enabled; set JAX_PLATFORMS to include cpu (e.g. JAX_PLATFORMS=cuda,cpu)"
        )
    return Placement(ACCELERATOR, found[0])


def sharding(device: Any) -> Any:
    """The ``jax.sharding.SingleDeviceSharding`` of ``device`` (for abstract arguments
    of a compilation ahead, so that it compiles for the device the steps run on)."""
    import jax

    return jax.sharding.SingleDeviceSharding(device)


def device_of(arrays: Sequence[Any]) -> Any | None:
    """The device of the first of ``arrays`` (device arrays or ``jax.ShapeDtypeStruct``
    with a sharding) that has one, or None."""
    for array in arrays:
        placed = getattr(array, "sharding", None)
        if placed is not None:
            return next(iter(placed.device_set))
    return None
