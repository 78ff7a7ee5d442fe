"""The window engine of the JAX backend: the host's steps or the compiled zip-up
step (:mod:`.zipup`), as the planner (:mod:`.planner`) decides.

The window is in one of two places: on the host, advanced by
:class:`~nonmarkov.engines.eager_window.EagerWindowEngine` with the NumPy kernels (under
:func:`~nonmarkov.backends.numerical_backend.numpy_in_this_thread`), or on a JAX
device as explicit padded state (front, sites, count, log-scale), advanced a
chunk of compiled steps at a time. Both run the same algorithm, so the window
moves between them (trimmed or padded, one transfer) without changing the
result beyond rounding. Every choice is the planner's; what it chose and why is
kept in :attr:`JaxWindowEngine.stats`.

Compiled kernels are kept per shape for the life of the process (and across
processes in JAX's persistent cache, :mod:`nonmarkov.backends`), so a second
run of the same shapes compiles nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as default_np

from ...backends.numerical_backend import numpy_in_this_thread
from ...kernels.truncation import sketch_gaussians
from ...kernels.window import matrix_lags, trace_basis
from ...options import EngineOptions
from ..base import DEVICES, WindowCapabilities, WindowSpec
from ..eager_window import EagerWindowEngine
from ..shared import LastArguments
from . import compiler, placement, planner, zipup
from .padding import padded_window, trimmed_window
from .planner import WindowRunStats, bond_bucket

#: Compiled kernels of this process by shape and configuration, and the seconds the
#: last compilation took (the planner's estimate of the next one).
_KERNELS: dict[tuple[Any, ...], Any] = {}
_COMPILE_SECONDS: list[float] = []


class JaxWindowEngine:
    """The window engine of the JAX backend (see
    :class:`~nonmarkov.engines.base.WindowEngine`); ``stats`` says what it did."""

    capabilities = WindowCapabilities(devices=DEVICES, trace_weight=True)
    steps_per_call = 64

    def __init__(self, spec: WindowSpec, options: EngineOptions, dtype: Any):
        import jax

        self._jax = jax
        self._spec = spec
        self._options = options
        self._dtype = default_np.dtype(dtype)
        self._real = default_np.finfo(self._dtype).dtype
        with numpy_in_this_thread():
            self._host = EagerWindowEngine(spec, options)
        projector = default_np.asarray(spec.projector)
        self._dim_x, self._dim_m = projector.shape
        carrier = default_np.asarray(spec.carrier, dtype=int)
        self._num_rows = int(carrier.max()) + 1
        self._carrier = default_np.eye(self._num_rows)[carrier]
        self._memory = 0 if spec.memory is None else int(spec.memory)
        #: the padded window on the device (front, sites, count, log_scale), or None
        self._state: tuple[Any, ...] | None = None
        self._count = 0
        self._steps = 0
        self._final_bond = 1
        self._device: Any = None
        self._constants: dict[str, Any] = {}
        self._gaussians: dict[tuple[int, int], Any] = {}
        self._put_leaving = LastArguments(lambda rows: self._put(self._in_basis(rows)))
        self._put_pair = LastArguments(lambda a, b: (self._put(a), self._put(b)))
        #: compilations in the background: key -> (future, start time)
        self._pending: dict[tuple[Any, ...], tuple[Future, float]] = {}
        self._steps_expected = 0
        self._largest_seen = 1
        self._host_seconds = 0.0
        self._compiled_seconds = 0.0
        #: the weighted class basis A and A^-1 (host), or None (flat)
        self._basis: tuple[Any, Any] | None = None
        if spec.trace_weight != 1.0:
            self._basis = trace_basis(self._dim_m, spec.trace_weight)
        self.plan = planner.Plan()
        self.stats = WindowRunStats()
        if options.device == placement.ACCELERATOR:  # none there: an error before any step
            placement.place(options.device, 0.0)

    @property
    def memory(self) -> int:
        """Points kept in the window, 0 for no memory cut."""
        return self._memory

    # -- the run: plan, then host steps or compiled chunks ----------------------------

    def _run(
        self,
        num_steps: int,
        host_step: Callable[[], tuple[Any, int]],
        compiled_chunk: Callable[[int], tuple[list[Any], list[int]]],
    ) -> tuple[list[Any], list[int]]:
        outputs: list[Any] = []
        ranks: list[int] = []
        recent = self._largest_seen  # the largest bond of the last host step or chunk
        while len(outputs) < num_steps:
            left = num_steps - len(outputs)
            self._replan(left, recent)
            size = min(self.plan.chunk, left)
            if self.plan.where == planner.COMPILED and self._kernel(self.plan.bond, size):
                chunk_outputs, chunk_ranks = compiled_chunk(size)
                outputs += chunk_outputs
                ranks += chunk_ranks
                recent = max(chunk_ranks, default=recent)
                continue
            self._to_host()
            start = time.perf_counter()
            with numpy_in_this_thread():
                output, rank = host_step()
            self._host_seconds = time.perf_counter() - start
            self.stats.host_steps += 1
            self._steps += 1
            outputs.append(output)
            ranks.append(rank)
            recent = rank
        return outputs, ranks

    def _replan(self, steps_left: int, largest: int) -> None:
        stats = planner.WindowStats(
            largest_rank=largest,
            largest_seen=self._largest_seen,
            sites=self._sites(),
            steps_left=max(steps_left, self._steps_expected - self._steps),
            num_rows=self._num_rows,
            dim_m=self._dim_m,
            host_seconds=self._host_seconds,
            compiled_seconds=self._compiled_seconds,
            compile_seconds=_COMPILE_SECONDS[-1] if _COMPILE_SECONDS else 0.0,
            kernel_ready=self._kernel_ready(self.plan.bond, 1, wait=False),
            accelerator=self._sketches_on_accelerator(largest),
        )
        self._largest_seen = max(self._largest_seen, largest)
        self._set_plan(planner.next_plan(self.plan, stats, self._options))
        if self.plan.compile:
            self._compile(self.plan.bond, min(self.plan.chunk, steps_left))

    def _accelerator(self, bond: int) -> bool:
        return self._place(bond).platform != "cpu"

    def _sketches_on_accelerator(self, largest: int) -> bool:
        """Whether the planner's next bucket sketches on an accelerator (JAX's devices
        asked only then: plain cuts on the host never start JAX's backend)."""
        bond = planner.next_bond(self.plan, self._largest_seen, largest)
        sketched = not planner.plain_cuts(bond, self._num_rows, self._dim_m)
        return sketched and self._accelerator(bond)

    def _grown(self, wanted: int) -> planner.Plan:
        on = self._accelerator(bond_bucket(wanted))
        return planner.grown(self.plan, wanted, self._num_rows, self._dim_m, self._options, on)

    def _set_plan(self, plan: planner.Plan) -> None:
        """Follow ``plan``, recording it when it changes where or at which bucket."""
        where = (plan.where, plan.bond, plan.sketch)
        if where != (self.plan.where, self.plan.bond, self.plan.sketch):
            self.stats.decisions.append((self._steps, plan.where, plan.bond, plan.reason))
        self.plan = plan

    def _sites(self) -> int:
        return self._count + 1 if self._state is not None else len(self._host.window)

    # -- kernels ----------------------------------------------------------------------

    def _capacity(self, size: int) -> int:
        """Sites the padded window holds for a chunk of ``size`` steps from now: the
        memory cut, or (without one) the current capacity while it suffices, else
        twice what the chunk needs."""
        if self._memory:
            return max(self._memory - 1, 1)
        need = self._count + size + 1
        have = 0 if self._state is None else int(self._state[1].shape[0])
        return have if have >= need else bond_bucket(2 * need)

    def _key(self, bond: int, size: int) -> tuple[Any, ...]:
        """The kernel of bucket ``bond`` (and the plan's sketch bucket) for a chunk of
        ``size`` steps from now."""
        device = self._place(bond)
        return (
            self._memory,
            self._spec.max_rank,
            self._spec.oldest,
            self._options.svd,
            device,
            str(self._dtype),
            self._dim_x,
            self._dim_m,
            self._num_rows,
            bond,
            self._capacity(size),
            self.plan.sketch,
            self._spec.trace_weight != 1.0,
        )

    def _in_basis(self, rows: Any) -> Any:
        """Lag rows (r, m) as the sites see them (:func:`~nonmarkov.kernels.window.
        matrix_lags` in a weighted basis)."""
        if self._basis is None:
            return rows
        return matrix_lags(rows, *self._basis)

    def _lag_rows(self, lag: int) -> Any:
        return self._in_basis(self._spec.lag_rows(lag))

    def _place(self, bond: int) -> Any:
        work = placement.window_work(bond, self._num_rows, self._dim_m)
        return placement.place(self._options.device, work).device

    def _compile(self, bond: int, size: int, background: bool = True) -> None:
        """Compile the kernel of ``bond`` (chunks of ``size`` steps) in the background
        compiler thread (waited for with deterministic options), unless it is
        compiled or compiling; ``background=False``: here and now (an error raises)."""
        key = self._key(bond, size)
        if key in _KERNELS or (background and key in self._pending):
            return
        for other, (future, _) in list(self._pending.items()):  # no longer wanted
            if future.cancel():
                del self._pending[other]
        jax = self._jax
        memory, max_rank, oldest, svd, device, _, x, m, c, bond, capacity, sketch, weighted = key
        kernel = zipup.compiled_step(memory, max_rank, oldest, device.platform, svd)
        sharding = placement.sharding(device)

        def like(shape: tuple[int, ...], dtype: Any) -> Any:
            return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)

        constants = {
            "projector": like((x, m), self._dtype),
            "first": like((x, m), self._dtype),
            "carrier": like((x, c), self._dtype),
            "out_map": like((x, x), self._dtype),
            "epsrel": like((), self._real),
        }
        lag = (c, m, m) if weighted else (c, m)
        constants["lags"] = like((capacity, *lag), self._dtype)
        if memory >= 2:
            constants["leaving"] = like(lag, self._dtype)
        if weighted:
            constants["basis"] = like((m, m), self._dtype)
            constants["covector"] = like((m,), self._dtype)
        if sketch:
            constants["gaussians"] = like((m * bond, 2 * sketch), self._real)
        args = (
            like((x, bond), self._dtype),
            like((capacity, bond, m, bond), self._dtype),
            like((), default_np.int32),
            like((), self._real),
            like((x, x), self._dtype),
            like((x, x), self._dtype),
            constants,
        )
        start = time.perf_counter()

        def job() -> None:
            compiler.check_ahead()
            _KERNELS[key] = kernel.lower(*args).compile()

        if not background:
            _KERNELS[key] = kernel.lower(*args).compile()
            self.stats.kernels_compiled += 1
            self.stats.compile_seconds += time.perf_counter() - start
            return
        self._pending[key] = (compiler.compile_ahead(job), start)
        if self._must_wait():
            self._kernel_ready(bond, size)

    def _kernel_ready(self, bond: int, size: int, wait: bool = True) -> bool:
        """Whether the kernel of ``bond`` is compiled; with ``wait`` and a compilation
        of it in progress that must be waited for (deterministic options, or a redo
        that needs it), wait."""
        if not self._pending and not _KERNELS:  # nothing compiled or compiling yet
            return False
        key = self._key(bond, size)
        for other, (future, start) in list(self._pending.items()):
            if future.done() or (other == key and wait and self._must_wait()):
                if future.exception() is None:  # waits; a failed one leaves it missing
                    seconds = time.perf_counter() - start
                    _COMPILE_SECONDS.append(seconds)
                    self.stats.kernels_compiled += 1
                    self.stats.compile_seconds += seconds
                del self._pending[other]
        return key in _KERNELS

    def _kernel(self, bond: int, size: int) -> bool:
        """:meth:`_kernel_ready`; where a compilation must be waited for and the one
        ahead failed (it stops when the program ends or JAX is reconfigured), the
        kernel is compiled here and now."""
        if self._kernel_ready(bond, size):
            return True
        if not self._must_wait() or self._key(bond, size) in self._pending:
            return False
        self._compile(bond, size, background=False)
        return True

    def _must_wait(self) -> bool:
        """Whether a compilation is waited for rather than run host steps meanwhile."""
        return (
            self._options.deterministic or self._options.compiled == "on" or self._state is not None
        )

    # -- moving the window ------------------------------------------------------------

    def _put(self, array: Any, dtype: Any = None) -> Any:
        array = default_np.asarray(array)
        if dtype is None:
            dtype = self._dtype if array.dtype.kind in "fc" else array.dtype
        return self._jax.device_put(array.astype(dtype), self._device)

    def _to_device(self, bond: int, capacity: int) -> int:
        """Pad the host window to bucket ``bond`` (or the one that holds its bonds)
        and ``capacity`` sites and put it on its device; returns the bucket."""
        with numpy_in_this_thread():
            window, log_scale = self._host.host_window()
            steps = self._host.steps
        count = len(window) - 1
        bond = max(bond, bond_bucket(max(site.shape[2] for site in window)))
        front, sites = padded_window(window, bond, capacity, self._dim_m, self._dtype)
        self._final_bond = window[-1].shape[2]
        device = self._place(bond)
        if self._device is not None and device != self._device:
            self.stats.device_moves += 1
        self._device = device
        self.stats.device = str(device)
        self._put_leaving = LastArguments(lambda rows: self._put(self._in_basis(rows)))
        self._put_pair = LastArguments(lambda a, b: (self._put(a), self._put(b)))
        self._gaussians = {}
        self._constants = {
            "projector": self._put(self._spec.projector),
            "first": self._put(self._spec.first),
            "carrier": self._put(self._carrier),
            "out_map": self._put(self._spec.out_map),
            "epsrel": self._put(self._spec.epsrel, self._real),
            "lags": self._put([self._lag_rows(lag + 2) for lag in range(capacity)]),
        }
        if self._memory >= 2:
            self._constants["leaving"] = self._put(self._lag_rows(self._memory))
        if self._basis is not None:
            self._constants["basis"] = self._put(self._basis[0])
            self._constants["covector"] = self._put(self._basis[1].sum(axis=0))
        self._state = (
            self._put(front),
            self._put(sites),
            self._put(default_np.asarray(count, default_np.int32)),
            self._put(log_scale, self._real),
        )
        self._count, self._steps = count, steps
        return bond

    def _to_host(self) -> None:
        """Trim the device window to its bonds and hand it to the host engine."""
        if self._state is None:
            return
        window, log_scale = self._device_window()
        with numpy_in_this_thread():
            self._host.load_window(window, log_scale, self._steps)
        self._state = None

    def _device_window(self) -> tuple[list[default_np.ndarray], float]:
        front, sites, _, log_scale = self._state  # type: ignore[misc]
        front, sites, log_scale = self._jax.device_get((front, sites[: self._count], log_scale))
        self.stats.fetches += 1
        last = self._final_bond if self._spec.oldest == "finalize" else 1
        return trimmed_window(front, sites, last), float(log_scale)

    def _grow(self, bond: int, capacity: int) -> int:
        """Re-pad the device window to ``bond`` and ``capacity`` sites."""
        self._to_host()
        return self._to_device(bond, capacity)

    # -- compiled chunks --------------------------------------------------------------

    def _chunk(self, size: int, pairs: Sequence[tuple[Any, Any]]) -> tuple[list[Any], list[int]]:
        """Run ``size`` compiled steps with the (between, second) ``pairs``; returns the
        per-step outputs (host) and largest bonds (none where the window went to the
        host instead)."""
        while True:
            bond = self.plan.bond
            capacity = self._capacity(size)
            if self._state is None:
                used = self._to_device(bond, capacity)
            elif self._state[0].shape[1] != bond or self._state[1].shape[0] != capacity:
                used = self._grow(bond, capacity)
            else:
                used = bond
            if used != bond:  # the window's bonds need a larger bucket
                self._set_plan(self._grown(used))
                if self.plan.where == planner.HOST:
                    self._to_host()
                    return [], []
                continue
            self._kernel(bond, size)  # the window is on the device: compiled here if need be
            kernel = _KERNELS[self._key(bond, size)]
            state = self._state
            if state is None:  # (_to_device and _grow put it there)
                raise RuntimeError("the compiled window is not on a device")
            start = time.perf_counter()
            results = []
            count = self._count
            for k, (between, second) in enumerate(pairs[:size]):
                constants = self._step_constants(bond)
                rows = self._spec.leaving(self._steps + k + 1)
                if rows is not None:
                    constants = {**constants, "leaving": self._put_leaving(rows)}
                *state, output, wanted, largest, wider = kernel(
                    *state, *self._put_pair(between, second), constants
                )
                results.append((output, wanted, largest, wider))
                count += 0 if self._memory and count + 1 >= self._memory else 1
            outputs, wanted, largest, wider = self._jax.device_get(tuple(zip(*results)))
            self.stats.fetches += 1
            most = max(int(value) for value in wanted)
            widest = max(int(value) for value in wider)
            if most <= bond and widest == 0:
                break
            self.stats.redos += 1
            before = (self.plan.bond, self.plan.sketch)
            if most > bond:
                self._set_plan(self._grown(most))
                self._largest_seen = max(self._largest_seen, most)
            else:
                self._set_plan(planner.wider(self.plan, widest, self._num_rows, self._dim_m))
            if self.plan.where == planner.HOST:
                return [], []
            if (self.plan.bond, self.plan.sketch) == before:  # a redo must change the kernel
                raise RuntimeError(
                    f"the compiled window step wanted rank {most} and sketch width {widest}, "
                    f"which bucket {bond} (sketch {self.plan.sketch}) holds"
                )
        if size >= planner.MEASURED_CHUNK:
            self._compiled_seconds = (time.perf_counter() - start) / size
        self._state = tuple(state)
        self._count = count
        self._steps += size
        self.stats.compiled_steps += size
        return list(outputs), [int(value) for value in largest]

    def _step_constants(self, bond: int) -> dict[str, Any]:
        """The constants of a step of bucket ``bond``, with the test columns of the
        plan's sketch bucket where it sketches."""
        width = self.plan.sketch
        if not width:
            return self._constants
        key = (bond, width)
        if key not in self._gaussians:
            grid = sketch_gaussians(self._dim_m, bond, 0, 2 * width)
            self._gaussians = {key: self._put(grid, self._real)}
        return {**self._constants, "gaussians": self._gaussians[key]}

    # -- the engine interface ---------------------------------------------------------

    def advance(
        self, propagators: Sequence[tuple[Any, Any]]
    ) -> tuple[default_np.ndarray, list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance`."""
        position = [0]

        def host_step() -> tuple[Any, int]:
            vectors, largest = self._host.advance([propagators[position[0]]])
            position[0] += 1
            return default_np.asarray(vectors[0]), largest[0]

        def compiled_chunk(size: int) -> tuple[list[Any], list[int]]:
            pairs = propagators[position[0] : position[0] + size]
            outputs, ranks = self._chunk(size, pairs)
            position[0] += len(outputs)
            return [default_np.asarray(output) for output in outputs], ranks

        outputs, ranks = self._run(len(propagators), host_step, compiled_chunk)
        if not outputs:
            return default_np.zeros((0, self._dim_x), self._dtype), ranks
        return default_np.asarray(outputs), ranks

    def advance_finalize(self, num_steps: int) -> tuple[list[tuple[Any, float]], list[int]]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.advance_finalize`."""
        m = self._dim_m
        between, second = default_np.ones((m, m)), default_np.eye(m)

        def host_step() -> tuple[Any, int]:
            done, largest = self._host.advance_finalize(1)
            return done[0], largest[0]

        def compiled_chunk(size: int) -> tuple[list[Any], list[int]]:
            outputs, ranks = self._chunk(size, [(between, second)] * size)
            finalised = []
            for site, rank, log_before in outputs:
                done = None
                if int(rank):
                    done = default_np.asarray(site[: int(rank), :, : self._final_bond])
                    self._final_bond = int(rank)
                finalised.append((done, float(log_before)))
            return finalised, ranks

        return self._run(num_steps, host_step, compiled_chunk)

    def expect_steps(self, num_steps: int) -> None:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.expect_steps`: the planner
        weighs a compilation against all of them."""
        self._steps_expected = self._steps + int(num_steps)

    def host_window(self) -> tuple[list[default_np.ndarray], float]:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.host_window`."""
        if self._state is not None:
            return self._device_window()
        with numpy_in_this_thread():
            return self._host.host_window()

    def load_window(self, window: Sequence[Any], log_scale: float, steps: int = 0) -> None:
        """See :meth:`~nonmarkov.engines.base.WindowEngine.load_window`."""
        self._state = None
        self._steps = int(steps)
        with numpy_in_this_thread():
            self._host.load_window(window, log_scale, steps)
