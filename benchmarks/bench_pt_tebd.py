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
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
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
