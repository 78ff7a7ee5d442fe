"""Gibbs TEMPO and bath dynamics side by side with OQuPy 0.5, at matched accuracy.

Each run is one process of ``oqupy_equilibrium.py`` (the same problem code for
both libraries); times are of the phases inside it, one BLAS thread unless
``--threads`` says otherwise. Errors are against converged references computed
here with nonmarkov:

- ``gibbs``: the Richardson extrapolation (4 rho_2n - rho_n) / 3 of Gibbs TEMPO at
  n = ``--reference-steps`` and twice that, epsrel 1e-12 (the scheme is of second
  order in 1/n); the error is max |rho - rho_ref| over the entries. Then both
  codes on the same model with a Gaussian cutoff, n = 40: how far apart they are.
- ``bath``: the same problem at dt / 4 (4x the steps, epsrel 1e-7), sampled on the
  coarse grid; the error is max |w Delta n(w, t) - reference| over frequencies
  and times.

    python benchmarks/bench_equilibrium.py [--problems gibbs bath] [--n-steps 20 40 80]
        [--json out.json] [--no-oqupy] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from _common import add_comparison_arguments, oqupy_python, subprocess_json, thread_env

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oqupy_equilibrium.py")


def run(python: str, library: str, problem: str, env: dict, **values) -> dict:
    command = [python, HELPER, "--library", library, "--problem", problem]
    for key, value in values.items():
        text = value if isinstance(value, str) else repr(value)
        command += [f"--{key.replace('_', '-')}", text]
    return subprocess_json(command, env)


def state(record: dict) -> np.ndarray:
    return np.asarray(record["state_real"]) + 1j * np.asarray(record["state_imag"])


def gibbs_table(args, env, oqupy: str | None) -> list[dict]:
    n_ref = args.reference_steps
    coarse, fine = (
        state(run(sys.executable, "nonmarkov", "gibbs", env, n_steps=n, epsrel=1e-12))
        for n in (n_ref, 2 * n_ref)
    )
    reference = (4.0 * fine - coarse) / 3.0
    rows = []
    print(f"gibbs: reference = Richardson of n = {n_ref}, {2 * n_ref} (epsrel 1e-12)")
    header = ("n_steps", "epsrel", "nm s", "oq s", "oq/nm", "err nm", "err oq")
    print(" ".join(f"{h:>9}" for h in header))
    for n in args.n_steps:
        row = {"n_steps": n, "epsrel": args.gibbs_epsrel}
        for library, python in (("nonmarkov", sys.executable), ("oqupy", oqupy)):
            if python is None:
                continue
            record = run(python, library, "gibbs", env, n_steps=n, epsrel=args.gibbs_epsrel)
            row[library] = {
                "seconds": record["times"]["gibbs"],
                "error": float(np.abs(state(record) - reference).max()),
            }
        nm, oq = row["nonmarkov"], row.get("oqupy")
        ratio = f"{oq['seconds'] / nm['seconds']:6.2f}" if oq else "     -"
        print(
            f"{n:9d} {args.gibbs_epsrel:9.0e} {nm['seconds']:9.2f} "
            f"{oq['seconds'] if oq else float('nan'):9.2f} {ratio:>9} {nm['error']:9.2e} "
            f"{oq['error'] if oq else float('nan'):9.2e}"
        )
        rows.append(row)
    if oqupy is not None:
        # with a Gaussian cutoff OQuPy's imaginary-time integrals are accurate: same scheme
        states = [
            state(
                run(python, library, "gibbs", env, n_steps=40, epsrel=1e-11, cutoff_type="gaussian")
            )
            for library, python in (("nonmarkov", sys.executable), ("oqupy", oqupy))
        ]
        agreement = float(np.abs(states[0] - states[1]).max())
        print(f"gaussian cutoff, n_steps 40, epsrel 1e-11: max|rho_nm - rho_oq| = {agreement:.2e}")
        rows.append({"gaussian_agreement": agreement})
    return rows


def bath_table(args, env, oqupy: str | None) -> dict:
    dt, steps = 0.125, 256
    reference = run(
        sys.executable, "nonmarkov", "bath", env, dt=dt / 4, steps=4 * steps, epsrel=1e-7
    )
    exact = np.asarray(reference["energies"])[:, ::4]
    records = {}
    for library, python in (("nonmarkov", sys.executable), ("oqupy", oqupy)):
        if python is None:
            continue
        record = run(python, library, "bath", env, dt=dt, steps=steps)
        record["error"] = float(np.abs(np.asarray(record["energies"]) - exact).max())
        records[library] = record
    print(
        "bath dynamics: reference = nonmarkov at dt/4, epsrel 1e-7; "
        f"largest |w Delta n| = {np.abs(exact).max():.3e}"
    )
    print(f"{'phase':>20} {'nm s':>8} {'oq s':>8} {'oq/nm':>7}")
    phases = list(records["nonmarkov"]["times"]) + ["total"]
    for record in records.values():
        record["times"]["total"] = sum(record["times"].values())
    for phase in phases:
        nm = records["nonmarkov"]["times"][phase]
        oq = records["oqupy"]["times"][phase] if "oqupy" in records else float("nan")
        print(f"{phase:>20} {nm:8.2f} {oq:8.2f} {oq / nm:7.1f}")
    for library, record in records.items():
        print(f"{library:>10}: bond {record['bond']}, error {record['error']:.2e}")
    return {name: {k: r[k] for k in ("times", "bond", "error")} for name, r in records.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_comparison_arguments(parser, ["gibbs", "bath"], ["gibbs", "bath"], "unused")
    parser.add_argument("--n-steps", type=int, nargs="+", default=[20, 40, 80])
    parser.add_argument("--gibbs-epsrel", type=float, default=1e-10)
    parser.add_argument("--reference-steps", type=int, default=80)
    args = parser.parse_args(argv)
    env = thread_env(1 if args.threads is None else args.threads)
    oqupy = None if args.no_oqupy else oqupy_python(args.oqupy_python)
    results: dict = {}
    if "gibbs" in args.problems:
        results["gibbs"] = gibbs_table(args, env, oqupy)
    if "bath" in args.problems:
        results["bath"] = bath_table(args, env, oqupy)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
