"""BLAS threads of the hot loops: one for small matrices, all cores for large ones.

TEMPO-family loops do many small matrix operations; on them a multi-threaded
BLAS spends more time synchronising than computing. At large bonds a single
factorisation or product is big enough to share between cores. So a hot loop
(:func:`hot_loop_threads`) runs its BLAS with one thread, and a kernel raises
the count for one large operation (:func:`large_work_threads`) to every core
this process may use (at most the BLAS's own limit, e.g. a sweep worker's),
when the operation's work (multiply-adds, e.g. ``m n k`` of a product or
``m n min(m, n)`` of an SVD) is at least :data:`LARGE_WORK` and the process has
at least :data:`MIN_CORES` cores (both measured with
``benchmarks/bench_threads.py``; docs/algorithms.md, "Threads").

``NONMARKOV_BLAS_THREADS`` (read once, at import, into
:data:`nonmarkov.config.BLAS_THREADS`) overrides the rule: ``auto`` (default)
as above, ``N`` >= 1 pins the loops to N threads for every operation, ``0``
leaves the BLAS setting alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from . import config

#: multiply-adds (complex128) from which an operation gets every core; below it
#: more threads cost more than they save
LARGE_WORK = 8_000_000

#: cores from which large operations share them: an OpenBLAS pool spins for a
#: while after each parallel call (``OPENBLAS_THREAD_TIMEOUT``), and with fewer
#: cores that spinning takes the core the loop needs
MIN_CORES = 4

# BLAS controllers and the core count while a hot loop with the auto rule runs
_active: dict[str, Any] = {}


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def hot_loop_threads() -> Iterator[None]:
    """Run a ``with`` block's BLAS with the rule of the module docstring
    (:data:`nonmarkov.config.BLAS_THREADS`)."""
    setting = config.BLAS_THREADS
    if setting == 0 or _active:  # untouched, or already inside a hot loop
        yield
        return
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    libraries = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    # the threads a large operation may use: what the BLAS had (the cores, or a
    # user's or a sweep worker's limit), at most the cores this process may use
    cores = min([available_cores(), *(lib.num_threads for lib in libraries)])
    with controller.limit(limits=1 if setting == "auto" else setting, user_api="blas"):
        if setting == "auto" and cores >= MIN_CORES:
            _active["blas"] = libraries
            _active["cores"] = cores
        try:
            yield
        finally:
            _active.clear()


@contextlib.contextmanager
def large_work_threads(work: float) -> Iterator[None]:
    """Inside a hot loop with the auto rule, give an operation of ``work``
    multiply-adds every core when it is at least :data:`LARGE_WORK`."""
    if not _active or work < LARGE_WORK:
        yield
        return
    libraries = _active["blas"]
    for library in libraries:
        library.set_num_threads(_active["cores"])
    try:
        yield
    finally:
        for library in libraries:
            library.set_num_threads(1)
