"""The cost of a TEMPO window step at small bonds (a few to ~32), per step and per point.

At these bonds a step is a chain of small matrix operations (per window point:
a product and a truncated SVD in the zip-up, an SVD and a product in the cut
back), so its time is mostly fixed per-call cost, not arithmetic. Problems:

- B1: the B1 problem of ``bench_jax.py``: spin-boson (H_S = 0.5 sigma_x, coupling
  0.5 sigma_z, PowerLawSD(alpha=0.3, zeta=1, cutoff=5, 'exponential', T=0), spin
  up), TEMPO dt=0.1, tcut=3 (30-point window), epsrel=1e-4, t in [0, 10].
- W80: the same model with dt=0.05, tcut=4 (an 80-point window), epsrel=3e-5
  (bond ~8), t in [0, 6]: the steps after the window is full (t > 4) are timed.

For each problem: the whole run's seconds (``total_s``), the seconds per step
of the timed steps (``step_s``; B1: every step), per window point
(``point_s``), the same in CPU seconds of this process (``cpu_step_s``,
``cpu_point_s``: single-threaded, so not inflated by other load on a shared
machine), the largest bond, and <sigma_z> at the end (to compare results
between trees). Rounds repeat the timed part; the median is printed.

    python benchmarks/bench_small_bonds.py [--problems B1 W80] [--rounds 3]
        [--backend numpy|jax] [--json out.json]

Before/after a change of the kernels, run it through ``compare_commits.py``
(one run, the two trees alternating)::

    python benchmarks/compare_commits.py --base COMMIT -- bench_small_bonds.py

Set ``NONMARKOV_BLAS_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from _common import spin_boson_model

PROBLEMS = {
    "B1": {"dt": 0.1, "tcut": 3.0, "epsrel": 1e-4, "full_time": 0.0, "end_time": 10.0},
    "W80": {"dt": 0.05, "tcut": 4.0, "epsrel": 3e-5, "full_time": 4.0, "end_time": 6.0},
}


def run_problem(name: str, rounds: int) -> dict:
    """Time ``name`` ``rounds`` times; return the medians and the checks."""
    nm, system, bath, rho0 = spin_boson_model()
    spec = PROBLEMS[name]
    parameters = nm.TempoParameters(dt=spec["dt"], tcut=spec["tcut"], epsrel=spec["epsrel"])
    dkmax = int(round(spec["tcut"] / spec["dt"]))
    totals, steps_s, cpu_steps = [], [], []
    final = None
    bond = 0
    for _ in range(rounds):
        start = time.perf_counter()
        tempo = nm.Tempo(system, bath, parameters, rho0, start_time=0.0)
        if spec["full_time"] > 0.0:
            tempo.compute(spec["full_time"], progress_type="silent")
        before = len(tempo.get_dynamics().times)
        timed, cpu = time.perf_counter(), time.process_time()
        dynamics = tempo.compute(spec["end_time"], progress_type="silent")
        end, cpu = time.perf_counter(), time.process_time() - cpu
        num_steps = len(dynamics.times) - before
        totals.append(end - start)
        steps_s.append((end - timed) / num_steps)
        cpu_steps.append(cpu / num_steps)
        _, sz = dynamics.expectations(nm.operators.sigma("z"), real=True)
        final = float(sz[-1])
        bond = int(tempo.max_bond_dimension)
    step = statistics.median(steps_s)
    # the timed steps see a window of dkmax points (B1: growing from 1, 15.5 on average)
    points = dkmax if spec["full_time"] > 0.0 else _mean_window(spec, dkmax)
    return {
        "total_s": statistics.median(totals),
        "step_s": step,
        "point_s": step / points,
        "cpu_step_s": statistics.median(cpu_steps),
        "cpu_point_s": statistics.median(cpu_steps) / points,
        "window_points": points,
        "bond": bond,
        "final_sz": final,
    }


def _mean_window(spec: dict, dkmax: int) -> float:
    steps = int(round(spec["end_time"] / spec["dt"]))
    return float(np.mean([min(k, dkmax) for k in range(1, steps + 1)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="numpy", choices=["numpy", "jax"])
    parser.add_argument("--json", default=None, help="write the records to this JSON file")
    args = parser.parse_args()
    import nonmarkov as nm

    nm.backends.set_backend(args.backend)
    records: dict = {}
    header = ("problem", "total s", "ms/step", "ms/point", "cpu ms/step", "bond", "<sz>(end)")
    print("{:8} {:>9} {:>9} {:>9} {:>11} {:>5} {:>12}".format(*header))
    for name in args.problems:
        if args.backend == "jax":
            run_problem(name, 1)  # compile first: the timed rounds are warm
        record = run_problem(name, args.rounds)
        records[name] = {args.backend: record}
        print(
            f"{name:8} {record['total_s']:9.3f} {1e3 * record['step_s']:9.3f} "
            f"{1e3 * record['point_s']:9.4f} {1e3 * record['cpu_step_s']:11.3f} "
            f"{record['bond']:5d} {record['final_sz']:12.9f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle, indent=1)


if __name__ == "__main__":
    main()
