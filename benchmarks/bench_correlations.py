"""Multi-time correlations on NumPy and on JAX, side by side, each backend in a cold
process of its own (fresh JAX compilation cache).

    python benchmarks/bench_correlations.py [--steps 80] [--members 16]
        [--configs numpy jax jax-on] [--pt FILE] [--json FILE]

The problem is that of OQuPy's ``examples/multi_time_correlations.py``: a
three-level system (ground state, two excited states coupled by a dipole), a bath
on P_1 - P_2 (alpha 0.1, exponential cutoff 3.04, T = 13.09), its
process tensor built once on NumPy (dt 0.1, ``--steps`` steps, dkmax 500, epsrel
1e-6) and written to a file. The cases, each called twice in the process (cold:
the first call, with any compilation; warm: the second):

- ``four_time``: the example's four orderings of four dipole operators, O_1 on
  (0, 4.1), O_2 and O_3 at 4.0, O_4 on (4.0, end): ``compute_correlations_nt``;
- ``two_time``: <d(t) d(0)> for every t (the example's spectrum);
- ``full_grid``: ``compute_correlations`` of d, d on every pair of times,
  ``time_order='full'`` (up to ``--steps`` + 1 live branches);
- ``batch``: ``compute_correlations_batch`` of ``--members`` detuned systems,
  t_a in {0, 2, 4}, every t_b;
- ``file``: ``two_time`` on the process tensor read from its file;
- ``dynamics_file``: ``compute_dynamics`` on the process tensor read from its file
  (on JAX streamed to the compiled scan a chunk of steps at a time, where it pays).

Configurations: ``numpy``; ``jax`` (the planner's choice, ``compiled='auto'``);
``jax-on`` (``compiled='on'``: every sweep compiled, the cost of the compiled branch
kernels on this CPU). The table gives seconds per case and the JAX / NumPy ratios;
the JAX rows name the chain engine's decisions. One BLAS thread for every
backend (set before the processes start).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CONFIGS = {
    "numpy": {"NONMARKOV_BACKEND": "numpy"},
    "jax": {"NONMARKOV_BACKEND": "jax"},
    "jax-on": {"NONMARKOV_BACKEND": "jax", "BENCH_COMPILED": "on"},
}
CASES = ("four_time", "two_time", "full_grid", "batch", "file", "dynamics_file")


def model():
    """(nonmarkov, system, bath, dipole, initial state) of the three-level problem."""
    import numpy

    import nonmarkov as nm

    p1, p2 = numpy.diag([0.0, 1.0, 0.0]), numpy.diag([0.0, 0.0, 1.0])
    lower = numpy.zeros((3, 3))
    lower[1, 2] = 1.0
    alpha, cutoff = 0.1, 3.04
    system = nm.System((5.0 + 2 * alpha * cutoff) * (p1 + p2) + 2.0 * (lower + lower.T))
    sd = nm.PowerLawSD(alpha, 1.0, cutoff, "exponential", temperature=13.09)
    dipole = numpy.zeros((3, 3))
    dipole[0, 2] = dipole[2, 0] = 1.0
    return nm, system, nm.Bath(p1 - p2, sd), dipole, numpy.diag([1.0, 0.0, 0.0])


def build(path: str, steps: int) -> None:
    nm, _, bath, _, _ = model()
    parameters = nm.TempoParameters(dt=0.1, dkmax=500, epsrel=1e-6)
    pt = nm.pt_tempo_compute(bath, 0.0, 0.1 * steps, parameters, progress_type="silent")
    pt.export(path, overwrite=True)


def child(path: str, steps: int, members: int) -> dict:
    """Run every case twice in this process; return the timings and decisions."""
    start = time.perf_counter()
    nm, system, _, dipole, rho0 = model()
    from nonmarkov.methods.batched_correlations import compute_correlations_batch
    from nonmarkov.options import EngineOptions, set_default_options

    imported = time.perf_counter() - start
    if os.environ.get("BENCH_COMPILED"):
        set_default_options(EngineOptions(compiled=os.environ["BENCH_COMPILED"]))
    memory = nm.import_process_tensor(path, "simple")
    on_file = nm.import_process_tensor(path, "file")
    end = 0.1 * steps
    silent = {"initial_state": rho0, "progress_type": "silent"}
    orders = [
        ["left", "right", "right", "left"],
        ["right", "left", "right", "left"],
        ["right", "right", "left", "left"],
        ["left"] * 4,
    ]
    times = [(0.0, 4.1), 4.0, 4.0, (4.0, end)]
    systems = [nm.System(system.hamiltonian + e * numpy_diag()) for e in range(members)]

    def four_time():
        return [
            nm.compute_correlations_nt(system, memory, [dipole] * 4, times, order, **silent)[1]
            for order in orders
        ]

    def two_time(pt=memory):
        return nm.compute_correlations_nt(
            system, pt, [dipole, dipole], [0.0, (0.0, end)], ["left", "left"], **silent
        )[1]

    def full_grid():
        return nm.compute_correlations(
            system, memory, dipole, dipole, slice(None), slice(None), "full", **silent
        )[1]

    def batch():
        return compute_correlations_batch(
            systems,
            memory,
            dipole,
            dipole,
            [0, 20, 40],
            slice(None),
            initial_states=rho0,
            progress_type="silent",
        )[1]

    cases = {
        "four_time": four_time,
        "two_time": two_time,
        "full_grid": full_grid,
        "batch": batch,
        "file": lambda: two_time(on_file),
        "dynamics_file": lambda: (
            nm.compute_dynamics(system, rho0, process_tensor=on_file, progress_type="silent").states
        ),
    }
    record = {"import_s": imported, "cases": {}}
    import numpy

    for name, case in cases.items():
        timings = []
        for _ in range(2):
            begin = time.perf_counter()
            values = case()
            timings.append(time.perf_counter() - begin)
        first = numpy.asarray(values[0] if isinstance(values, list) else values)
        record["cases"][name] = {
            "cold_s": timings[0],
            "warm_s": timings[1],
            "values": [first.real.ravel().tolist(), first.imag.ravel().tolist()],
        }
    record["decisions"] = decisions()
    return record


def numpy_diag():
    import numpy

    return 0.05 * numpy.diag([0.0, 1.0, -1.0])


def decisions() -> list:
    """The compiled kernels of this process's chain engines (JAX only): the branch-sweep
    kernels by shape (branches in, out, read-outs, propagate) and the scans by entry."""
    import nonmarkov as nm

    if nm.backends.get_backend() != "jax":
        return []
    from nonmarkov.engines.jax import branches, scan

    return sorted({f"sweep {key[:4]}" for key in branches.SWEPT}) + sorted(
        {f"scan {key[0]}" for key in scan.SCANNED}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--members", type=int, default=16)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--json")
    parser.add_argument("--pt", help="the process-tensor file: built there unless it exists")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.members)))
        return
    for name in ("NONMARKOV_BLAS_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[name] = "1"
    work = tempfile.mkdtemp(prefix="bench_correlations_")
    path = args.pt or os.path.join(work, "pt.hdf5")
    if not os.path.exists(path):
        env = dict(os.environ, NONMARKOV_BACKEND="numpy")
        started = time.perf_counter()
        build_call = f"import bench_correlations as b; b.build({path!r}, {args.steps})"
        subprocess.run(
            [sys.executable, "-c", build_call],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            env=env,
            check=True,
        )
        print(f"process tensor: {time.perf_counter() - started:.1f} s")
    print(f"load average before: {os.getloadavg()}")
    results = {}
    for config in args.configs:
        env = dict(os.environ, **CONFIGS[config])
        env["NONMARKOV_JAX_CACHE_DIR"] = os.path.join(work, f"cache-{config}")
        out = subprocess.run(
            [sys.executable, __file__, "--child", path, "--steps", str(args.steps)]
            + ["--members", str(args.members)],
            env=env,
            capture_output=True,
            text=True,
        )
        if out.returncode:
            print(out.stderr[-3000:])
            raise SystemExit(f"{config} failed")
        results[config] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"load average after: {os.getloadavg()}")
    header = f"{'case':10} | " + " | ".join(f"{c + ' cold/warm s':>22}" for c in args.configs)
    print(header + " | JAX/NumPy cold, warm")
    reference = results.get("numpy")
    for case in CASES:
        cells, ratios = [], []
        for config in args.configs:
            timing = results[config]["cases"][case]
            cells.append(f"{timing['cold_s']:10.3f} / {timing['warm_s']:9.3f}")
            if reference and config != "numpy":
                base = reference["cases"][case]
                ratios.append(
                    f"{config} {timing['cold_s'] / base['cold_s']:.2f}, "
                    f"{timing['warm_s'] / base['warm_s']:.2f}"
                )
        print(f"{case:10} | " + " | ".join(cells) + " | " + "; ".join(ratios))
    for config in args.configs:
        print(f"{config}: import {results[config]['import_s']:.2f} s")
        if results[config]["decisions"]:
            kernels = results[config]["decisions"]
            sweeps = sum(kernel.startswith("sweep") for kernel in kernels)
            scans = sorted({kernel for kernel in kernels if kernel.startswith("scan")})
            print(f"  compiled: {sweeps} branch-sweep kernels; scans: {', '.join(scans)}")
    if reference:
        import numpy

        for config in args.configs:
            worst = 0.0
            for case in CASES:
                a = numpy.asarray(results[config]["cases"][case]["values"], dtype=float)
                b = numpy.asarray(reference["cases"][case]["values"], dtype=float)
                worst = max(worst, float(numpy.nanmax(numpy.abs(a - b))))
            print(f"{config}: largest difference from NumPy {worst:.1e}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"steps": args.steps, "results": results}, handle, indent=1)


if __name__ == "__main__":
    main()
