"""``sweep``: a user function over a parameter grid, on any executor.

The points run on a ``concurrent.futures.Executor`` (a process pool by
default; ``dask.distributed.Client.get_executor()`` on a cluster). The
calling process gathers the outcomes as they arrive, writes each finished
point to its own file in the cache directory at once (atomically), and at the
end writes the one results file (:mod:`.store`). A point whose function raises
is recorded as failed with its traceback; the others go on. A sweep started
again with the same results file or cache directory reads the finished points
back instead of computing them (failed points are computed again).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import multiprocessing
import os
import pickle
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as default_np

from .. import validation as check
from .._threads import available_cores
from ..backends import get_backend, get_precision, set_backend
from ..io.batched_results import BatchedDynamics
from ..io.results import Dynamics
from ..progress import Progress, check_progress_type
from .grid import expand_grid, point_key
from .store import Outcome, SweepFileError, point_filename, read_point, read_results, write_point
from .store import write_results as write_results_file
from .sweep_results import SweepResults

#: Points handed to an executor that is not the default pool before their results
#: are collected (bounds the memory of results waiting in futures).
IN_FLIGHT = 256

#: Restarts of the default process pool after a worker process died, per sweep.
MAX_RESTARTS = 3

#: ``executor='serial'``: run every point in the calling process, one after another.
SERIAL = "serial"


def function_name(function: Callable[..., Any]) -> str:
    """A readable name of ``function`` (module.qualname; a partial's inner function)."""
    inner = function.func if isinstance(function, functools.partial) else function
    module = getattr(inner, "__module__", None) or ""
    name = getattr(inner, "__qualname__", None) or type(inner).__name__
    return f"{module}.{name}" if module else name


def result_arrays(value: Any) -> dict[str, default_np.ndarray]:
    """What a point's function returned, as named host arrays.

    A dict {name: array-like, Dynamics or BatchedDynamics}, a
    :class:`~nonmarkov.Dynamics` or :class:`~nonmarkov.BatchedDynamics`
    (``times``, ``states``), an array-like (``result``) or None (no arrays).
    Names are non-empty strings without '/'; arrays are numeric or boolean.
    Raises TypeError otherwise.
    """
    if value is None:
        return {}
    if isinstance(value, Dynamics | BatchedDynamics):
        return {
            "times": default_np.asarray(value.times),
            "states": default_np.asarray(value.states),
        }
    if not isinstance(value, Mapping):
        value = {"result": value}
    arrays: dict[str, default_np.ndarray] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name or "/" in name or name == ".":
            raise TypeError(
                f"the function returned a dict with the key {name!r}: keys must be "
                "non-empty strings without '/'"
            )
        if isinstance(item, Dynamics | BatchedDynamics):
            arrays[f"{name}.times"] = default_np.asarray(item.times)
            arrays[f"{name}.states"] = default_np.asarray(item.states)
            continue
        try:
            array = default_np.asarray(item)
        except Exception as error:  # any object a user may return
            raise TypeError(f"the function's result {name!r} is not an array: {error}") from error
        if array.dtype.kind not in "biufc":
            raise TypeError(
                f"the function's result {name!r} must be numeric or boolean (a number, an "
                f"array, a Dynamics); got dtype {array.dtype} from {type(item).__name__}"
            )
        arrays[name] = array
    return arrays


def evaluate(
    function: Callable[..., Any], point: dict[str, Any], backend: str, precision: str
) -> Outcome:
    """Run ``function(**point)`` on ``backend`` in ``precision`` (a worker's task):
    its arrays, or the exception's traceback; never raises for the function's errors."""
    start = time.perf_counter()
    try:
        if (get_backend(), get_precision()) != (backend, precision):
            set_backend(backend, precision)
        arrays = result_arrays(function(**point))
    except Exception:  # every failure of a point is kept, the sweep goes on
        return Outcome("failed", {}, traceback.format_exc(), time.perf_counter() - start)
    return Outcome("ok", arrays, "", time.perf_counter() - start)


def _limit_threads(threads: int) -> None:
    """Worker initialiser: at most ``threads`` BLAS/OpenMP threads per worker process."""
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)


def check_picklable(function: Callable[..., Any], default_pool: bool) -> None:
    """TypeError if a process pool cannot send ``function`` to its workers."""
    try:
        pickle.dumps(function)
    except Exception as error:  # PicklingError, AttributeError, TypeError
        raise TypeError(
            f"function {function_name(function)} cannot be pickled for a process pool "
            f"({type(error).__name__}: {error}): use a function defined at the top level "
            "of a module (not a lambda or a local function), functools.partial of one, "
            "executor='serial', a thread pool, or a Dask executor (it pickles closures)"
        ) from error
    main = sys.modules.get("__main__")
    inner = function.func if isinstance(function, functools.partial) else function
    if (
        default_pool
        and getattr(inner, "__module__", None) == "__main__"
        and not getattr(main, "__file__", None)
    ):
        raise TypeError(
            f"function {function_name(function)} is defined in an interactive session, "
            "which the default process pool's fresh workers cannot import: put it in a "
            "module (a .py file) and import it, or pass executor='serial' or a Dask executor"
        )


def _check_results_file(results_file: Any) -> str | None:
    if results_file is None:
        return None
    if not isinstance(results_file, str | os.PathLike):
        raise TypeError(f"results_file must be a path (str or os.PathLike); got {results_file!r}")
    filename = os.fspath(results_file)
    if os.path.splitext(filename)[1].lower() not in (".h5", ".hdf5"):
        raise ValueError(f"results_file must end in .h5 or .hdf5 (HDF5); got {filename!r}")
    directory = os.path.dirname(os.path.abspath(filename))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"the directory of results_file {filename!r} does not exist")
    return filename


class _Pool:
    """The executor of a sweep: a given one, or the default process pool, which the
    sweep owns and starts again (at most :data:`MAX_RESTARTS` times) when a worker
    process dies; None runs the points in this process."""

    def __init__(self, executor: Any, factory: Callable[[], Any] | None = None):
        self.executor = executor
        self._factory = factory
        self.restarts = 0

    def restart(self) -> bool:
        """A fresh default pool after a broken one; False for a given executor or
        after :data:`MAX_RESTARTS` restarts."""
        if self._factory is None or self.restarts >= MAX_RESTARTS:
            return False
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.executor = self._factory()
        self.restarts += 1
        return True

    def shutdown(self, wait: bool) -> None:
        """Shut the default pool down (a given executor is the caller's)."""
        if self._factory is not None:
            self.executor.shutdown(wait=wait, cancel_futures=True)


def _executor(executor: Any, max_workers: Any, num_points: int) -> tuple[_Pool, int]:
    """(the sweep's executor, points in flight at a time)."""
    if max_workers is not None:
        max_workers = check.positive_integer(max_workers, "max_workers")
        if executor is not None:
            raise ValueError(
                "max_workers sets the default process pool; with executor= it is unused"
            )
    if executor is None:
        cpus = available_cores()
        workers = max(1, min(num_points, max_workers or cpus))

        def factory() -> concurrent.futures.ProcessPoolExecutor:
            return concurrent.futures.ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_limit_threads,
                initargs=(max(1, cpus // workers),),
            )

        return _Pool(factory(), factory), 2 * workers
    if executor == SERIAL:
        return _Pool(None), 1
    if not isinstance(executor, concurrent.futures.Executor):
        raise TypeError(
            "executor must be None (a process pool), 'serial' or a concurrent.futures.Executor "
            f"(e.g. dask.distributed.Client(...).get_executor()); got {executor!r}"
        )
    return _Pool(executor), IN_FLIGHT


def _finished(
    names: list[str],
    points: list[dict[str, Any]],
    results_file: str | None,
    cache_dir: str | None,
) -> dict[int, Outcome]:
    """The finished (ok) points of an earlier run: from the results file, then the cache."""
    done: dict[int, Outcome] = {}
    keys = [point_key(p) for p in points]
    if results_file is not None and os.path.exists(results_file):
        try:
            _, old_points, outcomes, _ = read_results(results_file)
        except SweepFileError as error:
            raise SweepFileError(
                f"{error}; remove it or pass resume=False to compute every point"
            ) from error
        by_key = {point_key(p): o for p, o in zip(old_points, outcomes) if o.status == "ok"}
        done.update({i: by_key[k] for i, k in enumerate(keys) if k in by_key})
    if cache_dir is not None:
        for i, key in enumerate(keys):
            filename = point_filename(cache_dir, key)
            if i in done or not os.path.exists(filename):
                continue
            try:
                outcome = read_point(filename, key)
            except SweepFileError as error:
                warnings.warn(f"{error}: computing point {points[i]} again", stacklevel=3)
                continue
            if outcome.status == "ok":
                done[i] = outcome
    return done


def sweep(
    function: Callable[..., Any],
    parameter_grid: Any,
    executor: concurrent.futures.Executor | str | None = None,
    *,
    results_file: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    resume: bool = True,
    max_workers: int | None = None,
    progress_type: str | None = None,
    key_paths: bool = False,
) -> SweepResults:
    """Run ``function(**point)`` for every point of ``parameter_grid``.

    Parameters
    ----------
    function : called with each point's parameters as keyword arguments;
        returns a dict {name: array-like or Dynamics}, a Dynamics (stored as
        ``times`` (T,), ``states`` (T, d, d)), a BatchedDynamics (``states``
        (B, T, d, d)), an array-like (``result``) or None.
        Numbers and arrays must be numeric or boolean. With a process pool it
        must be picklable (a module-level function or a ``functools.partial``).
    parameter_grid : {name: [values, ...]} (the Cartesian product, the last
        name varying fastest) or a list of points [{name: value}, ...]; values
        are bool, int, finite float or str.
    executor : None (a process pool of min(points, CPUs) fresh workers, or
        ``max_workers``, each with CPUs/workers BLAS threads), ``'serial'`` (in
        this process, one point after another) or any
        ``concurrent.futures.Executor`` (e.g. ``ThreadPoolExecutor``,
        ``dask.distributed.Client(...).get_executor()``); a given executor is
        not shut down. Every point runs on the backend and precision active here.
    results_file : optional ``.h5`` file: the whole sweep (grid, per-point
        status, errors and arrays; layout in :mod:`nonmarkov.sweeps.store`),
        written atomically at the end (replacing an earlier one). Also read back
        by a resumed sweep.
    cache_dir : directory of the per-point files, each written atomically as
        its point finishes; default ``results_file + '.points'`` (removed once
        the results file is written), none without a results file (no resume).
        An explicit cache directory is kept.
    resume : True: points finished by an earlier run (in the results file or
        the cache directory, found by their parameter values) are read back, not
        computed; failed ones are computed again. False: compute every point.
        Use a new results file or cache directory when ``function`` changes.
    max_workers : workers of the default process pool.
    progress_type : ``'bar'``, ``'simple'`` or ``'silent'``.
    key_paths : False: parameter names are Python identifiers (keyword arguments
        of ``function``); True: any non-empty text, such as a spec's key paths
        ``bath.alpha`` (``function`` takes them as ``**point``).

    Returns a :class:`~nonmarkov.sweeps.SweepResults` in grid order. A point
    whose function raises is ``'failed'`` with its traceback in ``errors`` (a
    ``UserWarning`` counts them; :meth:`SweepResults.raise_failures` raises).
    Bad arguments raise TypeError/ValueError before any point runs.
    """
    if not callable(function):
        raise TypeError(f"function must be callable; got {function!r}")
    names, points = expand_grid(parameter_grid, keywords=not check.boolean(key_paths, "key_paths"))
    resume = check.boolean(resume, "resume")
    progress_type = check_progress_type(progress_type)
    results_file = _check_results_file(results_file)
    own_cache = cache_dir is None and results_file is not None
    if cache_dir is not None and not isinstance(cache_dir, str | os.PathLike):
        raise TypeError(f"cache_dir must be a path (str or os.PathLike); got {cache_dir!r}")
    directory = os.fspath(cache_dir) if cache_dir is not None else None
    if own_cache:
        directory = f"{results_file}.points"
    if directory is not None and os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"cache_dir {directory!r} exists and is not a directory")
    if isinstance(executor, concurrent.futures.ProcessPoolExecutor) or executor is None:
        check_picklable(function, executor is None)
    done = _finished(names, points, results_file, directory) if resume else {}
    todo = [i for i in range(len(points)) if i not in done]
    pool, in_flight = _executor(executor, max_workers, max(1, len(todo)))
    if directory is not None:
        os.makedirs(directory, exist_ok=True)
    outcomes: dict[int, Outcome] = dict(done)
    state = (get_backend(), get_precision())

    def record(index: int, outcome: Outcome) -> None:
        outcomes[index] = outcome
        if directory is not None:
            write_point(directory, point_key(points[index]), points[index], outcome)

    title = f"sweep ({len(done)} of {len(points)} points done before)" if done else "sweep"
    finished = False
    try:
        with Progress(len(todo), progress_type, title) as progress:
            for index, outcome in _outcomes(function, points, todo, pool, in_flight, state):
                record(index, outcome)
                progress.update(1)
                failed = sum(o.status != "ok" for o in outcomes.values())
                if failed:
                    progress.set_postfix(failed=failed)
        finished = True
    finally:
        # interrupted: return at once (the points running finish in their workers;
        # the finished ones are in the cache directory)
        pool.shutdown(wait=finished)
    ordered = [outcomes[i] for i in range(len(points))]
    name = function_name(function)
    if results_file is not None:
        write_results_file(results_file, names, points, ordered, name)
        if own_cache and directory is not None:
            _remove_points(directory, points)
    results = SweepResults(names, points, ordered, results_file, name)
    if results.failed:
        first = results.failed[0]
        last_line = (results.errors[first].strip().splitlines() or [""])[-1]
        warnings.warn(
            f"sweep: {len(results.failed)} of {len(points)} points failed (first: point "
            f"{first} {points[first]}: {last_line}); see SweepResults.errors",
            UserWarning,
            stacklevel=2,
        )
    return results


def _outcomes(
    function: Callable[..., Any],
    points: list[dict[str, Any]],
    todo: list[int],
    pool: _Pool,
    in_flight: int,
    state: tuple[str, str],
) -> Iterator[tuple[int, Outcome]]:
    """(index, outcome) of every point in ``todo`` as they finish; at most
    ``in_flight`` submitted at a time; pending ones cancelled on an interruption.

    A worker process that dies (killed, out of memory, a crash in compiled code)
    breaks a process pool: the points in flight are failed (which of them killed
    it cannot be told), a fresh default pool runs the others.
    """
    if pool.executor is None:
        for index in todo:
            yield index, evaluate(function, points[index], *state)
        return
    waiting = collections.deque(todo)
    running: dict[concurrent.futures.Future, int] = {}
    broken: BaseException | None = None

    def fill() -> None:
        nonlocal broken
        while waiting and len(running) < in_flight:
            try:
                future = pool.executor.submit(evaluate, function, points[waiting[0]], *state)
            except concurrent.futures.BrokenExecutor as error:
                broken = error
                return
            running[future] = waiting.popleft()

    try:
        while running or waiting:
            if broken is not None and not running:
                if not pool.restart():
                    for index in waiting:
                        yield index, _failed(f"not run: the executor broke ({broken!r})", broken)
                    return
                broken = None
            fill()
            if not running:
                continue
            finished, _ = concurrent.futures.wait(
                running, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in finished:
                index = running.pop(future)
                try:
                    outcome = future.result()
                except concurrent.futures.BrokenExecutor as error:
                    broken = error
                    outcome = _failed(
                        "a worker process died while this point was running or waiting "
                        "(killed, out of memory, or a crash in compiled code; this point "
                        "or another one in flight caused it)",
                        error,
                    )
                except Exception as error:  # a worker lost, a result that did not travel
                    outcome = _failed("the executor could not run this point", error)
                yield index, outcome
    finally:
        for future in running:
            future.cancel()


def _failed(reason: str, error: BaseException) -> Outcome:
    """A failed outcome: ``reason`` and the traceback of ``error``."""
    return Outcome("failed", {}, f"{reason}:\n" + "".join(traceback.format_exception(error)))


def _remove_points(directory: str, points: list[dict[str, Any]]) -> None:
    """Remove the point files of ``points`` (gathered into the results file) and
    the directory if nothing else is left in it."""
    for point in points:
        with contextlib.suppress(FileNotFoundError):
            os.remove(point_filename(directory, point_key(point)))
    with contextlib.suppress(OSError):
        os.rmdir(directory)
