"""Accuracy per bond: PT-TEMPO truncated in a weighted norm against the flat one.

For each model the process tensor is built with PT-TEMPO at a ladder of
``epsrel`` (factors of 2 from ``--epsrel-max`` down) and with each class
weighting (``EngineOptions(truncation_weights=...)``, docs/truncation_weights.md),
the dynamics is computed, and its error is measured against a reference on
the same grid (same dt, tcut and end: only the truncation differs), built
flat at ``reference_epsrel``. The reference is checked against a second one
at ``check_epsrel`` (looser): their difference bounds the reference's own
error and is printed with the table.

Per model and weighting the table gives:

- ``bond``: the largest bond of the tightest run, and ``error`` its error,
  max over time and entries of |rho(t) - rho_ref(t)|;
- ``front x``: at matched bond, the error of the flat runs over that of the
  weighted runs (> 1: the weighting is more accurate), on the error front
  (the least error of any run of that weighting with a bond <= B), compared
  at the flat runs' bonds B within the range both cover: the geometric mean
  ``gmean``, the worst and the best (``min``/``max``) of those ratios; runs
  whose error is below :data:`RESOLVED` times the reference's check difference
  are left out (the reference does not resolve them);
- ``B(err<=X)``: the least bond at which a run of that weighting reached an
  error <= X (``-`` if none did), for the targets of ``--targets``.

Models (hbar = 1, Ohmic PowerLawSD(alpha, zeta=1, wc, 'exponential', T)):

- ``SB01``: spin-boson, H_S = 0.5 sigma_x, coupling sigma_z / 2, alpha = 0.1,
  wc = 5, T = 0, dt = 0.1, tcut = 1.5, t = 4, spin up;
- ``SB04``: the same at alpha = 0.4, tcut = 1, t = 3;
- ``S1``: spin 1, H_S = S_x, coupling S_z, alpha = 0.1, wc = 4, T = 0,
  dt = 0.2, tcut = 1.6, t = 4, initial |+1><+1|;
- ``HB``: biased and hot spin 1/2, H_S = 0.5 sigma_x + 0.5 sigma_z, coupling
  sigma_z / 2, alpha = 0.2, wc = 5, T = 1, dt = 0.1, tcut = 1.5, t = 4, spin up.

Weightings: ``flat`` (None), ``pop=w`` (the population classes s+ = s- by w,
the coherences by 1; the option's number), and for spin 1 ``graded=w`` (class
c by w^(1 - |s+ - s-| / max |s+ - s-|): populations w, the largest coherences
1, the others between; a per-class tuple).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_truncation_weights.py
        [--models SB01 SB04 S1 HB] [--weights 1 0.5 0.25 0.1] [--steps-down 10]
        [--epsrel-max 1e-3] [--targets 1e-3 3e-4 1e-4] [--json out.json]

Errors are the point, not times (one process, one thread is enough).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
import warnings

import numpy as np

import nonmarkov as nm
from nonmarkov.options import EngineOptions

MODELS = {
    "SB01": dict(
        kind="spin_boson", alpha=0.1, cutoff=5.0, temperature=0.0, dt=0.1, tcut=1.5, end=4.0
    ),
    "SB04": dict(
        kind="spin_boson", alpha=0.4, cutoff=5.0, temperature=0.0, dt=0.1, tcut=1.0, end=3.0
    ),
    "S1": dict(kind="spin_one", alpha=0.1, cutoff=4.0, temperature=0.0, dt=0.2, tcut=1.6, end=4.0),
    "HB": dict(kind="biased", alpha=0.2, cutoff=5.0, temperature=1.0, dt=0.1, tcut=1.5, end=4.0),
}
#: the flat reference and its check (looser), per model
REFERENCE_EPSREL = {
    "SB01": (1e-8, 3e-8),
    "SB04": (1e-8, 3e-8),
    "S1": (3e-8, 1e-7),
    "HB": (1e-8, 3e-8),
}
#: runs closer to the reference than this many times its check difference are
#: left out of the matched-bond comparison (the reference cannot resolve them)
RESOLVED = 3.0


def build_model(name: str):
    """(system, bath, initial state) of model ``name``."""
    spec = MODELS[name]
    sigma = nm.operators.sigma
    if spec["kind"] == "spin_one":
        sx = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=complex) / math.sqrt(2.0)
        hamiltonian, coupling = sx, np.diag([1.0, 0.0, -1.0]).astype(complex)
        state = np.diag([1.0, 0.0, 0.0]).astype(complex)
    elif spec["kind"] == "biased":
        hamiltonian, coupling = 0.5 * sigma("x") + 0.5 * sigma("z"), 0.5 * sigma("z")
        state = nm.operators.spin_dm("up")
    else:
        hamiltonian, coupling = 0.5 * sigma("x"), 0.5 * sigma("z")
        state = nm.operators.spin_dm("up")
    correlations = nm.PowerLawSD(
        alpha=spec["alpha"],
        zeta=1.0,
        cutoff=spec["cutoff"],
        cutoff_type="exponential",
        temperature=spec["temperature"],
    )
    return nm.System(hamiltonian), nm.Bath(coupling, correlations), state


def weighting_option(label: str, bath) -> float | tuple[float, ...] | None:
    """The ``truncation_weights`` option of a weighting label (see the module docstring)."""
    if label == "flat":
        return None
    kind, value = label.split("=")
    weight = float(value)
    if kind == "pop":
        return weight
    if kind == "graded":
        s_plus, s_minus = bath.liouville_eigenvalues()
        difference = np.abs(s_plus - s_minus)
        return tuple(float(w) for w in weight ** (1.0 - difference / difference.max()))
    raise ValueError(f"unknown weighting {label!r}: flat, pop=w or graded=w")


def solve(name: str, epsrel: float, option) -> tuple[int, np.ndarray, float]:
    """(max bond, states (N + 1, d, d), seconds) of model ``name`` at ``epsrel``."""
    spec = MODELS[name]
    system, bath, state = build_model(name)
    parameters = nm.TempoParameters(dt=spec["dt"], tcut=spec["tcut"], epsrel=epsrel)
    start = time.perf_counter()
    builder = nm.PtTempo(
        bath, 0.0, spec["end"], parameters, options=EngineOptions(truncation_weights=option)
    )
    process_tensor = builder.get_process_tensor(progress_type="silent")
    with warnings.catch_warnings():  # loose epsrel loses trace: that is measured, not warned
        warnings.simplefilter("ignore", UserWarning)
        dynamics = nm.compute_dynamics(
            system=system,
            initial_state=state,
            process_tensor=process_tensor,
            progress_type="silent",
        )
    return (
        builder.max_bond_dimension,
        np.asarray(dynamics.states),
        time.perf_counter() - start,
    )


def front(runs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The error front of runs: bonds sorted, least error of any run with bond <= B."""
    ordered = sorted(runs, key=lambda run: run["bond"])
    bonds = np.array([run["bond"] for run in ordered], dtype=float)
    errors = np.minimum.accumulate(np.array([run["error"] for run in ordered]))
    return bonds, errors


def front_at(bonds: np.ndarray, errors: np.ndarray, bond: float) -> float:
    """The front's error at ``bond`` (the last run with a bond <= ``bond``)."""
    index = int(np.searchsorted(bonds, bond, side="right")) - 1
    return float(errors[index]) if index >= 0 else math.inf


def compare(flat: list[dict], weighted: list[dict], floor: float = 0.0) -> dict:
    """Flat over weighted front errors at the flat runs' bonds both fronts cover,
    runs with an error below ``floor`` left out."""
    flat = [run for run in flat if run["error"] >= floor]
    weighted = [run for run in weighted if run["error"] >= floor]
    if not flat or not weighted:
        return {"gmean": math.nan, "min": math.nan, "max": math.nan, "points": 0}
    flat_bonds, flat_errors = front(flat)
    bonds, errors = front(weighted)
    ratios = [
        front_at(flat_bonds, flat_errors, bond) / front_at(bonds, errors, bond)
        for bond in flat_bonds
        if bonds[0] <= bond <= bonds[-1]
    ]
    if not ratios:
        return {"gmean": math.nan, "min": math.nan, "max": math.nan, "points": 0}
    logs = np.log(ratios)
    return {
        "gmean": float(np.exp(np.mean(logs))),
        "min": float(np.min(ratios)),
        "max": float(np.max(ratios)),
        "points": len(ratios),
    }


def bond_for(runs: list[dict], target: float) -> int | None:
    """The least bond of a run with an error <= ``target``, or None."""
    bonds = [run["bond"] for run in runs if run["error"] <= target]
    return min(bonds) if bonds else None


def study(name: str, labels: list[str], epsrels: list[float], log) -> dict:
    """Reference, check and every (weighting, epsrel) run of model ``name``."""
    _, bath, _ = build_model(name)
    tight, check = REFERENCE_EPSREL[name]
    ref_bond, reference, ref_seconds = solve(name, tight, None)
    check_bond, checked, _ = solve(name, check, None)
    record: dict = {
        "model": name,
        "spec": MODELS[name],
        "reference": {
            "epsrel": tight,
            "bond": ref_bond,
            "seconds": ref_seconds,
            "check_epsrel": check,
            "check_bond": check_bond,
            "check_difference": float(np.max(np.abs(checked - reference))),
        },
        "weightings": {},
    }
    log(
        f"{name}: reference epsrel {tight:g} bond {ref_bond} ({ref_seconds:.1f} s); "
        f"epsrel {check:g} (bond {check_bond}) differs by "
        f"{record['reference']['check_difference']:.1e}"
    )
    for label in labels:
        option = weighting_option(label, bath)
        runs = []
        for epsrel in epsrels:
            bond, states, seconds = solve(name, epsrel, option)
            error = float(np.max(np.abs(states - reference)))
            runs.append({"epsrel": epsrel, "bond": bond, "error": error, "seconds": seconds})
        record["weightings"][label] = {"option": option, "runs": runs}
        log(f"  {label:>10}: " + " ".join(f"{r['bond']}:{r['error']:.1e}" for r in runs))
    flat = record["weightings"]["flat"]["runs"]
    floor = RESOLVED * record["reference"]["check_difference"]
    for label in labels:
        entry = record["weightings"][label]
        entry["matched_bond"] = compare(flat, entry["runs"], floor)
    return record


def table(records: list[dict], targets: list[float]) -> str:
    """The Markdown table of the study."""
    head = (
        "| model | weighting | bond | error | front x gmean | min | max | "
        + " | ".join(f"B(err<={t:g})" for t in targets)
        + " |"
    )
    lines = [head, "|" + "---|" * (7 + len(targets))]
    for record in records:
        for label, entry in record["weightings"].items():
            last = entry["runs"][-1]
            matched = entry["matched_bond"]
            bonds = [bond_for(entry["runs"], target) for target in targets]
            lines.append(
                f"| {record['model']} | {label} | {last['bond']} | {last['error']:.1e} | "
                f"{matched['gmean']:.2f} | {matched['min']:.2f} | {matched['max']:.2f} | "
                + " | ".join("-" if bond is None else str(bond) for bond in bonds)
                + " |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument(
        "--weights",
        nargs="+",
        type=float,
        default=[1.0, 0.5, 0.25, 0.1],
        help="population weights (1 is the flat norm)",
    )
    parser.add_argument("--epsrel-max", type=float, default=1e-3)
    parser.add_argument("--steps-down", type=int, default=10, help="epsrel halvings")
    parser.add_argument("--targets", nargs="+", type=float, default=[1e-3, 3e-4, 1e-4])
    parser.add_argument("--json", default=None, help="write the records to this JSON file")
    args = parser.parse_args()
    epsrels = [args.epsrel_max / 2**k for k in range(args.steps_down + 1)]
    records = []
    started = time.perf_counter()
    for name in args.models:
        labels = ["flat"] + [f"pop={w:g}" for w in args.weights if w != 1.0]
        if MODELS[name]["kind"] == "spin_one":
            labels += [f"graded={w:g}" for w in args.weights if w != 1.0]
        records.append(study(name, labels, epsrels, lambda text: print(text, flush=True)))
    print()
    print(table(records, args.targets))
    seconds = time.perf_counter() - started
    print(f"\n{len(records)} models in {seconds:.0f} s")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "nonmarkov": nm.__version__,
                    "python": platform.python_version(),
                    "epsrels": epsrels,
                    "seconds": seconds,
                    "records": records,
                },
                handle,
                indent=1,
            )


if __name__ == "__main__":
    main()
