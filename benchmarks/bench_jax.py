"""TEMPO on the NumPy backend against the compiled JAX backend (CPU or GPU).

Bath of every problem: PowerLawSD(alpha=0.3, zeta=1, cutoff=5, 'exponential',
T=0); TEMPO with dt=0.1, tcut=3 (dkmax=30), unique=True, t in [0, 10].

- B1: spin-boson, H_S = 0.5 sigma_x, coupling 0.5 sigma_z, initial state up,
  epsrel=1e-4 (bond dimension ~10).
- B3: PT-TEMPO of the B1 bath and coupling at epsrel=1e-7 (dt=0.1, tcut=3,
  100 steps, t in [0, 10]), then ``compute_dynamics`` with B1's system: the
  bond dimension rises to several hundred once the memory window is full
  (170 at t = 4), so this is the problem for an accelerator. Long on NumPy:
  shorten it with ``--end-time B3=T``.
- B3T: TEMPO (not PT) of B1 at epsrel=1e-7 (bond dimension ~50).
- S1: spin 1, H_S = S_x, coupling S_z, initial state m=+1, epsrel=1e-4.
- B3S1: B3 for that spin-1 system: the PT of the same bath with the spin-1
  coupling S_z at epsrel=1e-7 (dt=0.1, tcut=3, t in [0, 10]), then
  ``compute_dynamics`` with S1's system (larger still than B3: five values
  of s+ - s- per point instead of three).
- B2: PT-TEMPO of the B1 bath and coupling (dt=1/16, tcut=4 so dkmax=64,
  epsrel=2**-14, 128 steps, t in [0, 8]), then ``compute_dynamics`` with
  H_S = 0.5 sigma_x from spin up.

For the PT problems the time column is PT-TEMPO plus the dynamics (each part
is also printed separately).

Every run happens in its own process. For each problem the table gives the
NumPy time, the JAX time of a cold process (with compilation; the
compilation part separately: seconds the steps waited for it + seconds
compiled in the background thread, overlapping the steps; ``host/comp``: the
window steps the JAX engine ran with the NumPy kernels on the host and compiled,
as its planner chose: ``JaxWindowEngine.stats``), the JAX time of a second
process that finds
the kernels in a persistent compilation cache (warm), the ratios to NumPy and
max |rho_numpy - rho_jax| over all time points.

    python benchmarks/bench_jax.py [--problems B1 B3 S1] [--end-time T | B3=T ...]
        [--jax-platform cpu|cuda] [--no-warm] [--backends numpy jax]
        [--numpy-blas-threads N] [--jax-cache DIR] [--trace-chunks]
        [--jax-options svd=qr,compiled=on] [--json out.json]

The JAX runs take their engine options (``nonmarkov.options.EngineOptions``)
from the library default (whose ``svd`` and ``device`` come from the
NONMARKOV_JAX_* environment variables) with the changes of ``--jax-options``
(default: none), passed as ``options=`` to
``Tempo``/``PtTempo``/``compute_dynamics``; each record keeps them
(``options``, and ``svd`` as before).

``--trace-chunks`` prints the JAX window engine's changes of plan (step, host
or compiled, bucket, why) and its statistics, and a progress bar of the NumPy
runs.

``--precision-check`` instead compares single with double precision on both
backends (in this process): B1 (spin-boson, t in [0, 10]) and an
independent-boson model with a closed-form solution (H_S = 0.5 sigma_z,
S = 0.5 sigma_z, alpha=0.2, cutoff=4, T=0, initial state |+>, dt=0.1, tcut=3,
epsrel=1e-6, t in [0, 5]: |rho_01(t)| = 0.5 (1 + 16 t^2)^-0.2).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from _common import JAX_SETTINGS_HELP, jax_options, jax_settings, options_record, spin_boson_model

PROBLEMS = {
    "B1": {"spin": "1/2", "epsrel": 1e-4, "end_time": 10.0},
    "B3": {"spin": "1/2", "epsrel": 1e-7, "end_time": 10.0, "kind": "pt"},
    "B3T": {"spin": "1/2", "epsrel": 1e-7, "end_time": 10.0},
    "S1": {"spin": "1", "epsrel": 1e-4, "end_time": 10.0},
    "B3S1": {"spin": "1", "epsrel": 1e-7, "end_time": 10.0, "kind": "pt"},
    "B2": {
        "spin": "1/2",
        "epsrel": 2.0**-14,
        "end_time": 8.0,
        "kind": "pt",
        "dt": 1.0 / 16.0,
        "tcut": 4.0,
    },
}
DT, TCUT = 0.1, 3.0
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


def _model(spin: str):
    nm, system, bath, rho0 = spin_boson_model()
    if spin == "1/2":
        return nm, system, bath, rho0
    coupling = np.diag([1.0, 0.0, -1.0]).astype(complex)
    hamiltonian = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=complex) / math.sqrt(2)
    rho0 = np.diag([1.0, 0.0, 0.0]).astype(complex)
    return nm, nm.System(hamiltonian), nm.Bath(coupling, bath.correlations), rho0


def _trace_decisions(engine: object) -> None:
    """Print the window engine's changes of plan (step, where, bucket, why) and its
    statistics to stderr (the JAX engine's ``stats``)."""
    stats = getattr(engine, "stats", None)
    if stats is None:
        return
    for step, where, bond, reason in stats.decisions:
        print(f"step {step}: {where}, bucket {bond} ({reason})", file=sys.stderr)
    print(f"stats: {stats}", file=sys.stderr, flush=True)


def _stats(engine: object) -> dict:
    """Host and compiled steps and kernels compiled by the JAX window engine (zeros on
    NumPy)."""
    stats = getattr(engine, "stats", None)
    if stats is None:
        return {"host_steps": 0, "compiled_steps": 0, "kernels_compiled": 0}
    return {
        "host_steps": stats.host_steps,
        "compiled_steps": stats.compiled_steps,
        "kernels_compiled": stats.kernels_compiled,
    }


def run_worker(
    problem: str, end_time: float, trace: bool = False, settings: str = "default"
) -> dict:
    """One TEMPO run with the backend of the environment and the engine options of
    ``settings`` (see ``--jax-options``); returns the record."""
    start = time.perf_counter()
    spec = PROBLEMS[problem]
    nm, system, bath, rho0 = _model(spec["spin"])
    backend = nm.backends.get_backend()
    progress = "bar" if trace and backend == "numpy" else "silent"
    compile_seconds = [0.0, 0.0]
    if backend == "jax":
        import jax

        def listener(event: str, duration: float, **_: object) -> None:
            # [0]: what the computing thread waited for; [1]: kernels compiled in the
            # background while host steps ran, which overlap the steps
            if event in COMPILE_EVENTS:
                main = threading.current_thread() is threading.main_thread()
                compile_seconds[0 if main else 1] += duration

        jax.monitoring.register_event_duration_secs_listener(listener)
    record: dict = {
        "problem": problem,
        "backend": backend,
        "end_time": end_time,
        "device": nm.backends.info()["default_device"],
        "import_s": time.perf_counter() - start,
    }
    options = jax_options(settings)
    record["svd"] = options.svd
    record["options"] = options_record(options)
    parameters = nm.TempoParameters(
        dt=spec.get("dt", DT), tcut=spec.get("tcut", TCUT), epsrel=spec["epsrel"]
    )
    start = time.perf_counter()
    if spec.get("kind") == "pt":
        pt_tempo = nm.PtTempo(bath, 0.0, end_time, parameters, options=options)
        process_tensor = pt_tempo.get_process_tensor(progress_type=progress)
        record["pt_s"] = time.perf_counter() - start
        record["pt_compile_s"] = compile_seconds[0]
        record["pt_compile_ahead_s"] = compile_seconds[1]
        middle = time.perf_counter()
        dynamics = nm.compute_dynamics(
            system, rho0, process_tensor=process_tensor, progress_type="silent", options=options
        )
        record["dynamics_s"] = time.perf_counter() - middle
        record["max_bond_dimension"] = pt_tempo.max_bond_dimension
        engine = pt_tempo.engine
    else:
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=True, options=options)
        dynamics = tempo.compute(end_time, progress_type=progress)
        record["max_bond_dimension"] = tempo.max_bond_dimension
        engine = tempo.engine
    record["tempo_s"] = time.perf_counter() - start
    record["compile_s"] = compile_seconds[0]
    record["compile_ahead_s"] = compile_seconds[1]
    record.update(_stats(engine))
    if trace:
        _trace_decisions(engine)
    record["steps"] = len(dynamics) - 1
    states = np.asarray(dynamics.states)
    record["states_re"] = states.real.tolist()
    record["states_im"] = states.imag.tolist()
    return record


def _window_dtype(engine: object) -> np.dtype:
    """The dtype of the window engine's window (through ``host_window``)."""
    window, _ = engine.host_window()
    return np.dtype(window[-1].dtype)


def precision_check() -> list[str]:
    """Max |rho_single - rho_double| (and the error against the exact IB solution)."""
    import nonmarkov as nm

    rows = [
        f"{'problem':8} {'backend':7} {'|single-double|':>15} {'err double':>10} "
        f"{'err single':>10} {'dtype':>9}"
    ]
    sz, sx = nm.operators.sigma("z"), nm.operators.sigma("x")
    for backend in ("numpy", "jax"):
        for problem in ("B1", "IB"):
            results = {}
            for precision in ("double", "single"):
                with nm.backends.use_backend(backend, precision):
                    if problem == "B1":
                        _, system, bath, rho0 = _model("1/2")
                        parameters = nm.TempoParameters(dt=DT, tcut=TCUT, epsrel=1e-4)
                        end_time = 10.0
                    else:
                        system = nm.System(0.5 * sz)
                        bath = nm.Bath(0.5 * sz, nm.PowerLawSD(0.2, 1.0, 4.0, temperature=0.0))
                        rho0 = 0.5 * (np.eye(2) + sx)
                        parameters = nm.TempoParameters(dt=DT, tcut=TCUT, epsrel=1e-6)
                        end_time = 5.0
                    tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=True)
                    dynamics = tempo.compute(end_time, progress_type="silent")
                    states = np.asarray(dynamics.states)
                    dtype = _window_dtype(tempo.engine)
                    results[precision] = (np.asarray(dynamics.times), states, str(dtype))
            times, double, _ = results["double"]
            single, dtype = results["single"][1], results["single"][2]
            errors = ["-", "-"]
            if problem == "IB":
                exact = 0.5 * (1.0 + 16.0 * times**2) ** -0.2
                errors = [
                    f"{np.max(np.abs(np.abs(r[:, 0, 1]) - exact)):.1e}" for r in (double, single)
                ]
            rows.append(
                f"{problem:8} {backend:7} {np.max(np.abs(single - double)):15.1e} "
                f"{errors[0]:>10} {errors[1]:>10} {dtype:>9}"
            )
            print(rows[-1], flush=True)
    return rows


def _run(
    problem: str, end_time: float, env: dict, trace: bool = False, settings: str = "default"
) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "out.json")
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            problem,
            "--end-time",
            f"{problem}={end_time!r}",
            "--json",
            path,
        ]
        command += ["--trace-chunks"] if trace else []
        command += ["--jax-options", settings] if settings != "default" else []
        subprocess.run(command, check=True, env=env)
        with open(path) as handle:
            return json.load(handle)


def _states(record: dict) -> np.ndarray:
    return np.array(record["states_re"]) + 1j * np.array(record["states_im"])


def _table_rows(
    problem: str, numpy_record: dict | None, cold: dict | None, warm: dict | None, record: dict
) -> list[str]:
    """The problem's table row (and the PT-TEMPO/dynamics split of a PT problem)."""

    def seconds(item: dict | None) -> str:
        return f"{item['tempo_s']:.2f}" if item else "-"

    def ratio(item: dict | None) -> str:
        return f"{item['tempo_s'] / numpy_record['tempo_s']:.2f}" if item and numpy_record else "-"

    deviation = "-"
    if numpy_record and cold:
        record["max_deviation"] = float(np.max(np.abs(_states(cold) - _states(numpy_record))))
        deviation = f"{record['max_deviation']:.1e}"
    first = numpy_record or cold
    compile_text = (
        f"{cold['compile_s']:.2f}+{cold.get('compile_ahead_s', 0.0):.2f}" if cold else "-"
    )
    host = f"{cold.get('host_steps', '-')}/{cold.get('compiled_steps', '-')}" if cold else "-"
    rows = [
        f"{problem:8} {first['steps']:5d} {first['max_bond_dimension']:5d} "
        f"{seconds(numpy_record):>8} {seconds(cold):>10} {compile_text:>10} {host:>9} "
        f"{seconds(warm):>10} {ratio(cold):>7} {ratio(warm):>7} {deviation:>9}  "
        f"{cold['device'] if cold else '-'}"
    ]
    if "pt_s" in first:
        parts = [("numpy", numpy_record), ("jax cold", cold), ("jax warm", warm)]
        rows.append(
            "  "
            + ", ".join(
                f"{name}: PT-TEMPO {item['pt_s']:.2f} s (compile {item['pt_compile_s']:.2f}"
                f"+{item.get('pt_compile_ahead_s', 0.0):.2f}), "
                f"dynamics {item['dynamics_s']:.2f} s"
                for name, item in parts
                if item
            )
        )
    return rows


def _end_times(values: list[str], parser: argparse.ArgumentParser) -> dict[str, float]:
    """End time of every problem from ``--end-time T`` / ``--end-time B3=T ...``."""
    end_times = {name: spec["end_time"] for name, spec in PROBLEMS.items()}
    for value in values:
        name, _, number = value.rpartition("=")
        try:
            end_time = float(number)
        except ValueError:
            parser.error(f"--end-time: not a number in {value!r}")
        if end_time <= 0.0:
            parser.error(f"--end-time must be positive; got {value!r}")
        if name and name not in PROBLEMS:
            parser.error(f"--end-time: unknown problem {name!r}; valid: {list(PROBLEMS)}")
        for problem in [name] if name else list(PROBLEMS):
            end_times[problem] = end_time
    return end_times


def _settings_label(label: str) -> str:
    """``--jax-options`` checked (argparse type)."""
    try:
        jax_settings(label)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return label


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=["B1"], choices=list(PROBLEMS))
    parser.add_argument(
        "--end-time",
        nargs="+",
        default=[],
        help="end time T for every problem, or PROBLEM=T for one (default: 10)",
    )
    parser.add_argument(
        "--jax-platform",
        default="cpu",
        choices=["cpu", "cuda"],
        help="JAX_PLATFORMS of the JAX runs (NumPy always runs on the CPU)",
    )
    parser.add_argument(
        "--no-warm",
        action="store_true",
        help="skip the second JAX process with a warm compilation cache",
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        default=["numpy", "jax"],
        choices=["numpy", "jax"],
        help="which backends to run (default both)",
    )
    parser.add_argument(
        "--numpy-blas-threads",
        type=int,
        default=None,
        help="NONMARKOV_BLAS_THREADS of the NumPy runs (0: BLAS default, "
        "all cores; default: the environment's, else 1)",
    )
    parser.add_argument(
        "--jax-cache",
        default=None,
        help="persistent compilation cache of the JAX runs (default: a new "
        "empty one per problem, so the first JAX run is cold)",
    )
    parser.add_argument(
        "--trace-chunks", action="store_true", help="print the progress of every run (see above)"
    )
    parser.add_argument(
        "--jax-options",
        default="default",
        type=_settings_label,
        help="engine options of the JAX runs on top of the library default: " + JAX_SETTINGS_HELP,
    )
    parser.add_argument("--json", default=None, help="write all records to this JSON file")
    parser.add_argument(
        "--precision-check",
        action="store_true",
        help="compare single with double precision instead (see above)",
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.precision_check:
        print("\n".join(precision_check()))
        return 0

    end_times = _end_times(args.end_time, parser)
    if args.worker:
        record = run_worker(
            args.worker, end_times[args.worker], args.trace_chunks, args.jax_options
        )
        with open(args.json, "w") as handle:
            json.dump(record, handle)
        return 0

    base = {
        key: value
        for key, value in os.environ.items()
        if key not in ("NONMARKOV_JAX_CACHE_DIR", "JAX_PLATFORMS")
    }
    base.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    records: dict = {}
    numpy_env = {**base, "NONMARKOV_BACKEND": "numpy"}
    if args.numpy_blas_threads is not None:
        numpy_env["NONMARKOV_BLAS_THREADS"] = str(args.numpy_blas_threads)
    header = (
        f"{'problem':8} {'steps':>5} {'bond':>5} {'numpy s':>8} {'jax cold s':>10} "
        f"{'compile s':>10} {'host/comp':>9} {'jax warm s':>10} {'cold/np':>7} {'warm/np':>7} "
        f"{'max|drho|':>9}  jax device"
    )
    rows = []
    for problem in args.problems:
        end_time = end_times[problem]
        numpy_record = cold = warm = None
        if "numpy" in args.backends:
            numpy_record = _run(problem, end_time, numpy_env, args.trace_chunks)
        if "jax" in args.backends:
            with tempfile.TemporaryDirectory() as cache:
                jax_env = {
                    **base,
                    "NONMARKOV_BACKEND": "jax",
                    # the CPU stays enabled next to a GPU: the device policy uses it
                    "JAX_PLATFORMS": "cuda,cpu" if args.jax_platform == "cuda" else "cpu",
                    "NONMARKOV_JAX_CACHE_DIR": args.jax_cache or cache,
                }
                cold = _run(problem, end_time, jax_env, args.trace_chunks, args.jax_options)
                if not args.no_warm:
                    warm = _run(problem, end_time, jax_env, settings=args.jax_options)
        records[problem] = {"numpy": numpy_record, "jax_cold": cold, "jax_warm": warm}
        rows.extend(_table_rows(problem, numpy_record, cold, warm, records[problem]))
        for row in rows[-2:] if "pt_s" in (numpy_record or cold) else rows[-1:]:
            print(row, flush=True)
        if args.json:  # after every problem, so that a long run leaves what it has
            with open(args.json, "w") as handle:
                json.dump(records, handle)
    print("\n" + header)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
