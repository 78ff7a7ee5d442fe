"""PT-TEBD: nonmarkov side by side with OQuPy 0.5.0 on the OQuPy paper's set.

Problem (OQuPy's ``tests/performance/pt_tebd.py``, written out in
``oqupy_pt_tebd.py``, whose docstring has the details): a 7-site XY chain
(couplings 0.96/1.04, field 1), the first K = 0, 1, 2, 3 sites each with an
Ohmic bath (alpha 0.16 or 0.32, cutoff 1, T = 0, coupling sigma_z/2), dt = 1/16,
64 steps, second order, TEBD epsrel 2^-15.

Both codes run PT-TEBD with the very same process tensor: OQuPy's
``pt_tempo_compute`` (tcut 4, epsrel 2^-15, as OQuPy's file of that name),
computed once per alpha and handed to both through a file of MPO tensors
(``--save-pt``/``--load-pt`` of the helper), so that the comparison is of
PT-TEBD alone. Each run is its own process, one after the other.

Accuracy: against a reference computed once by nonmarkov with the same process
tensor at TEBD epsrel ``--reference-epsrel`` (default 2^-21); the error is the
max over sites, times and elements of |rho - rho_ref| (states as returned,
not divided by their trace). OQuPy runs at 2^-15 with each of its parallel
settings (``backend_config={'parallel': ...}``: none, multithread,
multiprocess; ``--oqupy-parallel``), its best time counts. nonmarkov runs at
2^-15 and at the larger epsrel values of ``--nm-epsrel-scan``; the matched
column is its fastest run whose error is at most OQuPy's.

    python benchmarks/bench_pt_tebd.py [--baths 0 1 2 3] [--alpha 0.16]
        [--sites 7] [--json OUT] [--skip-oqupy] [--oqupy-parallel none multithread]
        [--nm-epsrel-scan 2^-14 2^-13] [--reference-epsrel 2^-21] [--steps N]
        [--oqupy-python PATH] [--threads N]
    python benchmarks/bench_pt_tebd.py --xyz-check [--xyz-epsrel 1e-8] [--xyz-pt-epsrel 1e-7]

``--backends``: nonmarkov alone on the paper set, NumPy against JAX with the planner's
choice (``compiled='auto'``) and with the compiled engine (``compiled='on'``), each
in a fresh process, PT-TEBD run twice there (cold: kernels compiled in the run;
warm: a second run of the same problem), and the largest difference of each
JAX run's states from NumPy's::

    python benchmarks/bench_pt_tebd.py --backends [--baths 0 1 2] [--steps N] [--threads 1]

``--xyz-check``: OQuPy's ``examples/spin-chain.py`` (5-site XYZ chain, baths on
sites 3 and 4) run by both codes, each with its own process tensor, at tight
epsrel, and the largest difference of their states.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

from _common import OQUPY_PYTHON_HELP, oqupy_python, subprocess_json, thread_env

HERE = os.path.dirname(os.path.abspath(__file__))
HELPER = os.path.join(HERE, "oqupy_pt_tebd.py")
EPSREL = 2.0**-15


def _epsrel(text: str) -> float:
    """A float, or a power of two written ``2^-15`` or ``2**-15``."""
    value = text.replace("**", "^")
    if value.startswith("2^"):
        return 2.0 ** float(value[2:])
    return float(text)


def _run(python: str, library: str, env: dict, **options) -> dict:
    command = [python, HELPER, "--library", library, "--problem", "paper"]
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        command += [flag] if value is True else [flag, str(value)]
    start = time.perf_counter()
    record = subprocess_json(command, env)
    record["process_s"] = time.perf_counter() - start
    return record


def _states(record: dict) -> np.ndarray:
    states = np.array(record["states_real"]) + 1j * np.array(record["states_imag"])
    return states.reshape(record["states_shape"])


def error(record: dict, reference: dict) -> float:
    """max |rho - rho_ref| over sites, times and elements."""
    return float(np.max(np.abs(_states(record) - _states(reference))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baths", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--alpha", type=float, default=0.16)
    parser.add_argument("--sites", type=int, default=7)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--epsrel", type=_epsrel, default=EPSREL)
    parser.add_argument("--reference-epsrel", type=_epsrel, default=2.0**-21)
    parser.add_argument("--nm-epsrel-scan", type=_epsrel, nargs="*", default=[2.0**-14, 2.0**-13])
    parser.add_argument(
        "--oqupy-parallel",
        nargs="+",
        default=["none", "multithread", "multiprocess"],
        choices=["none", "multithread", "multiprocess"],
    )
    parser.add_argument("--skip-oqupy", action="store_true")
    parser.add_argument("--oqupy-python", default=None, help=OQUPY_PYTHON_HELP)
    parser.add_argument("--threads", type=int, default=None, help="BLAS threads of every run")
    parser.add_argument(
        "--xyz-check",
        action="store_true",
        help="instead: OQuPy's spin-chain example (5-site XYZ, baths on sites 3 and 4), "
        "both codes converged (each with its own process tensor), and their difference",
    )
    parser.add_argument("--xyz-epsrel", type=_epsrel, default=1e-8)
    parser.add_argument("--xyz-pt-epsrel", type=_epsrel, default=1e-7)
    parser.add_argument(
        "--backends",
        action="store_true",
        help="instead: nonmarkov on NumPy, JAX compiled='auto' and JAX compiled='on', "
        "cold and warm, side by side",
    )
    parser.add_argument("--worker", choices=sorted(SETTINGS), help=argparse.SUPPRESS)
    parser.add_argument("--load-pt", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.backends:
        backends(args)
        return
    if args.xyz_check:
        xyz_check(args)
        return
    env = thread_env(args.threads)
    oq_python = None if args.skip_oqupy else oqupy_python(args.oqupy_python)
    common = {"sites": args.sites, "alpha": args.alpha, "steps": args.steps}
    records: dict = {"parameters": vars(args), "runs": {}}
    with tempfile.TemporaryDirectory() as directory:
        pt_file = os.path.join(directory, "pt.npz")
        builder = oq_python or sys.executable
        library = "nonmarkov" if oq_python is None else "oqupy"
        build = _run(builder, library, env, save_pt=pt_file, pt_only=True, **common)
        records["pt"] = {"built_by": library, **build}
        print(f"process tensor ({library}): bond {build['pt_bond']}", file=sys.stderr)
        for baths in args.baths:
            shared = {"baths": baths, "load_pt": pt_file, **common}
            runs: dict = {}
            runs["reference"] = _run(
                sys.executable, "nonmarkov", env, epsrel=args.reference_epsrel, **shared
            )
            runs["nonmarkov"] = {
                repr(e): _run(sys.executable, "nonmarkov", env, epsrel=e, **shared)
                for e in [args.epsrel, *args.nm_epsrel_scan]
            }
            if oq_python is not None:
                runs["oqupy"] = {
                    parallel: _run(
                        oq_python, "oqupy", env, epsrel=args.epsrel, parallel=parallel, **shared
                    )
                    for parallel in args.oqupy_parallel
                }
            records["runs"][baths] = runs
            print(f"K = {baths} done", file=sys.stderr)
    rows = print_table(records, args.epsrel)
    if args.json:
        records["table"] = rows
        with open(args.json, "w") as handle:
            json.dump(records, handle)


#: the runs of ``--backends``: (backend, the ``compiled`` option)
SETTINGS = {"numpy": ("numpy", "auto"), "jax-auto": ("jax", "auto"), "jax-on": ("jax", "on")}


def worker(args: argparse.Namespace) -> None:
    """One setting of ``--backends`` in this process: PT-TEBD twice (cold, warm)."""
    sys.path.insert(0, HERE)
    backend, compiled = SETTINGS[args.worker]
    os.environ["NONMARKOV_BACKEND"] = backend
    import nonmarkov as nm
    import oqupy_pt_tebd as helper

    nm.set_default_options(compiled=compiled)
    sites, baths = args.sites, args.baths[0]
    chain, mps, dt, steps, bathed, make_pt = helper.build(
        nm, "paper", sites, baths, args.alpha, EPSREL
    )
    steps = steps if args.steps is None else args.steps
    if not os.path.exists(args.load_pt):  # the first run makes the process tensor
        make_pt().export(args.load_pt)
    pt = nm.import_process_tensor(args.load_pt, process_tensor_type="simple")
    pts = [pt if n in bathed else None for n in range(sites)]
    record: dict = {"setting": args.worker, "seconds": []}
    for _ in range(2):
        tebd = nm.PtTebd(
            initial_augmented_mps=mps,
            system_chain=chain,
            process_tensors=pts,
            parameters=nm.PtTebdParameters(dt=dt, order=2, epsrel=args.epsrel),
            dynamics_sites=list(range(sites)),
        )
        start = time.perf_counter()
        results = tebd.compute(steps, progress_type="silent")
        record["seconds"].append(time.perf_counter() - start)
        engine = tebd._engine  # the benchmark reports the engine's own record
        stats = getattr(engine, "stats", None)
        record.setdefault("kernels", []).append(getattr(stats, "kernels_compiled", 0))
        record.setdefault("programs", []).append(getattr(stats, "programs", 0))
        record.setdefault("redos", []).append(getattr(stats, "redos", 0))
        record["engine"] = type(engine).__name__
    states = np.array([results["dynamics"][n].states for n in range(sites)])
    record["bond"] = int(np.max(results["bond_dimensions"])) if sites > 1 else 1
    record["states_shape"] = list(states.shape)
    record["states_real"] = states.real.reshape(-1).tolist()
    record["states_imag"] = states.imag.reshape(-1).tolist()
    with open(args.json, "w") as handle:
        json.dump(record, handle)


def backends(args: argparse.Namespace) -> None:
    """NumPy, JAX auto and JAX compiled='on' side by side (see the module docstring)."""
    env = thread_env(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        pt_file = os.path.join(directory, "pt.hdf5")
        for baths in args.baths:
            runs = {}
            for setting in SETTINGS:
                command = [sys.executable, os.path.abspath(__file__), "--worker", setting]
                command += ["--baths", str(baths), "--load-pt", pt_file]
                command += ["--sites", str(args.sites), "--alpha", str(args.alpha)]
                command += ["--epsrel", str(args.epsrel)]
                if args.steps is not None:
                    command += ["--steps", str(args.steps)]
                runs[setting] = subprocess_json(command, env)
            rows.append({"baths": baths, "runs": runs})
    print(f"\nPT epsrel {EPSREL:.3g}; seconds of PtTebd.compute, cold / warm")
    print(
        "| K | bond | NumPy | JAX auto | JAX on | on/NumPy warm | kernels on | redos on | "
        "max diff auto | max diff on |"
    )
    print("|" + "---|" * 10)
    for row in rows:
        runs = row["runs"]
        base = _states(runs["numpy"])
        cells = [str(row["baths"]), str(runs["numpy"]["bond"])]
        for setting in SETTINGS:
            cold, warm = runs[setting]["seconds"]
            cells.append(f"{cold:.2f} / {warm:.2f}")
        cells.append(f"{runs['jax-on']['seconds'][1] / runs['numpy']['seconds'][1]:.2f}x")
        cells.append(str(runs["jax-on"]["kernels"][0]))
        cells.append(str(runs["jax-on"]["redos"][0]))
        for setting in ("jax-auto", "jax-on"):
            cells.append(f"{float(np.max(np.abs(_states(runs[setting]) - base))):.1e}")
        print("| " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"parameters": vars(args), "rows": rows}, handle)


def xyz_check(args: argparse.Namespace) -> None:
    """OQuPy's spin-chain example, both codes converged: max |rho_nm - rho_oq|."""
    env = thread_env(args.threads)
    options = {"epsrel": args.xyz_epsrel, "pt_epsrel": args.xyz_pt_epsrel}
    ours = _run_problem(sys.executable, "nonmarkov", env, "xyz", **options)
    theirs = _run_problem(oqupy_python(args.oqupy_python), "oqupy", env, "xyz", **options)
    difference = error(ours, theirs)
    print("\n| code | PT bond | chain bond | PT-TEBD s |")
    print("|---|---|---|---|")
    for name, record in (("nonmarkov", ours), ("OQuPy", theirs)):
        bond = max(record["max_bond"])
        print(f"| {name} | {record['pt_bond']} | {bond} | {record['wall_time_s']['pt_tebd']:.1f} |")
    print(f"\nmax |rho_nm - rho_oq| over sites, times, elements: {difference:.2e}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"nonmarkov": ours, "oqupy": theirs, "difference": difference}, handle)


def _run_problem(python: str, library: str, env: dict, problem: str, **options) -> dict:
    command = [python, HELPER, "--library", library, "--problem", problem]
    for key, value in options.items():
        command += ["--" + key.replace("_", "-"), str(value)]
    return subprocess_json(command, env)


def print_table(records: dict, epsrel: float) -> list[dict]:
    """The table (markdown); returns its rows."""
    header = (
        "| K baths | nm s (2^-15) | err nm | bond nm | OQuPy s (best) | setting | err OQuPy | "
        "bond OQuPy | OQuPy/nm same epsrel | nm matched s | epsrel | err | OQuPy/nm matched |"
    )
    print("\n" + header)
    print("|" + "---|" * 13)
    rows = []
    for baths, runs in records["runs"].items():
        reference = runs["reference"]
        ours = runs["nonmarkov"]
        same = ours[repr(epsrel)]
        err_nm = error(same, reference)
        row = {
            "baths": baths,
            "nm_s": same["wall_time_s"]["pt_tebd"],
            "nm_err": err_nm,
            "nm_bond": max(same["max_bond"]),
            "reference_bond": max(reference["max_bond"]),
        }
        theirs = runs.get("oqupy")
        cells = [str(baths), f"{row['nm_s']:.2f}", f"{err_nm:.1e}", str(row["nm_bond"])]
        if theirs:
            setting, best = min(theirs.items(), key=lambda kv: kv[1]["wall_time_s"]["pt_tebd"])
            err_oq = error(best, reference)
            t_oq = best["wall_time_s"]["pt_tebd"]
            candidates = [
                (r["wall_time_s"]["pt_tebd"], e, error(r, reference))
                for e, r in ours.items()
                if error(r, reference) <= err_oq
            ]
            matched = min(candidates) if candidates else None
            row.update(
                oqupy_s=t_oq,
                oqupy_setting=setting,
                oqupy_all_s={k: v["wall_time_s"]["pt_tebd"] for k, v in theirs.items()},
                oqupy_err=err_oq,
                oqupy_bond=max(best["max_bond"]),
                matched=matched,
            )
            cells += [f"{t_oq:.2f}", setting, f"{err_oq:.1e}", str(row["oqupy_bond"])]
            cells += [f"{t_oq / row['nm_s']:.2f}x"]
            if matched:
                cells += [f"{matched[0]:.2f}", f"{float(matched[1]):.2e}", f"{matched[2]:.1e}"]
                cells += [f"{t_oq / matched[0]:.2f}x"]
            else:
                cells += ["-"] * 4
        else:
            cells += ["-"] * 9
        print("| " + " | ".join(cells) + " |")
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
