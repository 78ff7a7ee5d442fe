"""Mean-field TEMPO: nonmarkov side by side with OQuPy 0.5.0 on the OQuPy paper's set.

Problem (the mean-field set of OQuPy's ``tests/performance/mean_field.py``,
written out in ``oqupy_mean_field.py``, whose docstring has the details): a
spin ensemble (one representative spin, fraction 1) coupled to a lossy cavity
mode a(t) by the mean-field equation
da/dt = -(i omega_c + kappa) a - (i Omega/2) Tr(sigma_- rho), with
H(t, a) = Omega/2 (a sigma_+ + a^* sigma_-), omega_c = -30.4, Omega = 303.9,
kappa = 15.2, Lindblad rates Gamma_down = 15.2 (sigma_-) and
Gamma_up = 0.8 Gamma_down (sigma_+), a(0) = sqrt(0.05), spin down; each spin
has an Ohmic bath (coupling sigma_z/2, alpha = 0.25, exponential cutoff
227.9, T = 39.3). dt = 2^-10, tcut = 0.1 (dkmax = 102), epsrel = 2^-26,
128 steps (t in [0, 0.125]).

Two methods, each run by both codes:

- ``tempo``: ``MeanFieldTempo(...).compute``;
- ``pt``: ``pt_tempo_compute`` (the process tensor of the bath), then
  ``compute_dynamics_with_field`` with it (timed apart, and summed).

Every run is its own process, one after the other (never two at once): the
nonmarkov runs with this interpreter, the OQuPy runs with the python of the
OQuPy 0.5.0 venv (``setup_oqupy_env.sh``), both executing
``oqupy_mean_field.py`` (``--library nonmarkov`` / ``--library oqupy``), so
both solve the same problem written once against OQuPy's API.

Accuracy: against a converged reference computed once by nonmarkov,
``MeanFieldTempo`` on the same time grid at the tighter epsrel
``--reference-epsrel`` (default 2^-32). Its own truncation error is estimated
by the same run at ``--reference-check-epsrel`` (default 2^-30); with
``--reference-dt-halving`` also the time-step error common to both codes
(the same model at dt/2, every second point compared). Columns: the max over
the run of | |a(t)| - |a_ref(t)| | and of |<sigma_z>(t) - <sigma_z>_ref(t)|
(states as the codes return them, not divided by their trace), and between
the two codes max |a_nm(t) - a_oq(t)| and the max |element| of
rho_nm(t) - rho_oq(t).

    python benchmarks/bench_mean_field.py [--json OUT] [--quick] [--skip-oqupy]
        [--methods tempo pt] [--steps N] [--epsrel E]
        [--reference-epsrel E] [--reference-check-epsrel E] [--reference-dt-halving]
        [--reference-cache DIR] [--nm-epsrel-scan E1 E2 ...] [--scan-methods tempo pt]
        [--profile DIR] [--oqupy-python PATH] [--threads N] [--nm-blas-threads N]

``--quick``: 32 steps (references too), for a smoke test. ``--nm-epsrel-scan``
adds nonmarkov runs at other epsrel values and ends with the
accuracy-matched comparison: OQuPy's time against the fastest nonmarkov run of
the same method whose errors (field and <sigma_z>) are at most OQuPy's.
``--profile DIR``: after the timed runs, one cProfile'd nonmarkov run per
method (DIR/nonmarkov_<method>.prof) and its top functions.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import sys
import time

import numpy as np

from _common import OQUPY_PYTHON_HELP, oqupy_python, subprocess_json, thread_env

HERE = os.path.dirname(os.path.abspath(__file__))
HELPER = os.path.join(HERE, "oqupy_mean_field.py")
DT = 2.0**-10
TCUT = 0.1
EPSREL = 2.0**-26
STEPS = 128
QUICK_STEPS = 32
PHASES = {"tempo": ["tempo"], "pt": ["pt_build", "dynamics", "total"]}


def _epsrel(text: str) -> float:
    """An epsrel argument: a float, or a power of two written ``2^-26`` or ``2**-26``."""
    value = text.replace("**", "^")
    if value.startswith("2^"):
        try:
            return 2.0 ** float(value[2:])
        except ValueError:
            pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or 2^k: {text!r}") from None


def _run(
    python: str,
    library: str,
    method: str,
    steps: int,
    epsrel: float,
    env: dict,
    dt: float = DT,
    profile: str | None = None,
) -> dict:
    """One run of ``oqupy_mean_field.py`` in its own process; its JSON record."""
    command = [python, HELPER, "--library", library, "--method", method]
    command += ["--steps", str(steps), "--dt", repr(dt), "--tcut", repr(TCUT)]
    command += ["--epsrel", repr(epsrel)]
    if profile:
        command += ["--profile", profile]
    start = time.perf_counter()
    record = subprocess_json(command, env)
    record["process_s"] = time.perf_counter() - start
    return record


def _arrays(record: dict) -> dict:
    """Times, complex field, complex states (systems, times, d, d), <sz> of a record."""
    shape = record["states_shape"]
    states = np.array(record["states_real"]) + 1j * np.array(record["states_imag"])
    return {
        "times": np.array(record["times"]),
        "field": np.array(record["field_real"]) + 1j * np.array(record["field_imag"]),
        "states": states.reshape(shape),
        "sigma_z": np.array(record["sigma_z"]),
        "trace": np.array(record["trace"]),
    }


def _common_points(a: dict, b: dict) -> tuple[np.ndarray, np.ndarray]:
    """Indices into ``a`` and ``b`` of the times they share (grids may differ by 2x)."""
    step = min(np.min(np.diff(a["times"])), np.min(np.diff(b["times"])))
    ka = np.rint(a["times"] / step).astype(int)
    kb = np.rint(b["times"] / step).astype(int)
    shared, ia, ib = np.intersect1d(ka, kb, return_indices=True)
    return ia, ib


def errors(record: dict, reference: dict) -> dict:
    """max | |a| - |a_ref| |, max |<sz> - <sz>_ref| and max |drho| over the shared times."""
    a, b = _arrays(record), _arrays(reference)
    ia, ib = _common_points(a, b)
    return {
        "field_abs": float(np.max(np.abs(np.abs(a["field"][ia]) - np.abs(b["field"][ib])))),
        "field": float(np.max(np.abs(a["field"][ia] - b["field"][ib]))),
        "sigma_z": float(np.max(np.abs(a["sigma_z"][ia] - b["sigma_z"][ib]))),
        "states": float(np.max(np.abs(a["states"][:, ia] - b["states"][:, ib]))),
        "points": int(len(ia)),
    }


def _reference(
    key: str, steps: int, epsrel: float, dt: float, env: dict, cache: str | None
) -> dict:
    """nonmarkov MeanFieldTempo at ``epsrel`` and ``dt`` (from the cache if it is there)."""
    path = os.path.join(cache, f"mean_field_{key}.json") if cache else None
    if path and os.path.exists(path):
        with open(path) as handle:
            record = json.load(handle)
        kept = record["parameters"]
        if (kept["epsrel"], kept["steps"], kept["dt"]) == (epsrel, steps, dt):
            record["from_cache"] = path
            return record
    record = _run(sys.executable, "nonmarkov", "tempo", steps, epsrel, env, dt=dt)
    if path:
        os.makedirs(cache, exist_ok=True)
        with open(path, "w") as handle:
            json.dump(record, handle)
    return record


def _git_state() -> dict:
    """The commit of this tree and whether src/ has uncommitted changes (read-only git)."""
    import subprocess

    def git(*arguments: str) -> str:
        result = subprocess.run(
            ["git", *arguments], cwd=HERE, capture_output=True, text=True, check=False
        )
        return result.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "src_changes": git("status", "--porcelain", "src")}


def _fmt(value: float | None, spec: str = ".2e") -> str:
    return "-" if value is None else format(value, spec)


def print_table(records: dict) -> list[dict]:
    """The main table (markdown); returns its rows."""
    reference = records["reference"]
    rows = []
    header = (
        "| method | phase | nonmarkov s | OQuPy s | OQuPy/nm | bond nm/oq | "
        "err abs(a) nm | err abs(a) oq | err sz nm | err sz oq |"
    )
    print("\n" + header)
    print("|" + "---|" * 10)
    for method in records["methods"]:
        ours = records["runs"][method]["nonmarkov"]
        theirs = records["runs"][method].get("oqupy")
        err_nm = errors(ours, reference)
        err_oq = errors(theirs, reference) if theirs else None
        for phase in PHASES[method]:
            t_nm = ours["wall_time_s"][phase]
            t_oq = theirs["wall_time_s"][phase] if theirs else None
            ratio = t_oq / t_nm if t_oq else None
            bond_oq = theirs.get("max_bond_dimension") if theirs else None
            row = {
                "method": method,
                "phase": phase,
                "nonmarkov_s": t_nm,
                "oqupy_s": t_oq,
                "ratio": ratio,
                "bond_nonmarkov": ours.get("max_bond_dimension"),
                "bond_oqupy": bond_oq,
                "error_nonmarkov": err_nm,
                "error_oqupy": err_oq,
            }
            rows.append(row)
            print(
                f"| {method} | {phase} | {t_nm:.2f} | {_fmt(t_oq, '.2f')} | "
                f"{_fmt(ratio, '.2f')} | {_fmt(ours.get('max_bond_dimension'), 'd')}/"
                f"{_fmt(bond_oq, 'd')} | {err_nm['field_abs']:.2e} | "
                f"{_fmt(err_oq and err_oq['field_abs'])} | {err_nm['sigma_z']:.2e} | "
                f"{_fmt(err_oq and err_oq['sigma_z'])} |"
            )
    if any("oqupy" in records["runs"][method] for method in records["methods"]):
        print("\nnonmarkov against OQuPy (same method, same parameters):")
        print(
            "| method | max abs(a_nm - a_oq) | max abs(rho_nm - rho_oq) | max abs(sz_nm - sz_oq) |"
        )
        print("|---|---|---|---|")
    for method in records["methods"]:
        theirs = records["runs"][method].get("oqupy")
        if not theirs:
            continue
        diff = errors(records["runs"][method]["nonmarkov"], theirs)
        records["runs"][method]["nonmarkov_vs_oqupy"] = diff
        print(f"| {method} | {diff['field']:.2e} | {diff['states']:.2e} | {diff['sigma_z']:.2e} |")
    check = records.get("reference_check")
    print(
        f"\nreference: nonmarkov MeanFieldTempo, dt {reference['parameters']['dt']:.6g}, "
        f"epsrel {reference['parameters']['epsrel']:.3g}, "
        f"bond {reference.get('max_bond_dimension')}, "
        f"{reference['wall_time_s']['tempo']:.1f} s"
    )
    if check:
        diff = errors(check, reference)
        records["reference_check_difference"] = diff
        print(
            f"  against epsrel {check['parameters']['epsrel']:.3g} (bond "
            f"{check.get('max_bond_dimension')}): max abs(a) diff {diff['field_abs']:.2e}, "
            f"sz {diff['sigma_z']:.2e}, field {diff['field']:.2e}"
        )
    fine = records.get("reference_dt_half")
    if fine:
        diff = errors(reference, fine)
        records["reference_dt_half_difference"] = diff
        print(
            f"  against dt/2 (epsrel {fine['parameters']['epsrel']:.3g}, bond "
            f"{fine.get('max_bond_dimension')}, {fine['wall_time_s']['tempo']:.1f} s; "
            f"{diff['points']} shared times): time-step error max abs(a) "
            f"{diff['field_abs']:.2e}, sz {diff['sigma_z']:.2e}"
        )
    return rows


def print_scan(records: dict) -> None:
    """nonmarkov runs at other epsrel values and the accuracy-matched ratio."""
    reference = records["reference"]
    for method in records["methods"]:
        entry = records["runs"][method]
        runs = [entry["nonmarkov"]] + entry.get("scan", [])
        if len(runs) < 2:
            continue
        print(f"\n{method}: nonmarkov against epsrel")
        print("| epsrel | time s | bond | err abs(a) | err sz |")
        print("|---|---|---|---|---|")
        for run in runs:
            err = errors(run, reference)
            print(
                f"| {run['parameters']['epsrel']:.3g} | {run['wall_time_s']['total']:.2f} | "
                f"{run.get('max_bond_dimension')} | {err['field_abs']:.2e} | "
                f"{err['sigma_z']:.2e} |"
            )
        theirs = entry.get("oqupy")
        if not theirs:
            continue
        target = errors(theirs, reference)
        good = [
            run
            for run in runs
            if errors(run, reference)["field_abs"] <= target["field_abs"]
            and errors(run, reference)["sigma_z"] <= target["sigma_z"]
        ]
        oq_s = theirs["wall_time_s"]["total"]
        if good:
            best = min(good, key=lambda run: run["wall_time_s"]["total"])
            seconds = best["wall_time_s"]["total"]
            entry["accuracy_matched"] = {
                "epsrel": best["parameters"]["epsrel"],
                "nonmarkov_s": seconds,
                "oqupy_s": oq_s,
                "ratio": oq_s / seconds,
            }
            print(
                f"accuracy-matched: OQuPy {oq_s:.2f} s (errors {target['field_abs']:.2e}, "
                f"{target['sigma_z']:.2e}) vs nonmarkov epsrel "
                f"{best['parameters']['epsrel']:.3g} {seconds:.2f} s: ratio {oq_s / seconds:.2f}"
            )
        else:
            print(
                f"accuracy-matched: no nonmarkov run reaches OQuPy's errors "
                f"({target['field_abs']:.2e}, {target['sigma_z']:.2e})"
            )


def print_profile(path: str, method: str, top: int) -> list[dict]:
    """Top functions of a cProfile file by own time (and their cumulative time)."""
    stats = pstats.Stats(path)
    total = stats.total_tt
    rows = []
    entries = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)
    print(f"\nprofile of nonmarkov {method} ({total:.1f} s profiled; {path}):")
    print("| function | calls | own s | own % | cumulative s |")
    print("|---|---|---|---|---|")
    for (filename, line, name), (_, calls, own, cumulative, _) in entries[:top]:
        short = filename.split("site-packages/")[-1].split("src/")[-1]
        label = f"{short}:{line}({name})"
        rows.append({"function": label, "calls": calls, "own_s": own, "cum_s": cumulative})
        print(f"| {label} | {calls} | {own:.2f} | {100 * own / total:.0f} | {cumulative:.2f} |")
    ours = [item for item in entries if "nonmarkov" in item[0][0]]
    ours.sort(key=lambda item: item[1][3], reverse=True)
    print(f"\nnonmarkov functions by cumulative time ({method}):")
    print("| function | calls | cumulative s | cumulative % |")
    print("|---|---|---|---|")
    for (filename, line, name), (_, calls, _, cumulative, _) in ours[:top]:
        label = f"{filename.split('src/')[-1]}:{line}({name})"
        print(f"| {label} | {calls} | {cumulative:.2f} | {100 * cumulative / total:.0f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="write all records to this JSON file")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps (smoke test)")
    parser.add_argument("--skip-oqupy", action="store_true", help="run nonmarkov only")
    parser.add_argument("--methods", nargs="+", choices=["tempo", "pt"], default=["tempo", "pt"])
    parser.add_argument("--steps", type=int, default=None, help=f"default {STEPS}")
    parser.add_argument("--epsrel", type=_epsrel, default=EPSREL, help="both codes (2^-26)")
    parser.add_argument("--reference-epsrel", type=_epsrel, default=2.0**-32)
    parser.add_argument(
        "--reference-check-epsrel",
        type=_epsrel,
        default=2.0**-30,
        help="a second reference run to estimate the reference's error (0: none)",
    )
    parser.add_argument(
        "--reference-dt-halving",
        action="store_true",
        help="also the reference at dt/2 (time-step error common to both codes)",
    )
    parser.add_argument("--reference-cache", default=None, help="keep and reuse the references")
    parser.add_argument(
        "--nm-epsrel-scan", type=_epsrel, nargs="+", default=[], help="e.g. 2^-27 2^-28"
    )
    parser.add_argument(
        "--scan-methods",
        nargs="+",
        choices=["tempo", "pt"],
        default=None,
        help="methods of --nm-epsrel-scan (default: all of --methods)",
    )
    parser.add_argument("--profile", default=None, help="directory for cProfile'd nonmarkov runs")
    parser.add_argument("--profile-top", type=int, default=20)
    parser.add_argument("--oqupy-python", default=None, help=OQUPY_PYTHON_HELP)
    parser.add_argument("--threads", type=int, default=None, help="BLAS threads of every run")
    parser.add_argument(
        "--nm-blas-threads",
        type=int,
        default=None,
        help="NONMARKOV_BLAS_THREADS of the nonmarkov runs (library default 1; 0: BLAS default)",
    )
    args = parser.parse_args(argv)
    steps = args.steps or (QUICK_STEPS if args.quick else STEPS)

    env = thread_env(args.threads)
    nm_env = dict(env)
    if args.nm_blas_threads is not None:
        nm_env["NONMARKOV_BLAS_THREADS"] = str(args.nm_blas_threads)
    oq_python = None if args.skip_oqupy else oqupy_python(args.oqupy_python)
    records: dict = {
        "problem": "OQuPy paper mean-field set (oqupy_mean_field.py)",
        "steps": steps,
        "epsrel": args.epsrel,
        "methods": args.methods,
        "runs": {},
        "argv": sys.argv[1:] if argv is None else argv,
        "load_average_start": list(os.getloadavg()),
        "git_start": _git_state(),
    }
    for method in args.methods:
        entry: dict = {}
        print(f"running nonmarkov {method} ...", flush=True)
        entry["nonmarkov"] = _run(sys.executable, "nonmarkov", method, steps, args.epsrel, nm_env)
        if oq_python:
            print(f"running OQuPy {method} ...", flush=True)
            entry["oqupy"] = _run(oq_python, "oqupy", method, steps, args.epsrel, env)
        entry["scan"] = []
        scanned = args.scan_methods is None or method in args.scan_methods
        for eps in args.nm_epsrel_scan if scanned else []:
            print(f"running nonmarkov {method} at epsrel {eps:.3g} ...", flush=True)
            entry["scan"].append(_run(sys.executable, "nonmarkov", method, steps, eps, nm_env))
        records["runs"][method] = entry
    cache = args.reference_cache
    print("reference ...", flush=True)
    records["reference"] = _reference(
        f"reference_{steps}", steps, args.reference_epsrel, DT, nm_env, cache
    )
    if args.reference_check_epsrel:
        records["reference_check"] = _reference(
            f"reference_check_{steps}", steps, args.reference_check_epsrel, DT, nm_env, cache
        )
    if args.reference_dt_halving:
        print("reference at dt/2 ...", flush=True)
        records["reference_dt_half"] = _reference(
            f"reference_dt_half_{steps}",
            2 * steps,
            args.reference_check_epsrel or args.reference_epsrel,
            DT / 2,
            nm_env,
            cache,
        )
    records["table"] = print_table(records)
    print_scan(records)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        records["profile"] = {}
        for method in args.methods:
            path = os.path.join(args.profile, f"nonmarkov_{method}.prof")
            print(f"\nprofiling nonmarkov {method} ...", flush=True)
            _run(sys.executable, "nonmarkov", method, steps, args.epsrel, nm_env, profile=path)
            records["profile"][method] = print_profile(path, method, args.profile_top)
    records["load_average_end"] = list(os.getloadavg())
    records["git_end"] = _git_state()
    if records["git_end"] != records["git_start"]:
        print("\nwarning: the nonmarkov tree changed during the run (see git_start / git_end)")
    print(
        f"\nload average at start {records['load_average_start'][0]:.2f}, "
        f"at end {records['load_average_end'][0]:.2f}; nonmarkov commit "
        f"{records['git_end']['commit'][:7]}"
        + (" with changes in src/" if records["git_end"]["src_changes"] else "")
    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
