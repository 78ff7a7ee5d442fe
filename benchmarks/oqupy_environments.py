"""Reference timings and results from OQuPy 0.5.0 for the benchmarks B4 and B5.

Run with the python of the separate OQuPy virtual environment created by
``benchmarks/setup_oqupy_env.sh`` (never with the nonmarkov environment)::

    python oqupy_environments.py --problem B4 --json b4.json
    python oqupy_environments.py --problem B5 --json b5.json

* ``B4``, two environments: PowerLawSD(alpha=0.16, zeta=1, cutoff=1,
  exponential) baths, one coupled through sigma_z/2 at T=0.8, one through
  sigma_x/2 at T=1.6. PT-TEMPO for each (dt=1/8, tcut=4, epsrel=2**-15, 128
  steps), then ``compute_dynamics`` with both process tensors for the system
  H = 0.25 sigma_z (a small field along z) from the state |x+><x+|.
* ``B5``, a two-time correlation map of the spin-boson model of B1/B2
  (H = 0.5 sigma_x, coupling 0.5 sigma_z, PowerLawSD(alpha=0.3, zeta=1,
  cutoff=5, exponential, T=0), initial state up): PT-TEMPO with dt=0.1,
  tcut=3, epsrel=1e-4 for 80 steps, then <sigma_z(t_b) sigma_z(t_a)> on the
  40 x 40 grid t = 0, 0.2, ..., 7.8 for all pairs. OQuPy 0.5.0 does not run
  ``time_order='full'`` (it stops with an UnboundLocalError), so the map is
  made of one ``'ordered'`` and one ``'anti'`` call; their times are added.

The JSON record holds versions, the wall time of each phase
(``time.perf_counter``), the peak resident set size (``ru_maxrss``, KiB),
the bond dimensions of the process tensors and the results (B4: times and
the Bloch vector <sigma_x>, <sigma_y>, <sigma_z> and the trace; B5: the times
and the real and imaginary parts of the correlation map).
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time

import numpy as np
import oqupy

B4 = {
    "alpha": 0.16,
    "zeta": 1.0,
    "cutoff": 1.0,
    "cutoff_type": "exponential",
    "temperatures": (0.8, 1.6),
    "dt": 1.0 / 8.0,
    "tcut": 4.0,
    "epsrel": 2.0**-15,
    "steps": 128,
    "field": 0.25,
}
B5 = {
    "alpha": 0.3,
    "zeta": 1.0,
    "cutoff": 5.0,
    "cutoff_type": "exponential",
    "temperature": 0.0,
    "dt": 0.1,
    "tcut": 3.0,
    "epsrel": 1e-4,
    "steps": 80,
    "grid": (0, 80, 2),
}


def _bonds(pt) -> list[int]:
    return [int(b) for b in np.asarray(pt.get_bond_dimensions())]


def run_b4(record: dict) -> None:
    """Two PTs (sigma_z/2 bath at T=0.8, sigma_x/2 bath at T=1.6), then dynamics."""
    spec = B4
    record["parameters"] = {key: value for key, value in spec.items()}
    parameters = oqupy.TempoParameters(dt=spec["dt"], tcut=spec["tcut"], epsrel=spec["epsrel"])
    end_time = spec["steps"] * spec["dt"]
    pts = []
    for name, axis, temperature in (
        ("pt_z", "z", spec["temperatures"][0]),
        ("pt_x", "x", spec["temperatures"][1]),
    ):
        correlations = oqupy.PowerLawSD(
            alpha=spec["alpha"],
            zeta=spec["zeta"],
            cutoff=spec["cutoff"],
            cutoff_type=spec["cutoff_type"],
            temperature=temperature,
        )
        bath = oqupy.Bath(0.5 * oqupy.operators.sigma(axis), correlations)
        start = time.perf_counter()
        pt = oqupy.pt_tempo_compute(
            bath=bath,
            start_time=0.0,
            end_time=end_time,
            parameters=parameters,
            progress_type="silent",
        )
        record["wall_time_s"][name] = time.perf_counter() - start
        record["bond_dimensions"][name] = _bonds(pt)
        pts.append(pt)
    system = oqupy.System(spec["field"] * oqupy.operators.sigma("z"))
    start = time.perf_counter()
    dynamics = oqupy.compute_dynamics(
        system,
        initial_state=oqupy.operators.spin_dm("x+"),
        process_tensor=pts,
        start_time=0.0,
        progress_type="silent",
    )
    record["wall_time_s"]["dynamics"] = time.perf_counter() - start
    record["parameters"]["dkmax"] = parameters.dkmax
    record["times"] = [float(t) for t in np.real(dynamics.times)]
    for axis in "xyz":
        _, values = dynamics.expectations(oqupy.operators.sigma(axis), real=True)
        record[f"sigma_{axis}"] = [float(v) for v in values]
    record["trace"] = [float(np.real(np.trace(state))) for state in dynamics.states]


def run_b5(record: dict) -> None:
    """PT of the spin-boson bath, then the 40 x 40 map <sz(t_b) sz(t_a)>."""
    spec = B5
    record["parameters"] = {key: value for key, value in spec.items()}
    correlations = oqupy.PowerLawSD(
        alpha=spec["alpha"],
        zeta=spec["zeta"],
        cutoff=spec["cutoff"],
        cutoff_type=spec["cutoff_type"],
        temperature=spec["temperature"],
    )
    bath = oqupy.Bath(0.5 * oqupy.operators.sigma("z"), correlations)
    parameters = oqupy.TempoParameters(dt=spec["dt"], tcut=spec["tcut"], epsrel=spec["epsrel"])
    start = time.perf_counter()
    pt = oqupy.pt_tempo_compute(
        bath=bath,
        start_time=0.0,
        end_time=spec["steps"] * spec["dt"],
        parameters=parameters,
        progress_type="silent",
    )
    record["wall_time_s"]["pt_build"] = time.perf_counter() - start
    record["bond_dimensions"]["pt"] = _bonds(pt)
    system = oqupy.System(0.5 * oqupy.operators.sigma("x"))
    sz = oqupy.operators.sigma("z")
    grid = slice(*spec["grid"])
    start = time.perf_counter()
    maps = {}
    for order in ("ordered", "anti"):
        times, maps[order] = oqupy.compute_correlations(
            system,
            pt,
            sz,
            sz,
            grid,
            grid,
            time_order=order,
            initial_state=oqupy.operators.spin_dm("z+"),
            start_time=0.0,
            progress_type="silent",
        )
    record["wall_time_s"]["correlations"] = time.perf_counter() - start
    combined = np.where(np.isnan(maps["ordered"]), maps["anti"], maps["ordered"])
    record["times_a"] = [float(t) for t in times[0]]
    record["times_b"] = [float(t) for t in times[1]]
    record["correlations_real"] = combined.real.tolist()
    record["correlations_imag"] = combined.imag.tolist()


def main(argv: list[str] | None = None) -> int:
    """Run one problem and write its JSON record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", required=True, choices=["B4", "B5"])
    parser.add_argument("--json", required=True, help="output JSON file")
    parser.add_argument("--epsrel", type=float, default=None, help="override B4's epsrel")
    parser.add_argument("--steps", type=int, default=None, help="override B4's steps")
    args = parser.parse_args(argv)
    if args.epsrel is not None:
        B4["epsrel"] = args.epsrel
    if args.steps is not None:
        B4["steps"] = args.steps
    record: dict = {
        "problem": args.problem,
        "code": "oqupy",
        "oqupy_version": oqupy.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "wall_time_s": {},
        "bond_dimensions": {},
    }
    start = time.perf_counter()
    if args.problem == "B4":
        run_b4(record)
    else:
        run_b5(record)
    record["wall_time_s"]["total"] = time.perf_counter() - start
    record["max_bond_dimension"] = max(max(b) for b in record["bond_dimensions"].values())
    record["maxrss_kib_after"] = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    summary = {
        key: record[key]
        for key in ("problem", "wall_time_s", "max_bond_dimension", "maxrss_kib_after")
    }
    print(json.dumps(summary), file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
