"""Steady states per second: QuTiP 5's HEOM solver against nonmarkov.

The models of ``bench_heom.py`` (H_S = (eps/2) sigma_z + (Delta/2) sigma_x, Delta = 1,
eps = 0.5, coupling sigma_z, the same baths and conventions, checked there on C(t)).
For a system coupled to one thermal bath the long-time state is the reduced
mean-force Gibbs state Tr_B exp(-H/T) / Z, so three routes give the same state:

- HEOM: ``HEOMSolver(...).steady_state()`` (the null vector of the hierarchy's
  Liouvillian, a sparse LU solve; ``use_mkl=False``, SciPy's solver, as on a machine
  without MKL), over Pade terms Nk (with and without QuTiP's terminator) or fitted
  exponentials (super-Ohmic, as in ``bench_heom.py``) and hierarchy depth (runs with
  more than ``MAX_ADOS`` auxiliary density operators skipped: the LU fill-in makes
  them minutes long);
- ``gibbs``: nonmarkov's Gibbs TEMPO (``GibbsTempo``, the imaginary-time path
  integral over [0, 1/T] in ``n_steps`` steps), over n_steps = 8 .. 128 and epsrel 1e-7 ..
  1e-9 (T < 0.5: 16 .. 128 and 1e-9 .. 1e-11, and HEOM with Nk 4 .. 12, depth 2 .. 6);
  runs at n, 2n (, 4n) are combined by Richardson extrapolation in the step 1/(T n)
  (``nonmarkov.methods.extrapolation.richardson`` on the imaginary-time Dynamics,
  order 2 checked on three levels, and its second, Romberg stage where the check
  passes), costing the sum of their runs;
- ``uniform``: the uniform process tensor's steady state (``pt_uniform_compute`` +
  ``compute_steady_state``) at the case's longer memory cut, epsrel 1e-7, dt 0.4 and
  0.2 (``--uniform-dts``); its error is the memory cut's (the part of C(t) beyond
  tcut is dropped).

Error: the largest error of the Bloch vector (<sigma_x>, <sigma_y>, <sigma_z>) of the
state. Reference: nonmarkov's Romberg stage of three Gibbs levels whose observed order
is within ``CLEAN_ORDER`` of 2 (else any that passed the check), at the tightest epsrel
and finest n, checked against the next such ladder (another finest run) and against the
deepest HEOM run (both distances printed); runs ending in the reference's finest run
are not candidates. For each tolerance 1e-3, 1e-4, 1e-5 the cheapest run of each
program within it, and the ratio nonmarkov/HEOM. Seconds: the process's CPU seconds
per run (one BLAS thread), as in ``bench_heom.py``.

    python benchmarks/bench_heom_steady.py [--cases weak lowT] [--quick]
        [--uniform-dts 0.4 0.2] [--json out.json]
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"
os.environ.setdefault("NONMARKOV_BLAS_THREADS", "1")

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench_heom import (  # noqa: E402
    CASES,
    DELTA,
    EPS,
    SUPEROHMIC_TERMS,
    TOLERANCES,
    heom_solver,
    nonmarkov_bath,
)

#: the largest distance of a reference's observed order from the splitting's order 2
CLEAN_ORDER = 0.1
#: the largest hierarchy a steady-state run may have (auxiliary density operators; the
#: LU's fill-in grows fast: T 0.1, Nk 8, depth 6, 5,005 ADOs, takes ~150 s)
MAX_ADOS = 6_000
#: uniform PT runs: dt, which of the case's tcuts, epsrel; the longer cut only (the build
#: at the shorter one takes a larger bond and is slower and no more accurate: weak, dt
#: 0.4, tcut 4: bond 55, 2.6 s, 3.9e-3 off; lambda 0.25, T 1, tcut 4: bond 144, ~50 s;
#: T 0.1, tcut 6: bond 201, ~470 s)
UNIFORM = ((0.4, 1, 1e-7), (0.2, 1, 1e-7))
GRIDS = {
    "quick": {
        "terms": (1, 2),
        "depths": (2, 4),
        "n_steps": (8, 16, 32, 64),
        "epsrels": (1e-8,),
        "uniform": UNIFORM[:1],
    },
    "full": {
        "terms": (1, 2, 3, 4),
        "depths": (2, 4, 6, 8),
        "n_steps": (8, 16, 32, 64, 128),
        "epsrels": (1e-7, 1e-8, 1e-9),
        "uniform": UNIFORM,
    },
}
#: at low temperature: HEOM needs more Pade terms and depth 6 (T 0.1: <sigma_z> moves
#: 1.2e-3 from depth 4 to 6, 2e-5 from 6 to 8), Gibbs TEMPO a finer step (the same steps
#: per unit of 1/T need n ~ 10x) and a much tighter epsrel: its truncation error grows
#: with n and falls unevenly with epsrel (T 0.1, <sigma_x> at n 128: 1e-9 / 1e-10 / 1e-11
#: are 7.4e-5 / 5.2e-5 / 2.9e-6 off 1e-12; at n 256, 1e-11 / 1e-12 are ~8e-5 / ~1e-5 off
#: the value the n 32 .. 128 ladder predicts, and 1e-12 takes 10 minutes), so the
#: ladders stop at n 128
LOW_T_GRID = {
    "terms": (4, 6, 8, 10, 12),
    "depths": (2, 4, 6),
    "n_steps": (16, 32, 64, 128),
    "epsrels": (1e-9, 1e-10, 1e-11),
}


def bloch(rho: np.ndarray) -> np.ndarray:
    """(<sigma_x>, <sigma_y>, <sigma_z>) of a 2 x 2 density matrix."""
    rho = np.asarray(rho)
    return np.array([2 * rho[0, 1].real, -2 * rho[0, 1].imag, (rho[0, 0] - rho[1, 1]).real])


def heom_steady_state(case: dict, terms: int, depth: int, terminator: bool = False) -> dict:
    """QuTiP's HEOM steady state; its CPU seconds (fit, solver setup and solve)."""
    cpu = time.process_time()
    solver = heom_solver(case, terms, depth, terminator)
    rho, _ = solver.steady_state(use_mkl=False)
    return {
        "program": "heom",
        "terms": terms,
        "depth": depth,
        "label": f"Nk {terms}, depth {depth}" + (", terminator" if terminator else ""),
        "seconds": time.process_time() - cpu,
        "bloch": bloch(rho.full()),
    }


def _system():
    import nonmarkov as nm

    return nm.System(0.5 * EPS * nm.operators.sigma("z") + 0.5 * DELTA * nm.operators.sigma("x"))


def gibbs_run(case: dict, n_steps: int, epsrel: float) -> dict:
    """nonmarkov's Gibbs TEMPO; its imaginary-time Dynamics kept for the extrapolation."""
    import nonmarkov as nm

    cpu = time.process_time()
    gibbs = nm.GibbsTempo(
        _system(), nonmarkov_bath(case), nm.GibbsParameters(n_steps=n_steps, epsrel=epsrel)
    )
    dynamics = gibbs.compute(progress_type="silent")
    state = gibbs.get_state()
    return {
        "program": "nonmarkov",
        "method": "gibbs",
        "n_steps": n_steps,
        "epsrel": epsrel,
        "label": f"gibbs n {n_steps}, epsrel {epsrel:g}, bond {gibbs.max_bond_dimension}",
        "seconds": time.process_time() - cpu,
        "bloch": bloch(state),
        "dynamics": dynamics,
    }


def uniform_run(case: dict, dt: float, tcut: float, epsrel: float) -> dict:
    """nonmarkov's uniform process tensor and its steady state."""
    import nonmarkov as nm

    cpu = time.process_time()
    parameters = nm.TempoParameters(dt=dt, tcut=tcut, epsrel=epsrel)
    pt = nm.pt_uniform_compute(nonmarkov_bath(case), parameters, progress_type="silent")
    state = nm.compute_steady_state(_system(), pt)
    return {
        "program": "nonmarkov",
        "method": "uniform",
        "label": f"uniform dt {dt:g}, tcut {tcut:g}, epsrel {epsrel:g}, bond {pt.bond_dimension}",
        "seconds": time.process_time() - cpu,
        "bloch": bloch(state),
    }


def gibbs_extrapolations(runs: list[dict]) -> list[dict]:
    """Richardson combinations of Gibbs runs at n, 2n (, 4n) with one epsrel: two
    levels, three levels (order checked) and, where that passes, the Romberg stage."""
    from nonmarkov.methods.extrapolation import NEXT_ORDER, richardson

    by_epsrel: dict = {}
    for run in runs:
        by_epsrel.setdefault(run["epsrel"], {})[run["n_steps"]] = run
    combined = []
    for epsrel, levels in by_epsrel.items():
        for n, count in itertools.product(sorted(levels), (2, 3)):
            chosen = [levels.get(n * 2**k) for k in range(count)]
            if None in chosen:
                continue
            dynamics = [run["dynamics"] for run in chosen]
            results = {f"richardson{count}": richardson(dynamics, on_failed_check="finest")}
            if count == 3 and results["richardson3"].order_check == "passed":
                results["romberg"] = richardson(dynamics, next_order=NEXT_ORDER)
            for name, result in results.items():
                state = np.asarray(result.values)[-1]
                check = ""
                if result.order_check != "unchecked":
                    check = f", order {result.order_check} ({result.observed_order:.2f})"
                combined.append(
                    {
                        "program": "nonmarkov",
                        "method": f"gibbs+{name}",
                        "n_steps": chosen[-1]["n_steps"],
                        "epsrel": epsrel,
                        "order_check": result.order_check,
                        "observed_order": result.observed_order,
                        "label": f"gibbs+{name} n {n}..{chosen[-1]['n_steps']}, "
                        f"epsrel {epsrel:g}{check}",
                        "seconds": sum(run["seconds"] for run in chosen),
                        "bloch": bloch(state / np.trace(state)),
                    }
                )
    return combined


def run_case(name: str, grid: dict, log, low_t: bool = True) -> dict:
    from nonmarkov.methods.extrapolation import SPLITTING_ORDER

    case = CASES[name]
    if case["T"] < 0.5 and low_t:
        grid = {**grid, **LOW_T_GRID}
    log(f"\n## {name}: {case}")
    heom_runs = []
    terms_list = grid["terms"] if "lam" in case else SUPEROHMIC_TERMS
    terminators = (False, True) if "lam" in case else (False,)
    for terms, depth, terminator in itertools.product(terms_list, grid["depths"], terminators):
        exponents = terms + 1 if "lam" in case else 2 * terms
        if math.comb(exponents + depth, depth) > MAX_ADOS:
            continue
        heom_runs.append(heom_steady_state(case, terms, depth, terminator))
        log(f"  heom {heom_runs[-1]['label']}: {heom_runs[-1]['seconds']:.2f} s")
    gibbs_runs = []
    for epsrel, n_steps in itertools.product(grid["epsrels"], grid["n_steps"]):
        gibbs_runs.append(gibbs_run(case, n_steps, epsrel))
        log(f"  nonmarkov {gibbs_runs[-1]['label']}: {gibbs_runs[-1]['seconds']:.2f} s")
    uniform_runs = []
    for dt, cut, epsrel in grid["uniform"]:
        uniform_runs.append(uniform_run(case, dt, case["tcuts"][cut], epsrel))
        log(f"  nonmarkov {uniform_runs[-1]['label']}: {uniform_runs[-1]['seconds']:.2f} s")
    combined = gibbs_extrapolations(gibbs_runs)
    # the reference: a Romberg stage (else three levels) whose observed order is the
    # splitting's (within CLEAN_ORDER: at large n the truncation error grows and bends
    # the order), at the tightest epsrel and the finest n, checked against the next one
    # (where none is that clean, as at T 0.1 with orders 1.5-1.8: any that passed)
    passed = [run for run in combined if run["order_check"] == "passed"]
    clean = [run for run in passed if abs(run["observed_order"] - SPLITTING_ORDER) <= CLEAN_ORDER]
    if not passed:
        raise ValueError(f"{name}: no Gibbs extrapolation passed the order check")
    ranked = sorted(
        clean or passed,
        key=lambda run: (
            not run["method"].endswith("romberg"),
            run["epsrel"],
            -run["n_steps"],
        ),
    )
    reference = ranked[0]
    # the check: another ladder (a different finest n or epsrel), not the same runs
    key = (reference["n_steps"], reference["epsrel"])
    second = next((run for run in ranked if (run["n_steps"], run["epsrel"]) != key), None)

    def distance(run: dict) -> float:
        return float(np.max(np.abs(run["bloch"] - reference["bloch"])))

    check = None if second is None else distance(second)
    log(
        f"  reference {reference['label']} ({reference['seconds']:.1f} s); "
        + (
            "no second ladder passed the order check"
            if second is None
            else f"check against {second['label']}: {check:.1e}"
        )
    )
    if heom_runs:
        deepest = max(heom_runs, key=lambda run: (run["depth"], run["terms"]))
        log(f"  the deepest HEOM run, {deepest['label']}, against it: {distance(deepest):.1e}")
    # not candidates: the reference and what ends in its finest run (the same values)
    nm_runs = [
        run
        for run in gibbs_runs + combined + uniform_runs
        if (run.get("n_steps"), run.get("epsrel")) != key
    ]
    for run in heom_runs + nm_runs:
        run["error"] = distance(run)
    for run in uniform_runs:  # the memory cut's error, whether or not the cheapest
        log(f"  {run['label']}: err {run['error']:.1e}")
    rows = []
    for tolerance in TOLERANCES:
        best = {}
        for key, pool in (("heom", heom_runs), ("nonmarkov", nm_runs)):
            good = [run for run in pool if run["error"] <= tolerance]
            best[key] = min(good, key=lambda run: run["seconds"]) if good else None
        cells = [
            "not reached"
            if run is None
            else f"{run['seconds']:.2f} s ({run['label']}; err {run['error']:.1e})"
            for run in best.values()
        ]
        ratio = None
        if best["heom"] and best["nonmarkov"]:
            ratio = best["nonmarkov"]["seconds"] / best["heom"]["seconds"]
        log(
            f"  {tolerance:.0e}: HEOM {cells[0]} | nonmarkov {cells[1]}"
            + ("" if ratio is None else f"  nonmarkov/HEOM {ratio:.2f}")
        )
        row = {"tolerance": tolerance, "ratio": ratio}
        for key, run in best.items():
            row[key] = None if run is None else run["label"]
            row[f"{key}_s"] = None if run is None else run["seconds"]
        rows.append(row)
    keep = ("program", "label", "seconds", "error")
    return {
        "reference": reference["label"],
        "reference_check": check,
        "runs": [{k: run[k] for k in keep} for run in heom_runs + nm_runs],
        "table": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(  # verylowT: ~20 CPU minutes (n 128 at epsrel 1e-11, bond ~230)
        "--cases",
        nargs="+",
        default=["weak", "intermediate", "strong", "lowT"],
        choices=list(CASES),
    )
    parser.add_argument("--quick", action="store_true", help="a small grid")
    parser.add_argument("--json", default=None, help="write the records to this JSON file")
    parser.add_argument(
        "--uniform-dts",
        nargs="*",
        type=float,
        default=None,
        help="dts of the uniform PT runs (at the case's longer tcut; none: no uniform runs)",
    )
    args = parser.parse_args()
    grid = dict(GRIDS["quick" if args.quick else "full"])
    if args.uniform_dts is not None:
        grid["uniform"] = tuple((dt, 1, 1e-7) for dt in args.uniform_dts)
    records = {}
    for name in args.cases:
        records[name] = run_case(
            name, grid, lambda text: print(text, flush=True), low_t=not args.quick
        )
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(records, handle, indent=1, default=float)


if __name__ == "__main__":
    main()
