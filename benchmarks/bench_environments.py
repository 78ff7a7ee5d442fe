"""B4 (two environments) and B5 (two-time correlation map): nonmarkov next to OQuPy 0.5.

- B4: PowerLawSD(alpha=0.16, zeta=1, cutoff=1, exponential) baths, one coupled
  through sigma_z/2 at T=0.8, one through sigma_x/2 at T=1.6; PT-TEMPO for
  each (dt=1/8, tcut=4, i.e. dkmax=32, epsrel=2**-15, 128 steps), then
  compute_dynamics with both process tensors for H = 0.25 sigma_z from
  |x+><x+|. Compared: the Bloch vector (each state divided by its trace).
- B5: spin-boson model of B1/B2 (H = 0.5 sigma_x, coupling 0.5 sigma_z,
  alpha=0.3, cutoff 5, T=0, initial state up): PT-TEMPO with dt=0.1, tcut=3,
  epsrel=1e-4 for 80 steps, then <sigma_z(t_b) sigma_z(t_a)> for all pairs of
  the 40 x 40 grid t = 0, 0.2, ..., 7.8 (nonmarkov: one call with
  time_order='full'; OQuPy 0.5: an 'ordered' and an 'anti' call, since it
  does not run 'full'). Compared: max |difference| over the map.

Each run happens in its own process: nonmarkov with this interpreter, OQuPy
with ``oqupy_environments.py`` in the interpreter of the virtual environment
made by ``setup_oqupy_env.sh``. The machine is shared and noisy, so the table
reports ratios of times measured in the same invocation.

    python benchmarks/bench_environments.py [--problems B4 B5] [--json out.json]
        [--oqupy-python PATH | --no-oqupy] [--reference] [--threads N]
        [--pt-method sequential|repeated_block|divide_and_conquer] [--epsrel E] [--steps N]

``--pt-method`` chooses how nonmarkov builds its process tensors
(``pt_tempo_compute(method=...)``: sequential PT-TEMPO, one repeating block
or divide and conquer for a stationary bath; the same PT format,
docs/long_time.md); the reference always uses sequential PT-TEMPO.

``--reference`` also runs nonmarkov with a small epsrel (B4: 2**-20, B5: 1e-6;
same dt and memory cut) and reports each code's max deviation from it
("err nm", "err oq"); the memory cut itself is not part of that error.
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
    subprocess_json,
    thread_env,
)

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEMS = {
    "B4": {
        "alpha": 0.16,
        "cutoff": 1.0,
        "temperatures": (0.8, 1.6),
        "dt": 1.0 / 8.0,
        "tcut": 4.0,
        "epsrel": 2.0**-15,
        "steps": 128,
        "field": 0.25,
        "reference_epsrel": 2.0**-20,
    },
    "B5": {
        "alpha": 0.3,
        "cutoff": 5.0,
        "temperature": 0.0,
        "dt": 0.1,
        "tcut": 3.0,
        "epsrel": 1e-4,
        "steps": 80,
        "grid": (0, 80, 2),
        "reference_epsrel": 1e-6,
    },
}
PHASE_NAMES = {
    "pt_z": "pt_z",
    "pt_x": "pt_x",
    "dynamics": "dynamics",
    "pt_build": "pt_build",
    "correlations": "correlations",
}


def _build_pt(nm, bath, end_time: float, parameters, method: str):
    return nm.pt_tempo_compute(
        bath, 0.0, end_time, parameters, method=method, progress_type="silent"
    )


def _b4(nm, spec: dict, epsrel: float, record: dict, method: str) -> None:
    parameters = nm.TempoParameters(dt=spec["dt"], tcut=spec["tcut"], epsrel=epsrel)
    end_time = spec["steps"] * spec["dt"]
    pts = []
    for name, axis, temperature in (
        ("pt_z", "z", spec["temperatures"][0]),
        ("pt_x", "x", spec["temperatures"][1]),
    ):
        correlations = nm.PowerLawSD(
            alpha=spec["alpha"],
            zeta=1,
            cutoff=spec["cutoff"],
            cutoff_type="exponential",
            temperature=temperature,
        )
        bath = nm.Bath(0.5 * nm.operators.sigma(axis), correlations)
        start = time.perf_counter()
        pt = _build_pt(nm, bath, end_time, parameters, method)
        record["wall_time_s"][name] = time.perf_counter() - start
        record["bond_dimensions"][name] = pt.get_bond_dimensions().tolist()
        pts.append(pt)
    system = nm.System(spec["field"] * nm.operators.sigma("z"))
    start = time.perf_counter()
    dynamics = nm.compute_dynamics(
        system, nm.operators.spin_dm("x+"), process_tensor=pts, progress_type="silent"
    )
    record["wall_time_s"]["dynamics"] = time.perf_counter() - start
    record["times"] = dynamics.times.tolist()
    for axis in "xyz":
        record[f"sigma_{axis}"] = dynamics.expectations(nm.operators.sigma(axis), real=True)[
            1
        ].tolist()
    record["trace"] = dynamics.expectations(real=True)[1].tolist()


def _b5(nm, spec: dict, epsrel: float, record: dict, method: str) -> None:
    correlations = nm.PowerLawSD(
        alpha=spec["alpha"],
        zeta=1,
        cutoff=spec["cutoff"],
        cutoff_type="exponential",
        temperature=spec["temperature"],
    )
    bath = nm.Bath(0.5 * nm.operators.sigma("z"), correlations)
    parameters = nm.TempoParameters(dt=spec["dt"], tcut=spec["tcut"], epsrel=epsrel)
    start = time.perf_counter()
    pt = nm.PtTempo(bath, 0.0, spec["steps"] * spec["dt"], parameters).get_process_tensor(
        progress_type="silent"
    )
    record["wall_time_s"]["pt_build"] = time.perf_counter() - start
    record["bond_dimensions"]["pt"] = pt.get_bond_dimensions().tolist()
    system = nm.System(0.5 * nm.operators.sigma("x"))
    sz = nm.operators.sigma("z")
    grid = slice(*spec["grid"])
    start = time.perf_counter()
    times, values = nm.compute_correlations(
        system,
        pt,
        sz,
        sz,
        grid,
        grid,
        time_order="full",
        initial_state=nm.operators.spin_dm("up"),
        progress_type="silent",
    )
    record["wall_time_s"]["correlations"] = time.perf_counter() - start
    record["times_a"], record["times_b"] = times[0].tolist(), times[1].tolist()
    record["correlations_real"] = values.real.tolist()
    record["correlations_imag"] = values.imag.tolist()


def run_nonmarkov(problem: str, epsrel: float | None = None, method: str = "sequential") -> dict:
    """Run one problem with nonmarkov in this process; return the record."""
    start = time.perf_counter()
    import nonmarkov as nm

    spec = PROBLEMS[problem]
    epsrel = spec["epsrel"] if epsrel is None else epsrel
    record: dict = {
        "problem": problem,
        "code": "nonmarkov",
        "epsrel": epsrel,
        "pt_method": method,
        "backend": nm.backends.get_backend(),
        "wall_time_s": {},
        "bond_dimensions": {},
        "import_s": time.perf_counter() - start,
    }
    (_b4 if problem == "B4" else _b5)(nm, spec, epsrel, record, method)
    record["max_bond_dimension"] = max(max(b) for b in record["bond_dimensions"].values())
    record["maxrss_kib_after"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return record


def _observables(record: dict) -> np.ndarray:
    """B4: Bloch vectors divided by the trace, (3, N); B5: the correlation map."""
    if record["problem"] == "B4":
        trace = np.array(record["trace"])
        return np.array([np.array(record[f"sigma_{a}"]) / trace for a in "xyz"])
    return np.array(record["correlations_real"]) + 1j * np.array(record["correlations_imag"])


def max_deviation(record: dict, other: dict) -> float:
    """Largest |difference| of the compared observables."""
    return float(np.max(np.abs(_observables(record) - _observables(other))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_comparison_arguments(
        parser, list(PROBLEMS), ["B4", "B5"], "also compute a converged reference (small epsrel)"
    )
    parser.add_argument(
        "--epsrel",
        type=float,
        default=None,
        help="override B4's epsrel (both codes; to compare converged runs)",
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="override B4's number of steps (both codes)"
    )
    parser.add_argument(
        "--pt-method",
        default="sequential",
        choices=["sequential", "repeated_block", "divide_and_conquer"],
        help="how nonmarkov builds its process tensors",
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-epsrel", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:  # a single nonmarkov run in its own process
        if args.steps is not None:
            PROBLEMS["B4"]["steps"] = args.steps
        epsrel = args.worker_epsrel if args.worker_epsrel is not None else args.epsrel
        record = run_nonmarkov(args.worker, epsrel, args.pt_method)
        with open(args.json, "w") as handle:
            json.dump(record, handle)
        return 0

    env = thread_env(args.threads)
    oqupy = None if args.no_oqupy else oqupy_python(args.oqupy_python)
    records: dict = {}
    for problem in args.problems:
        entry: dict = {}
        steps = [] if args.steps is None else ["--steps", str(args.steps)]
        epsrel_args = [] if args.epsrel is None else ["--epsrel", repr(args.epsrel)]
        overrides = epsrel_args + steps
        me = [sys.executable, os.path.abspath(__file__), "--worker", problem] + steps
        entry["nonmarkov"] = subprocess_json(
            me + ["--pt-method", args.pt_method] + epsrel_args, env
        )
        if oqupy:
            entry["oqupy"] = subprocess_json(
                [oqupy, os.path.join(HERE, "oqupy_environments.py"), "--problem", problem]
                + overrides,
                env,
            )
        if args.reference:
            epsrel = PROBLEMS[problem]["reference_epsrel"]
            entry["reference"] = subprocess_json(me + ["--worker-epsrel", str(epsrel)], env)
        records[problem] = entry

    print(
        f"\n{'problem':8} {'phase':13} {'nonmarkov s':>12} {'OQuPy s':>10} {'ratio':>7} "
        f"{'bond nm/oq':>11} {'maxrss MiB nm/oq':>17} {'max diff':>12} "
        f"{'err nm':>9} {'err oq':>9}"
    )
    for problem, entry in records.items():
        ours, theirs = entry["nonmarkov"], entry.get("oqupy")
        reference = entry.get("reference")
        phases = list(ours["wall_time_s"]) + ["total"]
        for phase in phases:
            seconds = (
                sum(ours["wall_time_s"].values())
                if phase == "total"
                else ours["wall_time_s"][phase]
            )
            other = None
            if theirs:
                other = (
                    theirs["wall_time_s"]["total"]
                    if phase == "total"
                    else theirs["wall_time_s"].get(PHASE_NAMES[phase])
                )
            cells = comparison_cells(ours, theirs, reference, seconds, other, max_deviation)
            print(f"{problem:8} {phase:13} {seconds:12.2f} {cells}")
        if reference:
            print(
                f"{problem:8} reference: epsrel {reference['epsrel']:.3g}, max bond "
                f"{reference['max_bond_dimension']}, times {reference['wall_time_s']}"
            )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
