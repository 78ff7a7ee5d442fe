"""Run a spec (:mod:`nonmarkov.io.spec`): build its model, call the algorithms,
write the results.

Every run of a :class:`~nonmarkov.io.spec.Spec` holds its model objects (system,
baths, parameters, engine options), built and checked when the spec was read.
:func:`prepare_spec` names the files it will write, before anything runs: an
existing file is a ``FileExistsError``. :func:`run_spec` then runs them in order. Each run is
the calls a Python script would make:

- ``tempo``: :func:`~nonmarkov.tempo_compute` (one bath);
- ``pt-tempo``: :func:`~nonmarkov.pt_tempo_compute` per bath (``construction``
  as its ``method``), then :func:`~nonmarkov.compute_dynamics` with the list;
- ``uniform``: :func:`~nonmarkov.pt_uniform_compute` per bath, then
  :func:`~nonmarkov.compute_dynamics` for round((end - start) / dt) steps.

Runs of a sweep share the process tensor of a bath when it depends on the same
things (the bath, parameters, times, method, options:
:meth:`RunSpec.process_tensor_keys`): it is built once and every system is
propagated on it. Each run's :class:`~nonmarkov.Dynamics` is written to ``<name>.h5`` (a
sweep: ``<name>_<k>.h5``) with the spec, the sweep point, the observables and
the provenance in its metadata; the observables of all runs are plotted into
``<name>.png``.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import time
import warnings
from typing import Any

from .. import backends
from .._version import __version__
from ..io.atomic import atomic_path
from ..io.results import Dynamics, import_dynamics, plot_with_band
from ..io.spec import RunSpec, Spec, SpecError
from ..model.bath import Bath
from ..model.parameters import TempoParameters, guess_tempo_parameters
from ..model.system import System
from ..options import EngineOptions
from ..progress import check_progress_type, logger
from ..sweeps.grid import point_key
from ..sweeps.runner import SERIAL, result_arrays, sweep
from ..sweeps.store import Outcome
from ..sweeps.store import write_results as write_sweep_results
from .convergence import converge
from .dynamics import compute_dynamics
from .metadata import parameters_metadata
from .pt_construction import pt_tempo_compute
from .tempo import tempo_compute
from .uniform import pt_uniform_compute


@dataclasses.dataclass
class PreparedRun:
    """A run of a spec with its model objects and output file."""

    spec: RunSpec
    system: System
    baths: list[Bath]
    options: EngineOptions
    results_file: str
    #: bath index -> the file its process tensor goes to (those first built by this run)
    process_tensor_files: dict[int, str]


@dataclasses.dataclass
class RunResult:
    """What one run produced: its dynamics and where it was written
    (``reused_process_tensor``: every bath's process tensor came from an earlier run)."""

    spec: RunSpec
    dynamics: Dynamics
    results_file: str
    process_tensor_files: list[str]
    reused_process_tensor: bool


def prepare_spec(spec: Spec, output_dir: str, overwrite: bool = False) -> list[PreparedRun]:
    """Name the files of every run of ``spec`` (its model objects were built and
    checked when it was read) in ``output_dir``; nothing runs. Raises
    :class:`SpecError` (an output directory that is a file, an output path that
    would leave it or is a directory) or
    ``FileExistsError`` (a file that would be replaced, unless ``overwrite``)."""
    _output_directory(output_dir)
    count = len(spec.runs)
    width = len(str(count - 1))
    prepared = []
    seen: set[str] = set()  # runs with a key seen before reuse its process tensors
    for k, run in enumerate(spec.runs):
        baths = [bath.bath for bath in run.baths if bath.bath is not None]
        stem = spec.name if count == 1 else f"{spec.name}_{k:0{width}d}"
        pt_files = {}
        for j, key in enumerate(run.process_tensor_keys()):
            if run.save_process_tensor and key not in seen:
                pt_files[j] = _pt_file(os.path.join(output_dir, stem), j, len(baths))
            seen.add(key)
        prepared.append(
            PreparedRun(
                run,
                run.system,
                baths,
                run.engine_options,
                os.path.join(output_dir, f"{stem}.h5"),
                pt_files,
            )
        )
    targets = [p.results_file for p in prepared] + [
        f for p in prepared for f in p.process_tensor_files.values()
    ]
    if any(p.spec.plot for p in prepared):
        targets.append(plot_file(spec, output_dir))
    if spec.sweep_keys:
        targets.append(sweep_results_file(spec, output_dir))
    inside = os.path.realpath(output_dir)
    for target in targets:
        resolved = os.path.realpath(target)
        if os.path.commonpath([inside, resolved]) != inside or resolved == inside:
            raise SpecError(
                f"{spec.source}: the output {target!r} would be written outside the output "
                f"directory {output_dir!r}; the spec's name must be a plain file name"
            )
        if os.path.isdir(target) or (os.path.exists(target) and not os.path.isfile(target)):
            raise SpecError(
                f"{spec.source}: the output {target!r} exists and is not a file (a directory?); "
                "--overwrite replaces files only: remove it or choose another output directory"
            )
    existing = [target for target in targets if os.path.exists(target)]
    if existing and not overwrite:
        raise OutputExistsError(existing)
    return prepared


class OutputExistsError(FileExistsError):
    """Outputs of a spec that exist already (``existing``, the paths) and would be
    replaced; the message says how to replace them (``overwrite=True``;
    :meth:`message` with ``option`` for another caller's word, e.g. the command
    line's ``--overwrite``)."""

    def __init__(self, existing: list[str]):
        self.existing = list(existing)
        super().__init__(self.message("overwrite=True"))

    def message(self, option: str) -> str:
        """The error's text, naming ``option`` as the way to replace the files."""
        more = len(self.existing) - 1
        return (
            f"{self.existing[0]} exists"
            + (f" (and {more} more)" if more > 0 else "")
            + f"; pass {option} to replace, or choose another output directory"
        )


def _output_directory(output_dir: Any) -> None:
    """Refuse an output directory that is not a directory (a file, a FIFO...)."""
    if not isinstance(output_dir, (str, os.PathLike)) or not os.fspath(output_dir):
        raise SpecError(f"the output directory must be a path; got {output_dir!r}")
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise SpecError(
            f"the output directory {os.fspath(output_dir)!r} exists and is not a directory; "
            "choose a directory (-o) for the results"
        )


def stale_outputs(spec: Spec, output_dir: str, targets: list[str]) -> list[str]:
    """Files in ``output_dir`` that an earlier run of a spec of the same name wrote
    (``<name>.h5``, ``<name>_<k>.h5``, their ``_pt*.h5``, ``<name>.png``,
    ``<name>_sweep.h5``) and that this
    spec will not write again: removed by ``overwrite`` so that no old result looks
    current."""
    if not os.path.isdir(output_dir):
        return []
    name = re.escape(spec.name)
    pattern = re.compile(rf"{name}(_\d+)?(_pt\d*)?\.h5|{name}\.png|{name}_sweep\.h5")
    keep = {os.path.realpath(target) for target in targets}
    stale = []
    for entry in sorted(os.listdir(output_dir)):
        path = os.path.join(output_dir, entry)
        if pattern.fullmatch(entry) and os.path.isfile(path):
            if os.path.realpath(path) not in keep:
                stale.append(path)
    return stale


def _pt_file(stem: str, bath: int, count: int) -> str:
    return f"{stem}_pt{'' if count == 1 else bath}.h5"


def plot_file(spec: Spec, output_dir: str) -> str:
    """Where the plot of ``spec`` goes: ``<output_dir>/<name>.png``."""
    return os.path.join(output_dir, f"{spec.name}.png")


def provenance(command: list[str] | None = None) -> dict[str, Any]:
    """Who made a result, when and where: library version, backend, precision,
    Python, platform, UTC time and (if given) the command line."""
    described: dict[str, Any] = {
        "library_version": __version__,
        "backend": backends.get_backend(),
        "precision": backends.get_precision(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if command is not None:
        described["command"] = list(command)
    return described


def resolve_parameters(run: RunSpec, system: System, baths: list[Bath]) -> TempoParameters:
    """The TempoParameters of ``run``: as given, or guessed for its one bath and
    its system (:func:`~nonmarkov.guess_tempo_parameters`)."""
    if run.tempo_parameters is not None:
        return run.tempo_parameters
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*guess.*", category=UserWarning)
        parameters = guess_tempo_parameters(baths[0], run.start, run.end, system, run.tolerance)
    logger.warning(
        "guessed parameters dt=%g, dkmax=%s, epsrel=%g: a starting point; check "
        "convergence by tightening them",
        parameters.dt,
        parameters.dkmax,
        parameters.epsrel,
    )
    return parameters


def _num_steps(run: RunSpec, dt: float) -> int:
    return max(int(round((run.end - run.start) / dt)), 1)


def _build_process_tensor(
    prepared: PreparedRun, bath: Bath, parameters: TempoParameters, progress_type: str
) -> Any:
    run = prepared.spec
    name = f"{run.name}, {bath.name}"  # the spec's name and the bath's
    if run.method == "pt-tempo":
        return pt_tempo_compute(
            bath,
            run.start,
            run.end,
            parameters,
            unique=run.unique,
            progress_type=progress_type,
            method=run.construction,
            name=name,
            options=prepared.options,
        )
    return pt_uniform_compute(
        bath,
        parameters,
        unique=run.unique,
        progress_type=progress_type,
        name=name,
        options=prepared.options,
    )


@dataclasses.dataclass
class Execution:
    """One run done: its dynamics, the parameters used, the process tensors (one per
    bath), whether each came from an earlier run, and the seconds spent building."""

    dynamics: Dynamics
    parameters: TempoParameters
    process_tensors: list[Any]
    reused: list[bool]
    build_time: float


def _converge(prepared: PreparedRun, progress_type: str) -> Execution:
    """A run with a ``[convergence]`` table: :func:`~nonmarkov.converge` from the
    given parameters (or the guess at the convergence tolerance)."""
    run = prepared.spec
    settings = run.convergence or {}
    dynamics = converge(
        prepared.system,
        prepared.baths[0],
        run.initial_state,
        run.start,
        run.end,
        settings["tolerance"],
        observables=settings.get("observables"),
        max_cost=settings.get("max_cost"),
        max_seconds=settings.get("max_seconds"),
        parameters=run.tempo_parameters,
        method="tempo" if run.method == "tempo" else "process_tensor",
        unique=run.unique,
        progress_type=progress_type,
        name=run.name,
        options=prepared.options,
    )
    accepted = dynamics.metadata["convergence"]["parameters"]
    parameters = TempoParameters(
        dt=accepted["dt"],
        epsrel=accepted["epsrel"],
        dkmax=accepted["dkmax"],
        exponential_tail=run.tempo_parameters is not None and run.tempo_parameters.exponential_tail,
    )
    return Execution(dynamics, parameters, [], [], 0.0)


def execute(
    prepared: PreparedRun,
    progress_type: str | None = None,
    cache: dict[str, Any] | None = None,
) -> Execution:
    """Run one prepared run. ``cache`` (key -> process tensor) holds the process
    tensors of earlier runs; the ones this run builds are added."""
    run = prepared.spec
    progress_type = check_progress_type(progress_type)
    if run.convergence is not None:
        return _converge(prepared, progress_type)
    parameters = resolve_parameters(run, prepared.system, prepared.baths)
    if run.method == "tempo":
        dynamics = tempo_compute(
            prepared.system,
            prepared.baths[0],
            run.initial_state,
            run.start,
            run.end,
            parameters,
            unique=run.unique,
            progress_type=progress_type,
            name=run.name,
            options=prepared.options,
        )
        return Execution(dynamics, parameters, [], [], 0.0)
    cache = {} if cache is None else cache
    pts, reused = [], []
    started = time.perf_counter()
    for bath, key in zip(prepared.baths, run.process_tensor_keys()):
        key += repr(parameters_metadata(parameters))  # (guessed parameters may differ)
        reused.append(key in cache)
        if key not in cache:
            cache[key] = _build_process_tensor(prepared, bath, parameters, progress_type)
        pts.append(cache[key])
    build_time = time.perf_counter() - started
    if pts:
        num_steps = None if run.method == "pt-tempo" else _num_steps(run, parameters.dt)
        dynamics = compute_dynamics(
            prepared.system,
            run.initial_state,
            num_steps=num_steps,
            start_time=run.start,
            process_tensor=pts,
            progress_type=progress_type,
            options=prepared.options,
        )
    else:  # no bath: the Lindblad dynamics of the system alone
        dynamics = compute_dynamics(
            prepared.system,
            run.initial_state,
            dt=parameters.dt,
            num_steps=_num_steps(run, parameters.dt),
            start_time=run.start,
            progress_type=progress_type,
            options=prepared.options,
        )
    dynamics.name = run.name
    return Execution(dynamics, parameters, pts, reused, build_time)


def run_spec(
    spec: Spec,
    output_dir: str = "results",
    progress_type: str | None = None,
    overwrite: bool = False,
    command: list[str] | None = None,
) -> list[RunResult]:
    """Run every run of ``spec``, write each one's dynamics to ``output_dir`` and plot
    them all; returns what each run produced. All checks (:func:`prepare_spec`) come
    before the first run, and every run before the first file is written: a run that
    fails leaves the output directory as it was, but for the finished points of a
    sweep (:func:`sweep_directory`), which the same call made again reads back
    instead of running them. With ``overwrite``, the outputs of an earlier spec of
    the same name that this one does not write again are removed
    (:func:`stale_outputs`)."""
    progress_type = check_progress_type(progress_type)
    prepared_runs = prepare_spec(spec, output_dir, overwrite)
    outputs: list[tuple[Any, str]] = []  # (dynamics, process tensor or staged file, file)
    if spec.sweep_keys:
        results, swept = _run_sweep(spec, prepared_runs, output_dir, progress_type, command)
        outputs += [(staged, filename) for staged, filename in swept]
    else:
        prepared = prepared_runs[0]
        dynamics, built, reused = _run_one(spec, 0, prepared, progress_type, {}, command)
        outputs += built + [(dynamics, prepared.results_file)]
        results = [
            RunResult(
                prepared.spec,
                dynamics,
                prepared.results_file,
                [filename for _, filename in built],
                bool(reused) and all(reused),
            )
        ]
    targets = [filename for _, filename in outputs] + [plot_file(spec, output_dir)]
    if spec.sweep_keys:
        targets.append(sweep_results_file(spec, output_dir))
    os.makedirs(output_dir, exist_ok=True)
    if overwrite:
        for filename in stale_outputs(spec, output_dir, targets):
            os.remove(filename)
            logger.info("removed %s (an output of the spec this one replaces)", filename)
    for item, filename in outputs:
        if isinstance(item, str):  # a file the sweep staged, complete
            os.replace(item, filename)
        else:
            item.export(filename, overwrite=overwrite)
        logger.info("wrote %s", filename)
    if spec.sweep_keys:
        write_sweep_results(
            sweep_results_file(spec, output_dir),
            spec.sweep_keys,
            [result.spec.point for result in results],
            [_outcome(result.dynamics) for result in results],
            f"nonmarkov run {spec.name}",
        )
        for directory in sweep_directories(spec, output_dir):  # this one, and older ones
            shutil.rmtree(directory, ignore_errors=True)
    if any(result.spec.plot for result in results):
        plot_results(
            [result.dynamics for result in results],
            [_label(result.spec) for result in results],
            plot_file(spec, output_dir),
            title=spec.name,
        )
    return results


def _run_one(
    spec: Spec,
    k: int,
    prepared: PreparedRun,
    progress_type: str,
    cache: dict[str, Any],
    command: list[str] | None,
) -> tuple[Dynamics, list[tuple[Any, str]], list[bool]]:
    """Run ``k`` of ``spec``: its dynamics with the spec, parameters, observables and
    provenance in its metadata; the process tensors it built that are to be saved,
    with their files; whether each bath's process tensor came from ``cache``."""
    run = prepared.spec
    done = execute(prepared, progress_type, cache)
    dynamics = done.dynamics
    dynamics.description = run.description
    if _label(run) is not None:
        dynamics.name = f"{run.name} ({_label(run)})"
    dynamics.metadata.update(
        {
            "spec": {
                "text": spec.text,
                "source": spec.source,
                "name": spec.name,
                "run": k,
                "runs": len(spec.runs),
                "point": run.point,
                "method": run.method,
                "construction": run.construction if run.method == "pt-tempo" else None,
            },
            "parameters_used": parameters_metadata(done.parameters),
            "observables": {
                label: {"real": matrix.real.tolist(), "imag": matrix.imag.tolist()}
                for label, matrix in run.observables.items()
            },
            "provenance": provenance(command),
            "process_tensor_build": {
                "wall_time_s": done.build_time,
                "reused": bool(done.reused) and all(done.reused),
                "reused_per_bath": done.reused,
            },
        }
    )
    built = []
    if run.save_process_tensor:
        stem = os.path.splitext(prepared.results_file)[0]
        for j, (pt, reused) in enumerate(zip(done.process_tensors, done.reused)):
            if not reused:  # (a file not named in advance: guessed parameters that differ)
                filename = prepared.process_tensor_files.get(j) or _pt_file(
                    stem, j, len(done.process_tensors)
                )
                built.append((pt, filename))
    dynamics.metadata["process_tensor_files"] = [filename for _, filename in built]
    return dynamics, built, done.reused


def sweep_directory(spec: Spec, output_dir: str) -> str:
    """Where the runs of a spec's sweep are kept as they finish (the sweep's point
    files, each run's dynamics and process tensors), until all have finished:
    ``<output_dir>/<name>_sweep.points-<fingerprint>``, the fingerprint of the spec's
    text, the library version, the backend and the precision, so that only the
    same spec run the same way resumes from it."""
    described = [spec.text, __version__, backends.get_backend(), backends.get_precision()]
    fingerprint = hashlib.sha256(json.dumps(described).encode()).hexdigest()[:12]
    return os.path.join(output_dir, f"{spec.name}_sweep.points-{fingerprint}")


def sweep_directories(spec: Spec, output_dir: str) -> list[str]:
    """The :func:`sweep_directory` of every spec of this name in ``output_dir`` (of
    this spec, and of earlier versions of it): removed once this spec's outputs,
    which replace theirs, are written."""
    if not os.path.isdir(output_dir):
        return []
    pattern = re.compile(rf"{re.escape(spec.name)}_sweep\.points-[0-9a-f]{{12}}")
    return [
        os.path.join(output_dir, entry)
        for entry in sorted(os.listdir(output_dir))
        if pattern.fullmatch(entry) and os.path.isdir(os.path.join(output_dir, entry))
    ]


def sweep_results_file(spec: Spec, output_dir: str) -> str:
    """The sweep results file of a spec with a ``[sweep]``: ``<name>_sweep.h5``
    (:func:`nonmarkov.sweeps.import_sweep`: the grid by key path, and each run's
    ``times`` and ``states``)."""
    return os.path.join(output_dir, f"{spec.name}_sweep.h5")


def _outcome(dynamics: Dynamics) -> Outcome:
    return Outcome("ok", result_arrays(dynamics), "", dynamics.statistics.get("wall_time_s", 0.0))


def _run_sweep(
    spec: Spec,
    prepared_runs: list[PreparedRun],
    output_dir: str,
    progress_type: str,
    command: list[str] | None,
) -> tuple[list[RunResult], list[tuple[str, str]]]:
    """The runs of a spec's ``[sweep]`` on :func:`nonmarkov.sweeps.sweep`, in this
    process, one after another (runs that share a process tensor build it once):
    each finished run's files are staged in :func:`sweep_directory` with the
    sweep's point file, so that the call made again after an interruption or a
    failure reads them back instead of running them. Returns the results and the
    (staged file, output file) pairs; the first failure is raised after the other
    runs, with its sweep point."""
    directory = sweep_directory(spec, output_dir)
    index = {point_key(prepared.spec.point): k for k, prepared in enumerate(prepared_runs)}
    cache: dict[str, Any] = {}
    failures: dict[int, Exception] = {}
    computed: dict[int, Dynamics] = {}

    def run_point(**point: Any) -> Dynamics:
        k = index[point_key(point)]
        prepared = prepared_runs[k]
        logger.info("run %d of %d: %s", k + 1, len(prepared_runs), point_text(prepared.spec))
        try:
            dynamics, built, reused = _run_one(spec, k, prepared, progress_type, cache, command)
            for pt, filename in built:
                pt.export(_staged(directory, k, filename), overwrite=True)
            dynamics.export(_staged(directory, k, prepared.results_file), overwrite=True)
        except Exception as error:
            failures[k] = error
            raise
        computed[k] = dynamics
        return dynamics

    with warnings.catch_warnings():  # the first failure is raised below
        warnings.filterwarnings("ignore", message="sweep: .* failed", category=UserWarning)
        swept = sweep(
            run_point,
            [prepared.spec.point for prepared in prepared_runs],
            SERIAL,
            cache_dir=directory,
            progress_type=progress_type,
            key_paths=True,
        )
    if swept.failed:
        k = swept.failed[0]
        finished = len(swept.ok)
        note = (
            f"(run {k} of the sweep, at the sweep point {point_text(prepared_runs[k].spec)}; "
            f"{len(swept.failed)} of {len(swept)} runs failed; the {finished} finished are "
            f"kept in {directory}: the same command again runs only the others)"
        )
        error = failures.get(k)
        if error is None:
            raise RuntimeError(f"{swept.errors[k].strip()}\n{note}")
        error.add_note(note)
        raise error
    results, staged = [], []
    for k, prepared in enumerate(prepared_runs):
        if k in computed:
            dynamics = computed[k]
        else:  # finished by an earlier call
            dynamics = import_dynamics(_staged(directory, k, prepared.results_file))
        pt_files = list(dynamics.metadata.get("process_tensor_files", []))
        staged += [(_staged(directory, k, f), f) for f in pt_files]
        staged.append((_staged(directory, k, prepared.results_file), prepared.results_file))
        reused = dynamics.metadata["process_tensor_build"]["reused"]
        results.append(RunResult(prepared.spec, dynamics, prepared.results_file, pt_files, reused))
    return results, staged


def point_text(run: RunSpec) -> str:
    """The sweep point of ``run`` by key path: ``bath.alpha = 0.2, ...`` (``''``
    without a sweep)."""
    return ", ".join(f"{key} = {value!r}" for key, value in run.point.items())


def _staged(directory: str, k: int, filename: str) -> str:
    """Where run ``k`` of a sweep keeps the output ``filename`` until the sweep ends."""
    return os.path.join(directory, f"run-{k}-{os.path.basename(filename)}")


def _label(run: RunSpec) -> str | None:
    """The sweep point of ``run`` in words, e.g. ``0.25 sigma_z in H, initial state x+``."""
    if not run.point:
        return None
    return ", ".join(describe_sweep_value(key, value) for key, value in run.point.items())


#: how a legend names a swept key (its last part), where a short symbol is usual
_SYMBOLS = {"temperature": "T", "cutoff": "wc", "initial_state": "initial state"}


def describe_sweep_value(key: str, value: Any) -> str:
    """A swept ``key`` and its ``value`` as a legend reads them: ``alpha = 0.1``,
    ``T = 0.2``, ``0.25 sigma_z in H``, ``bath 1 alpha = 0.1``, ``initial state x+``,
    ``rate 0.05 (Lindblad 0)``; not ``sigma_z=0.25``, which reads like an
    expectation value."""
    parts = key.split(".")
    text = _value(value)
    if len(parts) == 3 and parts[:2] == ["system", "hamiltonian"]:
        return f"{text} {parts[2]} in H"
    if len(parts) >= 3 and parts[-2] == "coupling":
        where = " ".join(parts[:-2])
        return f"{text} {parts[-1]} in the coupling of {where}"
    if len(parts) == 4 and parts[:2] == ["system", "lindblad"]:
        return f"{parts[3]} {text} (Lindblad term {parts[2]})"
    if parts[0] == "method":  # method = "pt-tempo", method.construction = "..."
        return f"{'method' if parts[-1] in ('method', 'name') else parts[-1]} {text}"
    last = _SYMBOLS.get(parts[-1], parts[-1])
    if parts[-1] == "initial_state":
        return f"{last} {text}"
    prefix = f"bath {parts[1]} " if parts[0] == "bath" and len(parts) == 3 else ""
    return f"{prefix}{last} = {text}"


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    return text if len(text) <= 20 else text[:17] + "..."


def plot_results(
    dynamics_list: list[Dynamics],
    labels: list[str | None],
    filename: str,
    title: str = "",
    observables: dict[str, Any] | None = None,
) -> str:
    """Plot ``observables`` (label -> (d, d) matrix; None: the default observables
    of the first :class:`Dynamics`) of each dynamics, one panel per observable and
    one line per dynamics, into the PNG ``filename`` (matplotlib, Agg backend);
    returns ``filename``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if observables is None:
        observables = dynamics_list[0].default_observables()
    count = len(observables)
    figure, axes = plt.subplots(
        count, 1, figsize=(7, 2.2 * count + 0.6), sharex=True, squeeze=False
    )
    for dynamics, label in zip(dynamics_list, labels):
        times, values = dynamics.expectations_of(observables, real=True)
        if times is None:
            continue
        bands = dynamics.error_bands(observables)
        for ax, (name, series) in zip(axes[:, 0], values.items()):
            plot_with_band(ax, times, series, bands.get(name), label)
            ax.set_ylabel(_axis_label(name))
    axes[-1, 0].set_xlabel("time t")
    if any(label is not None for label in labels):
        axes[0, 0].legend(fontsize=7)
    if title:
        axes[0, 0].set_title(title)
    figure.tight_layout()
    _save_figure(figure, filename)
    plt.close(figure)
    logger.info("wrote the plot to %s", filename)
    return filename


def _axis_label(name: str) -> str:
    """``<name>``, with sigma_x etc. as Greek letters."""
    if name.startswith("sigma_") and name[6:] in ("x", "y", "z", "+", "-"):
        return rf"$\langle\sigma_{{{name[6:]}}}\rangle$"
    return rf"$\langle$ {name} $\rangle$"


def _save_figure(figure: Any, filename: str) -> None:
    """Save ``figure`` as a PNG that appears only when complete."""
    with atomic_path(filename) as temporary:
        with open(temporary, "wb") as handle:
            figure.savefig(handle, format="png", dpi=120)


def run_times(result: RunResult) -> tuple[float, float]:
    """(seconds building process tensors, seconds of the dynamics) of one run; TEMPO
    has no build (its one pass is the dynamics)."""
    build = result.dynamics.metadata.get("process_tensor_build", {}).get("wall_time_s", 0.0)
    seconds = result.dynamics.statistics.get("wall_time_s", 0.0)
    return float(build or 0.0), float(seconds or 0.0)


def summary(results: list[RunResult]) -> list[str]:
    """One line per run: where its results are and what it cost (the process-tensor
    build and the dynamics, in seconds, and the largest bond dimension)."""
    lines = []
    for result in results:
        build, seconds = run_times(result)
        reused = result.dynamics.metadata.get("process_tensor_build", {}).get("reused_per_bath")
        if result.spec.method == "tempo":
            cost = [f"TEMPO {seconds:.2f} s"]
        elif result.reused_process_tensor:
            cost = ["process tensor reused", f"dynamics {seconds:.2f} s"]
        else:
            built = f"process tensor {build:.2f} s"
            if reused and any(reused):
                built += f" ({sum(reused)} of {len(reused)} reused)"
            cost = [built, f"dynamics {seconds:.2f} s"]
        bond = result.dynamics.statistics.get("max_bond_dimension")
        if bond is not None:
            cost.append(f"max bond {bond}")
        lines.append(f"{result.results_file}: {len(result.dynamics)} states ({', '.join(cost)})")
    return lines


def summary_total(results: list[RunResult], wall_time: float) -> str:
    """The line that closes a spec's run: its runs, ``wall_time`` (seconds, all of it)
    and how much of it went into building process tensors and into the dynamics."""
    times = [run_times(result) for result in results]
    build = sum(b for b, _ in times)
    dynamics = sum(d for _, d in times)
    runs = f"{len(results)} run{'s' if len(results) != 1 else ''}"
    if all(result.spec.method == "tempo" for result in results):
        return f"done: {runs} in {wall_time:.1f} s (TEMPO {dynamics:.1f} s)"
    return (
        f"done: {runs} in {wall_time:.1f} s (process tensors built in {build:.1f} s, "
        f"dynamics {dynamics:.1f} s)"
    )
