"""Compilation of the JAX kernels: ``jax.jit`` with the library's XLA options, and a
background compiler thread that compiles the kernels of coming steps while the
current ones run. Requires JAX.
"""

from __future__ import annotations

import atexit
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ...backends import numerical_backend
from .modules import jax_modules


def _compiler_options(optimization_level: int = 1, platform: str | None = None) -> dict[str, Any]:
    """XLA options on a CPU (``platform``, default JAX's default backend): the classic
    elemental emitters, LLVM at level 1; none on other platforms.

    Level 1 without the fusion emitters compiles the window step about twice as
    fast as the default and runs as fast; level 0 compiles faster still, but its
    unoptimised loops (the small complex matmuls, transposes and masks between
    the LAPACK calls) make a step slower (measurements: benchmarks/README.md).

    The code is generated as one module (``xla_cpu_parallel_codegen_split_count``
    1): every compilation leaves memory mappings in the process that are not
    returned when the kernel is freed, about half as many with one module, and
    a process dies (segmentation fault in the compiler) once it reaches the
    system's limit (``vm.max_map_count``) after a few thousand kernels; site by
    site, a long run compiles hundreds.
    """
    if (platform or jax_modules()[0].default_backend()) == "cpu":
        return {
            "xla_backend_optimization_level": optimization_level,
            "xla_cpu_use_fusion_emitters": False,
            "xla_cpu_parallel_codegen_split_count": 1,
        }
    return {}


def compile_kernel(
    function: Callable[..., Any],
    optimization_level: int = 1,
    nested: bool = False,
    platform: str | None = None,
) -> Callable[..., Any]:
    """``jax.jit`` of ``function`` with full-precision matrix products.

    ``nested``: the kernel may be called inside the user's own transformations
    (``jax.grad``, ``jax.jit``), where JAX takes no compiler options; then the
    XLA options are not set.

    At JAX's default precision a GPU may multiply float32/complex64 matrices
    in TF32 (~1e-3 relative error); the kernels are traced with the
    ``highest`` matmul precision so that single precision does not depend on
    the device (no effect in double precision). On a CPU the XLA options of
    :func:`_compiler_options` apply (``optimization_level``: LLVM's). ``platform``:
    that of the device the kernel will run on (:mod:`.placement`; default JAX's
    default backend); a kernel is compiled for the device of its arguments.
    """
    jax = jax_modules()[0]

    @functools.wraps(function)
    def full_precision(*args: Any, **kwargs: Any) -> Any:
        with jax.default_matmul_precision("highest"):
            return function(*args, **kwargs)

    if nested:
        return jax.jit(full_precision)
    return jax.jit(full_precision, compiler_options=_compiler_options(optimization_level, platform))


_ahead_jobs: queue.SimpleQueue = queue.SimpleQueue()
_worker_lock = threading.Lock()
_ahead_worker: list[threading.Thread] = []
_stopping = threading.Event()
_pausing = threading.Event()


def check_ahead() -> None:
    """Raise in a job ahead once the compilations ahead must stop (program end, or
    JAX's configuration about to change; see :func:`pause_ahead`)."""
    if _stopping.is_set() or _pausing.is_set():
        raise RuntimeError("compilations ahead stopped (program end or JAX reconfigured)")


def compile_ahead(job: Callable[[], None]) -> Future:
    """Run ``job`` (compilations only) in the background compiler thread; its future
    (``cancel()`` drops a job that has not started).

    While a step runs, the thread that dispatched it waits in XLA without the
    GIL, so compiling the kernels of the coming steps in a second thread costs
    no time on a machine with a core to spare. The thread is a daemon: a
    compilation in progress holds up the end of the program by one kernel at most
    (the job stops at its next kernel, see :func:`_stop_ahead`).
    """
    future: Future = Future()
    _ahead_jobs.put((job, future))
    with _worker_lock:
        if not _ahead_worker:
            worker = threading.Thread(
                target=_work_ahead, name="nonmarkov-compile-ahead", daemon=True
            )
            worker.start()
            _ahead_worker.append(worker)
            atexit.register(_stop_ahead)
            numerical_backend.before_jax_change(pause_ahead)
    return future


def pause_ahead() -> None:
    """Drop the queued compilations ahead and wait for the one in progress (called
    before JAX's configuration changes; later jobs run normally)."""
    if not _ahead_worker or threading.current_thread() is _ahead_worker[0]:
        return
    _pausing.set()
    try:
        idle: Future = Future()
        _ahead_jobs.put((lambda: None, idle))
        idle.result()
    finally:
        _pausing.clear()


def _stop_ahead() -> None:
    """At exit: stop the compilations ahead and wait for the kernel in progress."""
    _stopping.set()
    _ahead_jobs.put(None)  # ends the worker once the jobs before it have stopped
    for worker in _ahead_worker:
        worker.join(timeout=30)


def _work_ahead() -> None:
    while True:
        item = _ahead_jobs.get()
        if item is None:
            return
        job, future = item
        if not future.set_running_or_notify_cancel():  # cancelled while queued
            continue
        try:
            job()
        except BaseException as error:  # the steps compile what they need themselves
            future.set_exception(error)
        else:
            future.set_result(None)
