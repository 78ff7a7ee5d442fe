"""Large-bond PT-TEMPO: nonmarkov side by side with OQuPy 0.5.0 at matched accuracy.

Problems: those of ``oqupy_large_bonds.py`` (spin 1 ``S1``, a biased hot spin
``HB``, strong-coupling spin-boson ``SB``, three levels ``L3``; its docstring
has the models). Each run builds the process tensor with ``pt_tempo_compute``
and computes the dynamics with it, in its own process, one after the other,
every BLAS pinned to ``--threads`` (default 1) threads: the nonmarkov runs
with this interpreter, the OQuPy runs with the python of the OQuPy 0.5.0 venv
(``setup_oqupy_env.sh``), both executing ``oqupy_large_bonds.py``.

Accuracy: against a reference computed by nonmarkov at ``--reference-epsrel``
(default 1e-8) with ``--reference-sweep`` (default ``zip_up``; the exact sweep
at that epsrel takes too long at these bonds), cached in ``--reference-cache``;
the column is the max over the run of the largest element of
|rho(t) - rho_ref(t)|. OQuPy runs at every epsrel of ``--epsrels``, nonmarkov
at every epsrel of ``--nm-epsrels`` (default: the same) with every sweep of
``--nm-sweeps``; the matched table gives, for every OQuPy run, the fastest nonmarkov run whose
error is at most OQuPy's, and the ratio of their total times; and the "robust" match, the
fastest run that is at least as accurate together with every tighter epsrel of its sweep
(errors are not monotonic in epsrel, so a lucky loose run does not set the ratio).

    python benchmarks/bench_large_bonds.py [--problems S1 HB SB L3]
        [--epsrels 1e-5 1e-6] [--nm-epsrels 1e-5 1e-6 1e-7] [--nm-sweeps zip_up exact]
        [--reference-epsrel 1e-8] [--reference-sweep zip_up|exact]
        [--reference-cache DIR] [--threads 1] [--nm-backends numpy jax]
        [--oqupy-python PATH] [--no-oqupy] [--json OUT]

``--nm-backends numpy jax`` runs every nonmarkov run on each backend (each in a
fresh process; JAX cold: its persistent compilation cache off), and prints the
JAX / NumPy time of each pair after the table, with the bonds and errors of both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from _common import OQUPY_PYTHON_HELP, oqupy_python, subprocess_json, thread_env

HERE = os.path.dirname(os.path.abspath(__file__))
HELPER = os.path.join(HERE, "oqupy_large_bonds.py")
PROBLEMS = ["S1", "HB", "SB", "L3"]


def _run(python: str, library: str, problem: str, epsrel: float, env: dict, sweep=None) -> dict:
    command = [python, HELPER, "--library", library, "--problem", problem, "--epsrel", str(epsrel)]
    if sweep is not None:
        command += ["--window-sweep", sweep]
    return subprocess_json(command, env)


def _states(record: dict) -> np.ndarray:
    return np.asarray(record["states_real"]) + 1j * np.asarray(record["states_imag"])


def _error(record: dict, reference: dict) -> float:
    return float(np.max(np.abs(_states(record) - _states(reference))))


def _robust(ours: list[dict], error: float) -> dict | None:
    """The loosest nonmarkov run from which every tighter epsrel (of its sweep) is at
    least as accurate as ``error``: the match that a lucky loose run cannot win."""
    best = None
    for sweep in sorted({record["code"] for record in ours}):
        runs = sorted(
            (record for record in ours if record["code"] == sweep),
            key=lambda record: record["parameters"]["epsrel"],
        )
        for record in runs:  # tightest first: stop at the first run less accurate
            if record["error"] > error:
                break
            if best is None or _total(record) < _total(best):
                best = record
    return best


def _total(record: dict) -> float:
    return record["wall_time_s"]["pt_build"] + record["wall_time_s"]["dynamics"]


def _reference(problem: str, args, env: dict) -> dict:
    path = None
    if args.reference_cache:
        os.makedirs(args.reference_cache, exist_ok=True)
        name = f"{problem}_{args.reference_sweep}_{args.reference_epsrel:g}.json"
        path = os.path.join(args.reference_cache, name)
        if os.path.exists(path):
            with open(path) as handle:
                return json.load(handle)
    record = _run(
        sys.executable, "nonmarkov", problem, args.reference_epsrel, env, args.reference_sweep
    )
    if path:
        with open(path, "w") as handle:
            json.dump(record, handle)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=PROBLEMS, choices=PROBLEMS)
    parser.add_argument("--epsrels", nargs="+", type=float, default=[1e-5, 1e-6])
    parser.add_argument("--nm-epsrels", nargs="+", type=float, default=None)
    parser.add_argument("--nm-sweeps", nargs="+", default=["zip_up"], choices=["zip_up", "exact"])
    parser.add_argument("--reference-epsrel", type=float, default=1e-8)
    parser.add_argument("--reference-sweep", default="zip_up", choices=["zip_up", "exact"])
    parser.add_argument("--reference-cache", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--nm-backends", nargs="+", default=["numpy"], choices=["numpy", "jax"])
    parser.add_argument("--oqupy-python", default=None, help=OQUPY_PYTHON_HELP)
    parser.add_argument("--no-oqupy", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    env = thread_env(args.threads)
    env["NONMARKOV_BLAS_THREADS"] = str(args.threads)
    oqupy = None if args.no_oqupy else oqupy_python(args.oqupy_python)
    records: list[dict] = []
    matched: list[str] = []
    print(
        f"{'problem':7s} {'code':16s} {'epsrel':>7s} {'bond':>5s} {'pt s':>8s} {'dyn s':>7s} "
        f"{'error':>9s}"
    )
    for problem in args.problems:
        reference = _reference(problem, args, env)
        runs = []
        pairs = []
        for epsrel in args.nm_epsrels or args.epsrels:
            for sweep in args.nm_sweeps:
                pair = {}
                for backend in args.nm_backends:
                    backend_env = {**env, "NONMARKOV_BACKEND": backend}
                    if backend == "jax":
                        backend_env["NONMARKOV_JAX_CACHE_DIR"] = "off"  # cold
                    record = _run(sys.executable, "nonmarkov", problem, epsrel, backend_env, sweep)
                    suffix = "" if backend == "numpy" else " jax"
                    runs.append((f"nonmarkov {sweep}{suffix}", epsrel, record))
                    pair[backend] = record
                pairs.append((sweep, epsrel, pair))
        for epsrel in args.epsrels if oqupy else []:
            runs.append(("oqupy 0.5.0", epsrel, _run(oqupy, "oqupy", problem, epsrel, env)))
        for code, epsrel, record in runs:
            record["error"] = _error(record, reference)
            record["code"] = code
            records.append(record)
            wall = record["wall_time_s"]
            print(
                f"{problem:7s} {code:16s} {epsrel:7.2g} {record['max_bond_dimension']:5d} "
                f"{wall['pt_build']:8.2f} {wall['dynamics']:7.2f} {record['error']:9.2e}",
                flush=True,
            )
        for sweep, epsrel, pair in pairs:
            if "numpy" in pair and "jax" in pair:
                on_numpy, on_jax = pair["numpy"], pair["jax"]
                matched.append(
                    f"{problem:7s} {sweep} {epsrel:7.2g}: JAX / NumPy time "
                    f"{_total(on_jax) / _total(on_numpy):.2f} ({_total(on_jax):.2f} s / "
                    f"{_total(on_numpy):.2f} s), bonds {on_jax['max_bond_dimension']} / "
                    f"{on_numpy['max_bond_dimension']}, errors {on_jax['error']:.2e} / "
                    f"{on_numpy['error']:.2e}"
                )
        ours = [
            record
            for code, _, record in runs
            if code.startswith("nonmarkov") and not code.endswith(" jax")
        ]
        for code, epsrel, theirs in runs:
            if not code.startswith("oqupy"):
                continue
            good = [record for record in ours if record["error"] <= theirs["error"]]
            if not good:
                matched.append(f"{problem:7s} OQuPy {epsrel:7.0e}: no nonmarkov run as accurate")
                continue
            best = min(good, key=_total)
            matched.append(
                f"{problem:7s} OQuPy {epsrel:7.0e} (error {theirs['error']:.2e}, bond "
                f"{theirs['max_bond_dimension']}, {_total(theirs):.2f} s) vs nonmarkov "
                f"{best['parameters']['epsrel']:7.2g} {best['code'][10:]} (error "
                f"{best['error']:.2e}, bond {best['max_bond_dimension']}, {_total(best):.2f} s): "
                f"{_total(theirs) / _total(best):.2f}x"
            )
            robust = _robust(ours, theirs["error"])
            if robust is not None:
                matched.append(
                    f"{'':7s}   robust: nonmarkov {robust['parameters']['epsrel']:7.2g} (all "
                    f"tighter runs as accurate; error {robust['error']:.2e}, bond "
                    f"{robust['max_bond_dimension']}, {_total(robust):.2f} s): "
                    f"{_total(theirs) / _total(robust):.2f}x"
                )
    if matched:
        print("\nJAX against NumPy, and matched accuracy (OQuPy time / fastest nonmarkov run")
        print("at least as accurate):")
        print("\n".join(matched))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"records": records, "matched": matched, "threads": args.threads}, handle)


if __name__ == "__main__":
    main()
