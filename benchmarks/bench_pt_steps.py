"""PT-TEMPO steps at large bond dimension: NumPy (CPU) against JAX from one window.

A whole B3 (the PT at epsrel 1e-7, t in [0, 10], bond dimension rising to
several hundred) takes hours on NumPy, so a side-by-side run can only cover
its start, where the bonds are small and compilation dominates. This script
measures the steps where B3 spends its time instead:

1. a JAX process (device from ``--jax-platform``) runs the PT-TEMPO of the
   problem up to the checkpoint ``--at T`` (time to get there and bond
   dimension reported), saves the window and times ``--steps K`` more
   steps one by one (compilation of new buckets reported separately);
2. a NumPy process (``--numpy-blas-threads``, default all cores) loads the
   same window and times the same K steps with the NumPy kernels;
3. the table gives the seconds per step, the ratio and the check that both
   did the same steps: the kept ranks of every step and the whole chain
   after them (window and every finalised site) contracted with fixed random
   class vectors on every point but the newest, as a unit vector over its
   classes (gauge invariant, so runs with different SVDs compare too).

    python benchmarks/bench_pt_steps.py [--problem B3] [--at 4] [--steps 2]
        [--jax-platform cpu|cuda] [--jax-runs default svd=qr sitewise=on,levels=off]
        [--numpy-blas-threads N] [--json out.json] [--fastest out.json]
        [--fastest-label out.json]

Each ``--jax-runs`` item is one JAX process whose window engine
(``nonmarkov.engines.window_engine``) gets ``nonmarkov.options.EngineOptions``
with these fields changed from the library default (``svd=`` the ``svd``
field, ``sitewise=`` ``sitewise``, ``levels=`` ``site_levels``,
``host_start=on|off`` ``host_start``; ``default`` changes nothing; the
defaults come from the NONMARKOV_JAX_* environment variables). The host start
is off unless an item sets ``host_start=on``, so that every step is a
compiled one. Each run reaches the checkpoint itself, and NumPy (the host
engine, ``nonmarkov.engines.host.HostWindowEngine``) starts from the first
one's window. ``--fastest out.json`` prints the settings of the run with the
least step time without compilation as assignments of those environment
variables (for ``env``), ``--fastest-label out.json`` as its ``--jax-runs``
item (for ``bench_jax.py --jax-options``; ``default`` when there is none).

Problems and models are those of ``bench_jax.py`` (PT problems only).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import bench_jax
from _common import JAX_SETTINGS_HELP, jax_environment, jax_options, jax_settings, options_record

PT_PROBLEMS = [name for name, spec in bench_jax.PROBLEMS.items() if spec.get("kind") == "pt"]
SEED = 20261130
#: the issue's target for B3's large-bond steps: NumPy (all cores) / JAX on an accelerator
TARGET = 10.0


def _problem_influence(problem: str):
    """(nonmarkov, the discretised influence of the problem's bath as PtTempo builds it,
    the parameters)."""
    from nonmarkov.influence import DiscretisedInfluence

    spec = bench_jax.PROBLEMS[problem]
    nm, _, bath, _ = bench_jax._model(spec["spin"])
    parameters = nm.TempoParameters(
        dt=spec.get("dt", bench_jax.DT),
        tcut=spec.get("tcut", bench_jax.TCUT),
        epsrel=spec["epsrel"],
    )
    return nm, DiscretisedInfluence.from_parameters(bath, parameters, False), parameters


def chain_state(window: list[np.ndarray], finalised: list[np.ndarray]) -> np.ndarray:
    """The whole chain, the window (newest first) then every finalised site (newest
    first), contracted with fixed random class vectors on every point but the newest:
    a unit vector over the newest point's classes (all bonds contracted, so it does
    not depend on the gauge of the run)."""
    sites = list(window) + list(reversed(finalised))
    rng = np.random.default_rng(SEED)
    matrix = sites[0][0]  # (m, k): the front's class index stays open
    for site in sites[1:]:
        weights = rng.standard_normal(site.shape[1]) + 1j * rng.standard_normal(site.shape[1])
        matrix = np.einsum("al,lpr,p->ar", matrix, site, weights)
        matrix /= np.linalg.norm(matrix)
    return matrix[:, 0]


def _window_spec(influence, parameters):
    """PT-TEMPO's window of ``influence`` (``nonmarkov.engines.base.WindowSpec``),
    holding its first point."""
    from nonmarkov.methods.pt_tempo import first_point, pt_window_spec

    front, log_scale = first_point(influence)
    return pt_window_spec(influence, front, log_scale, parameters.epsrel, parameters.dkmax)


def _bonds(window: list[np.ndarray]) -> list[int]:
    """The right bond of every site of a host window (newest first): the kept ranks."""
    return [int(site.shape[2]) for site in window]


def run_jax(
    problem: str, at: float, steps: int, window_path: str, settings: str = "default"
) -> dict:
    """Run to the checkpoint on JAX with the engine options of ``settings``, save the
    window, time ``steps`` more steps."""
    import jax

    from nonmarkov.engines import window_engine
    from nonmarkov.options import default_options

    compile_seconds = [0.0]

    def listener(event: str, duration: float, **_: object) -> None:
        if (
            event in bench_jax.COMPILE_EVENTS
            and threading.current_thread() is threading.main_thread()
        ):
            compile_seconds[0] += duration

    jax.monitoring.register_event_duration_secs_listener(listener)
    # site by site, kernels may be compiled in a background thread: count the time the
    # steps wait for a kernel as compilation too
    from nonmarkov.engines.jax import sitewise

    lookup = sitewise._executable

    def timed_lookup(*lookup_args: object) -> object:
        counted, begin = compile_seconds[0], time.perf_counter()
        try:
            return lookup(*lookup_args)
        finally:  # the wait, less what the listener counted (compiled in this thread)
            if threading.current_thread() is threading.main_thread():
                compile_seconds[0] = counted + time.perf_counter() - begin

    sitewise._executable = timed_lookup
    nm, influence, parameters = _problem_influence(problem)
    options = jax_options(settings, default_options().replace(host_start=False))
    checkpoint = int(round(at / parameters.dt))
    start = time.perf_counter()
    engine = window_engine(_window_spec(influence, parameters), options)
    if not hasattr(engine, "compiled"):
        raise RuntimeError(
            f"the JAX run got a {type(engine).__name__}; is NONMARKOV_BACKEND=jax set?"
        )
    done, ranks = engine.advance_finalize(checkpoint - 1)
    before = [site for site, _ in done if site is not None]
    record = {
        "device": nm.backends.info()["default_device"],
        "checkpoint_step": checkpoint,
        "to_checkpoint_s": time.perf_counter() - start,
        "to_checkpoint_compile_s": compile_seconds[0],
        "bond": max(ranks),
        "options": options_record(options),
        "host_steps": int(getattr(engine, "host_steps", 0)),
    }
    window, log_scale = engine.host_window()
    np.savez(
        window_path,
        *window,
        *before,
        sizes=np.array([len(window), len(before)]),
        log_scale=np.array(log_scale),
    )
    finalised, step_s, step_compile_s, step_ranks = [], [], [], []
    for _ in range(steps):
        compile_before, begin = compile_seconds[0], time.perf_counter()
        done, ranks = engine.advance_finalize(1)
        step_s.append(time.perf_counter() - begin)
        step_compile_s.append(compile_seconds[0] - compile_before)
        step_ranks.append(_bonds(engine.host_window()[0]))  # untimed: one more fetch
        finalised.append(done[0][0])
    after, _ = engine.host_window()
    state = chain_state(after, before + finalised)
    record.update(
        step_s=step_s,
        step_compile_s=step_compile_s,
        ranks=step_ranks,
        sitewise=engine.compiled.sitewise,
        window_device=str(engine.compiled.device),  # where the device policy put it
        state_re=state.real.tolist(),
        state_im=state.imag.tolist(),
    )
    return record


def run_numpy(problem: str, at: float, steps: int, window_path: str) -> dict:
    """Load the window and time ``steps`` steps with the host window engine (NumPy)."""
    from nonmarkov._threads import hot_loop_threads
    from nonmarkov.engines.host import HostWindowEngine

    _, influence, parameters = _problem_influence(problem)
    with np.load(window_path) as data:
        count, before = data["sizes"]
        window = [data[f"arr_{k}"] for k in range(count)]
        finalised = [data[f"arr_{k}"] for k in range(count, count + before)]
        log_scale = float(data["log_scale"]) if "log_scale" in data else 0.0
    spec = _window_spec(influence, parameters)
    # the lag rows ahead of the timed steps (the engine asks for them on its first step)
    rows = {lag: spec.lag_rows(lag) for lag in range(1, len(window) + steps + 2)}
    spec = dataclasses.replace(
        spec, lag_rows=lambda lag: rows[lag] if lag in rows else influence.lag_matrix_rows(lag)
    )
    from nonmarkov.options import default_options

    # the sweep of the compiled JAX step, so that the two do the same steps (NumPy's
    # default zip-up agrees only within the truncation tolerance)
    engine = HostWindowEngine(spec, default_options().replace(window_sweep="exact"))
    engine.load_window(window, log_scale)
    step_s, step_ranks = [], []
    with hot_loop_threads():
        for _ in range(steps):
            begin = time.perf_counter()
            done, _ = engine.advance_finalize(1)
            step_s.append(time.perf_counter() - begin)
            step_ranks.append(_bonds(engine.host_window()[0]))
            finalised.append(done[0][0])
    state = chain_state(engine.host_window()[0], finalised)
    return {
        "step_s": step_s,
        "ranks": step_ranks,
        "state_re": state.real.tolist(),
        "state_im": state.imag.tolist(),
    }


def run_environment(label: str) -> dict[str, str]:
    """One ``--jax-runs`` item ("default" or "key=value,...") as assignments of the
    environment variables that give the engine options' defaults."""
    return jax_environment(label)


def _run_label(label: str) -> str:
    try:
        jax_settings(label)  # validates
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return label


def fastest_label(path: str) -> str | None:
    """The ``--jax-runs`` item of the JAX run in a ``--json`` file with the least step
    time without compilation (None if the file is missing or unreadable)."""
    try:
        with open(path) as handle:
            runs = json.load(handle)["jax"]
        return min(
            runs, key=lambda label: sum(runs[label]["step_s"]) - sum(runs[label]["step_compile_s"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def fastest_run(path: str) -> str:
    """Environment assignments of the JAX run in a ``--json`` file with the least step
    time without compilation (empty if the file is missing or unreadable)."""
    best = fastest_label(path)
    if best is None:
        return ""
    return " ".join(f"{key}={value}" for key, value in run_environment(best).items())


def _worker(
    kind: str, args: argparse.Namespace, env: dict, window_path: str, settings: str = "default"
) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "out.json")
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            kind,
            "--problem",
            args.problem,
            "--at",
            repr(args.at),
            "--steps",
            str(args.steps),
            "--window",
            window_path,
            "--json",
            path,
        ]
        if kind == "jax":
            command += ["--run-options", settings]
        subprocess.run(command, check=True, env=env)
        with open(path) as handle:
            return json.load(handle)


def _state(record: dict) -> np.ndarray:
    return np.array(record["state_re"]) + 1j * np.array(record["state_im"])


def _report(label: str, record: dict, numpy_record: dict) -> bool:
    """Print one JAX run against NumPy (and add the checks to ``record``); whether it
    agrees (same kept ranks, chain states within 1e-8)."""
    record["same_ranks"] = record["ranks"] == numpy_record["ranks"]
    record["state_difference"] = float(np.linalg.norm(_state(record) - _state(numpy_record)))
    print(
        f"JAX run {label!r} (site by site: {record['sitewise']}; window on "
        f"{record.get('window_device', record['device'])}): reached step "
        f"{record['checkpoint_step']} (bond {record['bond']}) in "
        f"{record['to_checkpoint_s']:.2f} s (compile {record['to_checkpoint_compile_s']:.2f} s)"
    )
    print(
        f"  {'step':>4} {'bond':>5} {'numpy s':>8} {'jax s':>8} {'compile s':>9} "
        f"{'numpy/jax':>9} {'without compile':>15}"
    )
    for k, (numpy_s, jax_s, compile_s) in enumerate(
        zip(numpy_record["step_s"], record["step_s"], record["step_compile_s"])
    ):
        print(
            f"  {record['checkpoint_step'] + k + 1:4d} {max(record['ranks'][k]):5d} "
            f"{numpy_s:8.2f} {jax_s:8.2f} {compile_s:9.2f} {numpy_s / jax_s:9.2f} "
            f"{numpy_s / max(jax_s - compile_s, 1e-9):15.2f}"
        )
    ratios = [
        numpy_s / max(jax_s - compile_s, 1e-9)
        for numpy_s, jax_s, compile_s in zip(
            numpy_record["step_s"], record["step_s"], record["step_compile_s"]
        )
    ]
    record["numpy_over_jax"] = ratios
    print(
        f"  NumPy/JAX per step without compilation: {min(ratios):.2f}-{max(ratios):.2f}x; "
        f"target >= {TARGET:g}x (large-bond B3 steps on an accelerator against NumPy on "
        f"all cores): {'met' if min(ratios) >= TARGET else 'NOT met'}"
    )
    print(
        f"  same kept ranks as NumPy: {'yes' if record['same_ranks'] else 'NO'}; "
        f"chain state after the steps: |difference| {record['state_difference']:.1e}",
        flush=True,
    )
    return record["same_ranks"] and record["state_difference"] < 1e-8


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="B3", choices=PT_PROBLEMS)
    parser.add_argument(
        "--at", type=float, default=4.0, help="checkpoint time (the steps start there; default 4)"
    )
    parser.add_argument("--steps", type=int, default=2, help="steps timed (default 2)")
    parser.add_argument("--jax-platform", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--jax-runs",
        nargs="+",
        default=["default"],
        type=_run_label,
        help="JAX processes to run, each " + JAX_SETTINGS_HELP + ", such as "
        "'svd=qr,sitewise=on' (see above; default: one, 'default')",
    )
    parser.add_argument(
        "--numpy-blas-threads",
        type=int,
        default=0,
        help="NONMARKOV_BLAS_THREADS of the NumPy process (0: all cores)",
    )
    parser.add_argument("--json", default=None, help="write the records to this JSON file")
    parser.add_argument(
        "--fastest",
        default=None,
        metavar="JSON",
        help="print the settings of the fastest JAX run (step time without "
        "compilation) in this --json file as environment assignments",
    )
    parser.add_argument(
        "--fastest-label",
        default=None,
        metavar="JSON",
        help="print the --jax-runs item of that run ('default' if none)",
    )
    parser.add_argument("--worker", default=None, choices=["jax", "numpy"], help=argparse.SUPPRESS)
    parser.add_argument("--window", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--run-options", default="default", type=_run_label, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fastest:
        print(fastest_run(args.fastest))
        return 0
    if args.fastest_label:
        print(fastest_label(args.fastest_label) or "default")
        return 0
    spec = bench_jax.PROBLEMS[args.problem]
    dt = spec.get("dt", bench_jax.DT)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1; got {args.steps}")
    tcut = spec.get("tcut", bench_jax.TCUT)
    if round(args.at / dt) < round(tcut / dt):
        parser.error(
            f"--at must be at least the memory time tcut = {tcut} of {args.problem} "
            f"(the window is full from there on); got {args.at}"
        )

    if args.worker:
        if args.worker == "jax":
            record = run_jax(args.problem, args.at, args.steps, args.window, args.run_options)
        else:
            record = run_numpy(args.problem, args.at, args.steps, args.window)
        with open(args.json, "w") as handle:
            json.dump(record, handle)
        return 0

    base = {key: value for key, value in os.environ.items() if key != "JAX_PLATFORMS"}
    base.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    base["NONMARKOV_PROGRESS"] = "silent"
    jax_records: dict[str, dict] = {}
    numpy_record: dict = {}
    passed = True
    with tempfile.TemporaryDirectory() as directory:
        # one run after the other, each printed when done (a time limit keeps the first)
        for label in args.jax_runs:
            window = os.path.join(directory, f"window_{len(jax_records)}.npz")
            try:
                record = _worker(
                    "jax",
                    args,
                    {
                        **base,
                        "NONMARKOV_BACKEND": "jax",
                        # the CPU stays enabled next to a GPU: the device policy uses it
                        "JAX_PLATFORMS": "cuda,cpu" if args.jax_platform == "cuda" else "cpu",
                    },
                    window,
                    label,
                )
            except subprocess.CalledProcessError as error:  # e.g. out of device memory
                print(f"JAX run {label!r} failed (exit status {error.returncode})", flush=True)
                passed = False
                continue
            jax_records[label] = record
            if not numpy_record:  # NumPy starts from the first run's window
                numpy_record.update(
                    _worker(
                        "numpy",
                        args,
                        {
                            **base,
                            "NONMARKOV_BACKEND": "numpy",
                            "NONMARKOV_BLAS_THREADS": str(args.numpy_blas_threads),
                        },
                        window,
                    )
                )
                print(
                    f"{args.problem}, {args.steps} steps from step {round(args.at / dt)}; "
                    f"NumPy with {args.numpy_blas_threads or 'all'} BLAS threads, JAX on "
                    f"{record['device']}"
                )
            passed = _report(label, record, numpy_record) and passed
            if args.json:
                with open(args.json, "w") as handle:
                    json.dump(
                        {
                            "problem": args.problem,
                            "at": args.at,
                            "jax": jax_records,
                            "numpy": numpy_record,
                        },
                        handle,
                    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
