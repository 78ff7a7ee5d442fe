"""B1 (TEMPO) and B2 (PT-TEMPO + dynamics): nonmarkov side by side with OQuPy 0.5.

Spin-boson model: H_S = 0.5 sigma_x, coupling 0.5 sigma_z,
PowerLawSD(alpha=0.3, zeta=1, cutoff=5, 'exponential', T=0), initial state up.

- B1: TEMPO, dt=0.1, tcut=3, epsrel=1e-4, t in [0, 10], unique=True.
- B2: PT-TEMPO, dt=1/16, tcut=4, epsrel=2**-14, 128 steps, then
  compute_dynamics from the process tensor.

Each run happens in its own process (so peak memory is per run): nonmarkov
with this interpreter, OQuPy with the interpreter of the separate virtual
environment made by ``setup_oqupy_env.sh``. The machine is shared and noisy,
so the table reports ratios of times measured in the same invocation.

    python benchmarks/bench_tempo.py [--problems B1 B2] [--json out.json]
        [--oqupy-python PATH | --no-oqupy] [--reference] [--threads N]
        [--epsrel-scan E1 E2 ...] [--reference-cache DIR]

``--reference`` also computes a converged reference (nonmarkov TEMPO with
epsrel 1e-7 on the same time grid and memory cut, for B2 too) and reports each
curve's error against it (columns "err nm" and "err oq"). ``--reference-cache``
keeps it in DIR/<problem>_reference.json and reuses it.

``--epsrel-scan`` adds nonmarkov runs at other epsrel values. With a reference
and OQuPy, the table ends with the accuracy-matched comparison: OQuPy's time
against the fastest nonmarkov run whose error is at most OQuPy's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

from _common import (
    add_comparison_arguments,
    comparison_cells,
    oqupy_python,
    spin_boson_model,
    subprocess_json,
    thread_env,
)

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEMS = {
    "B1": {"dt": 0.1, "tcut": 3.0, "epsrel": 1e-4, "end_time": 10.0},
    "B2": {"dt": 1.0 / 16.0, "tcut": 4.0, "epsrel": 2.0**-14, "steps": 128},
}


def run_nonmarkov(
    problem: str,
    epsrel: float | None = None,
    reference: bool = False,
    end_time: float | None = None,
) -> dict:
    """Run one problem with nonmarkov in this process; return the record.

    ``reference=True`` runs TEMPO (also for B2) on the problem's time grid;
    ``end_time`` overrides B1's end time.
    """
    start = time.perf_counter()
    nm, system, bath, rho0 = spin_boson_model()
    spec = dict(PROBLEMS[problem])
    if end_time is not None:
        spec["end_time"] = end_time
    epsrel = spec["epsrel"] if epsrel is None else epsrel
    record: dict = {
        "problem": problem,
        "code": "nonmarkov",
        "epsrel": epsrel,
        "backend": nm.backends.get_backend(),
        "import_s": time.perf_counter() - start,
    }
    parameters = nm.TempoParameters(dt=spec["dt"], tcut=spec["tcut"], epsrel=epsrel)
    if problem == "B1" or reference:
        start = time.perf_counter()
        end_time = spec.get("end_time", spec.get("steps", 0) * spec["dt"])
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=True)
        dynamics = tempo.compute(end_time, progress_type="silent")
        record["wall_time_s"] = {"tempo": time.perf_counter() - start}
        record["max_bond_dimension"] = tempo.max_bond_dimension
    else:
        start = time.perf_counter()
        end_time = spec["steps"] * spec["dt"]
        pt = nm.PtTempo(bath, 0.0, end_time, parameters).get_process_tensor(progress_type="silent")
        middle = time.perf_counter()
        dynamics = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
        record["wall_time_s"] = {
            "pt_build": middle - start,
            "dynamics": time.perf_counter() - middle,
        }
        record["max_bond_dimension"] = int(pt.get_bond_dimensions().max())
    times, sigma_z = dynamics.expectations(nm.operators.sigma("z"), real=True)
    record["times"] = times.tolist()
    record["sigma_z"] = sigma_z.tolist()
    record["trace"] = dynamics.expectations(real=True)[1].tolist()
    record["maxrss_kib_after"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return record


def _max_deviation(record: dict, other: dict) -> float:
    """max |<sigma_z>| difference, each curve divided by its trace."""
    a = np.array(record["sigma_z"]) / np.array(record["trace"])
    b = np.array(other["sigma_z"]) / np.array(other["trace"])
    n = min(len(a), len(b))
    return float(np.max(np.abs(a[:n] - b[:n])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_comparison_arguments(
        parser, list(PROBLEMS), ["B1", "B2"], "also compute a converged reference (epsrel 1e-7)"
    )
    parser.add_argument(
        "--epsrel-scan",
        type=float,
        nargs="+",
        default=[],
        help="extra nonmarkov runs at these epsrel values",
    )
    parser.add_argument(
        "--reference-cache",
        default=None,
        help="directory to keep and reuse the converged references",
    )
    parser.add_argument(
        "--epsrel", type=float, default=None, help="override the problems' epsrel (both codes)"
    )
    parser.add_argument(
        "--end-time", type=float, default=None, help="override B1's end time (both codes)"
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-epsrel", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-reference", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:  # a single nonmarkov run in its own process
        record = run_nonmarkov(
            args.worker, args.worker_epsrel, reference=args.worker_reference, end_time=args.end_time
        )
        with open(args.json, "w") as handle:
            json.dump(record, handle)
        return 0

    env = thread_env(args.threads)
    oqupy = None if args.no_oqupy else oqupy_python(args.oqupy_python)
    records: dict = {}
    for problem in args.problems:
        entry: dict = {}
        me = [sys.executable, os.path.abspath(__file__), "--worker", problem]
        overrides = [] if args.end_time is None else ["--end-time", repr(args.end_time)]
        me += overrides
        first = me if args.epsrel is None else me + ["--worker-epsrel", repr(args.epsrel)]
        entry["nonmarkov"] = subprocess_json(first, env)
        if oqupy:
            if args.epsrel is not None:
                overrides += ["--epsrel", repr(args.epsrel)]
            entry["oqupy"] = subprocess_json(
                [
                    oqupy,
                    os.path.join(HERE, "oqupy_reference.py"),
                    "--problem",
                    problem,
                    "--no-tracemalloc",
                ]
                + overrides,
                env,
            )
        entry["scan"] = [
            subprocess_json(me + ["--worker-epsrel", repr(eps)], env) for eps in args.epsrel_scan
        ]
        if args.reference:
            key = problem if args.end_time is None else f"{problem}_t{args.end_time:g}"
            entry["reference"] = _reference(key, me, env, args.reference_cache)
        records[problem] = entry

    print(
        f"\n{'problem':8} {'phase':10} {'nonmarkov s':>12} {'OQuPy s':>10} {'ratio':>7} "
        f"{'bond nm/oq':>11} {'maxrss MiB nm/oq':>17} {'|dsz| nm-oq':>12} "
        f"{'err nm':>9} {'err oq':>9}"
    )
    for problem, entry in records.items():
        ours = entry["nonmarkov"]
        theirs = entry.get("oqupy")
        reference = entry.get("reference")
        for phase, seconds in ours["wall_time_s"].items():
            phase_oq = {"tempo": "tempo_compute", "pt_build": "pt_build", "dynamics": "dynamics"}[
                phase
            ]
            other = theirs["wall_time_s"].get(phase_oq) if theirs else None
            cells = comparison_cells(ours, theirs, reference, seconds, other, _max_deviation)
            print(f"{problem:8} {phase:10} {seconds:12.2f} {cells}")
    _print_scan(records)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle)
    return 0


def _reference(key: str, command: list[str], env: dict, cache: str | None) -> dict:
    """The converged reference (``key`` names the problem), from the cache if it is there."""
    path = os.path.join(cache, f"{key}_reference.json") if cache else None
    if path and os.path.exists(path):
        with open(path) as handle:
            return json.load(handle)
    record = subprocess_json(command + ["--worker-epsrel", "1e-7", "--worker-reference"], env)
    if path:
        os.makedirs(cache, exist_ok=True)
        with open(path, "w") as handle:
            json.dump(record, handle)
    return record


def _print_scan(records: dict) -> None:
    """Error and time of every nonmarkov run; the accuracy-matched ratio."""
    for problem, entry in records.items():
        reference = entry.get("reference")
        runs = [entry["nonmarkov"]] + entry.get("scan", [])
        if not reference or len(runs) < 2:
            continue
        print(f"\n{problem}: nonmarkov against epsrel (error = max |<sz>/tr - reference|)")
        print(f"{'epsrel':>10} {'time s':>8} {'bond':>5} {'error':>9}")
        for run in runs:
            seconds = sum(run["wall_time_s"].values())
            print(
                f"{run['epsrel']:10.3g} {seconds:8.2f} {run['max_bond_dimension']:5d} "
                f"{_max_deviation(run, reference):9.2e}"
            )
        theirs = entry.get("oqupy")
        if not theirs:
            continue
        target = _max_deviation(theirs, reference)
        good = [run for run in runs if _max_deviation(run, reference) <= target]
        oq_seconds = sum(
            v
            for k, v in theirs["wall_time_s"].items()
            if k in ("tempo_compute", "pt_build", "dynamics")
        )
        if good:
            best = min(good, key=lambda run: sum(run["wall_time_s"].values()))
            seconds = sum(best["wall_time_s"].values())
            print(
                f"accuracy-matched: OQuPy {oq_seconds:.2f} s (error {target:.2e}) vs nonmarkov "
                f"epsrel {best['epsrel']:.3g} {seconds:.2f} s (error "
                f"{_max_deviation(best, reference):.2e}): ratio {oq_seconds / seconds:.1f}"
            )
        else:
            print(f"accuracy-matched: no nonmarkov run reaches OQuPy's error {target:.2e}")


if __name__ == "__main__":
    sys.exit(main())
