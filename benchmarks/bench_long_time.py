"""Long times: sequential PT-TEMPO, divide and conquer, the repeating-block PT, the uniform PT.

Spin-boson model of B2: H_S = 0.5 sigma_x, coupling 0.5 sigma_z,
PowerLawSD(alpha=0.3, zeta=1, cutoff=5, 'exponential', T=0), dt = 1/16,
tcut = 4 (dkmax = 64), initial state up.

Three parts (each method in this process unless said otherwise):

- ``accuracy``: B2 at 256 steps for several epsrel, error of <sigma_z>(t)
  (divided by the trace) against a converged TEMPO reference (epsrel 1e-7,
  same dt and memory cut), computed once and cached in
  ``benchmarks/results/b2_reference_tempo_eps1e-07_256.json``.
- ``oqupy``: OQuPy 0.5 PT-TEMPO on B2 at 256 steps (epsrel 2^-14) in its own
  virtual environment (``oqupy_reference.py``), error against the same
  reference, side by side with every method's run at that epsrel. Takes
  about 200 s; ``--oqupy-cache PATH`` reuses an earlier run's JSON.
- ``scaling``: wall time against the number of steps N for sequential PT-TEMPO
  (build + compute_dynamics), divide and conquer
  (``pt_divide_and_conquer_compute`` + compute_dynamics), the repeating-block
  PT (``pt_repeated_block_compute`` + compute_dynamics) and the uniform PT
  (``pt_uniform_compute`` + ``compute_uniform_dynamics``).
- ``long``: 1,000 and 10,000 steps with the uniform PT, each in its own
  process, with wall time and peak RSS.

    python benchmarks/bench_long_time.py [--parts accuracy oqupy scaling long]
        [--json PATH] [--png PATH] [--quick] [--oqupy-python PY] [--oqupy-cache PATH]

Writes a table to stdout, JSON and a PNG plot (default under
``benchmarks/results/``, which git ignores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from _common import OQUPY_PYTHON_HELP, oqupy_python, spin_boson_model, subprocess_json, thread_env

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
DT, TCUT = 1.0 / 16.0, 4.0
REFERENCE_EPSREL, REFERENCE_STEPS = 1e-7, 256
METHODS = ("sequential", "divide", "blocks", "uniform")


def _sigma_z(nm, dynamics) -> np.ndarray:
    """<sigma_z>(t) divided by the trace."""
    _, sigma_z = dynamics.expectations(nm.operators.sigma("z"), real=True)
    _, trace = dynamics.expectations(real=True)
    return sigma_z / trace


def reference_curve(path: str | None = None) -> np.ndarray:
    """<sigma_z>/trace of the converged TEMPO reference (256 steps), cached."""
    path = path or os.path.join(
        RESULTS, f"b2_reference_tempo_eps{REFERENCE_EPSREL:.0e}_{REFERENCE_STEPS}.json"
    )
    if not os.path.exists(path):
        nm, system, bath, rho0 = spin_boson_model()
        print(
            f"computing the TEMPO reference (epsrel {REFERENCE_EPSREL}, "
            f"{REFERENCE_STEPS} steps; several minutes) ...",
            file=sys.stderr,
        )
        parameters = nm.TempoParameters(dt=DT, tcut=TCUT, epsrel=REFERENCE_EPSREL)
        start = time.perf_counter()
        tempo = nm.Tempo(system, bath, parameters, rho0, 0.0, unique=True)
        dynamics = tempo.compute(REFERENCE_STEPS * DT, progress_type="silent")
        times, sigma_z = dynamics.expectations(nm.operators.sigma("z"), real=True)
        record = {
            "method": "tempo",
            "epsrel": REFERENCE_EPSREL,
            "steps": REFERENCE_STEPS,
            "dt": DT,
            "tcut": TCUT,
            "wall_time_s": time.perf_counter() - start,
            "max_bond_dimension": tempo.max_bond_dimension,
            "times": times.tolist(),
            "sigma_z": sigma_z.tolist(),
            "trace": dynamics.expectations(real=True)[1].tolist(),
        }
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as handle:
            json.dump(record, handle)
        os.replace(path + ".tmp", path)
    with open(path) as handle:
        record = json.load(handle)
    return np.array(record["sigma_z"]) / np.array(record["trace"])


def run_method(method: str, num_steps: int, epsrel: float) -> dict:
    """Build the PT with ``method`` and compute ``num_steps`` steps; times and curve."""
    nm, system, bath, rho0 = spin_boson_model()
    parameters = nm.TempoParameters(dt=DT, tcut=TCUT, epsrel=epsrel)
    start = time.perf_counter()
    if method == "sequential":
        pt = nm.PtTempo(bath, 0.0, num_steps * DT, parameters, unique=True).get_process_tensor(
            progress_type="silent"
        )
        bond = int(pt.get_bond_dimensions().max())
    elif method == "divide":
        pt = nm.pt_divide_and_conquer_compute(
            bath, 0.0, num_steps * DT, parameters, unique=True, progress_type="silent"
        )
        bond = int(pt.get_bond_dimensions().max())
    elif method == "blocks":
        pt = nm.pt_repeated_block_compute(
            bath, 0.0, num_steps * DT, parameters, unique=True, progress_type="silent"
        )
        bond = int(pt.get_bond_dimensions().max())
    else:
        uniform = nm.pt_uniform_compute(bath, parameters, unique=True, progress_type="silent")
        bond = uniform.bond_dimension
    middle = time.perf_counter()
    if method == "uniform":
        dynamics = nm.compute_uniform_dynamics(
            system, rho0, num_steps, uniform, progress_type="silent"
        )
    else:
        dynamics = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
    end = time.perf_counter()
    return {
        "method": method,
        "steps": num_steps,
        "epsrel": epsrel,
        "build_s": middle - start,
        "dynamics_s": end - middle,
        "total_s": end - start,
        "bond": bond,
        "sigma_z": _sigma_z(nm, dynamics).tolist(),
    }


def part_accuracy(epsrels: dict[str, list[float]]) -> list[dict]:
    reference = reference_curve()
    rows = []
    for method, values in epsrels.items():
        for epsrel in values:
            record = run_method(method, REFERENCE_STEPS, epsrel)
            curve = np.array(record.pop("sigma_z"))
            record["error"] = float(np.max(np.abs(curve - reference)))
            record["sigma_z_final"] = float(curve[-1])
            rows.append(record)
            print(
                f"  accuracy {method:10} epsrel {epsrel:8.2e}: total {record['total_s']:7.2f}"
                f" s, bond {record['bond']:3d}, error {record['error']:.2e}",
                flush=True,
            )
    return rows


def part_oqupy(python: str | None, cache: str | None, epsrel: float) -> dict:
    """OQuPy 0.5 PT-TEMPO on B2, 256 steps, in its own environment (or a cached run)."""
    if cache and os.path.exists(cache):
        with open(cache) as handle:
            record = json.load(handle)
    else:
        command = [
            oqupy_python(python),
            os.path.join(HERE, "oqupy_reference.py"),
            "--problem",
            "B2",
            "--steps",
            str(REFERENCE_STEPS),
            "--epsrel",
            str(epsrel),
        ]
        record = subprocess_json(command, thread_env(None))
        if cache:
            with open(cache + ".tmp", "w") as handle:
                json.dump(record, handle)
            os.replace(cache + ".tmp", cache)
    curve = np.array(record["sigma_z"]) / np.array(record["trace"])
    row = {
        "method": "OQuPy 0.5",
        "epsrel": record["parameters"]["epsrel"],
        "build_s": record["wall_time_s"]["pt_build"],
        "dynamics_s": record["wall_time_s"]["dynamics"],
        "total_s": record["wall_time_s"]["pt_build"] + record["wall_time_s"]["dynamics"],
        "bond": record["max_bond_dimension"],
        "error": float(np.max(np.abs(curve - reference_curve()))),
    }
    print(
        f"  OQuPy 0.5 epsrel {row['epsrel']:.2e}: total {row['total_s']:.1f} s, bond "
        f"{row['bond']}, error {row['error']:.2e}",
        flush=True,
    )
    return row


def part_scaling(steps: list[int], sequential_max: int, epsrel: float) -> list[dict]:
    rows = []
    for method in METHODS:
        for num_steps in steps:
            if method == "sequential" and num_steps > sequential_max:
                continue
            record = run_method(method, num_steps, epsrel)
            record.pop("sigma_z")
            rows.append(record)
            print(
                f"  scaling {method:10} N {num_steps:6d}: build {record['build_s']:7.2f} s, "
                f"dynamics {record['dynamics_s']:7.2f} s",
                flush=True,
            )
    return rows


def _peak_rss_kib() -> int:
    """Peak resident set size of this process (KiB): VmHWM on Linux.

    ``ru_maxrss`` is not used: Linux carries it over fork and exec, so a
    worker would report its parent's peak if that was larger.
    """
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def long_worker(num_steps: int, epsrel: float) -> dict:
    """One long run with the uniform PT (called in its own process)."""
    start = time.perf_counter()
    nm, system, bath, rho0 = spin_boson_model()
    parameters = nm.TempoParameters(dt=DT, tcut=TCUT, epsrel=epsrel)
    imported = time.perf_counter()
    uniform = nm.pt_uniform_compute(bath, parameters, unique=True, progress_type="silent")
    built = time.perf_counter()
    rss_built = _peak_rss_kib()
    dynamics = nm.compute_uniform_dynamics(system, rho0, num_steps, uniform, progress_type="silent")
    done = time.perf_counter()
    steady = nm.compute_steady_state(system, uniform)
    curve = _sigma_z(nm, dynamics)
    return {
        "steps": num_steps,
        "epsrel": epsrel,
        "import_s": imported - start,
        "build_s": built - imported,
        "dynamics_s": done - built,
        "total_s": done - imported,
        "bond": uniform.bond_dimension,
        "maxrss_kib_after_build": rss_built,
        "maxrss_kib": _peak_rss_kib(),
        "sigma_z_final": float(curve[-1]),
        "sigma_z_steady": float(np.trace(steady @ nm.operators.sigma("z")).real),
        "sigma_z_every_16": curve[::16].tolist(),
    }


def part_long(steps: list[int], epsrel: float) -> list[dict]:
    rows = []
    for num_steps in steps:
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "long.json")
            subprocess.run(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--worker-long",
                    str(num_steps),
                    "--epsrel",
                    str(epsrel),
                    "--json",
                    path,
                ],
                check=True,
            )
            with open(path) as handle:
                record = json.load(handle)
        rows.append(record)
        print(
            f"  long N {num_steps:6d}: build {record['build_s']:.2f} s, dynamics "
            f"{record['dynamics_s']:.2f} s, maxrss {record['maxrss_kib'] / 1024:.0f} MiB",
            flush=True,
        )
    return rows


def print_tables(results: dict) -> None:
    if results.get("accuracy"):
        print("\nB2, 256 steps: error of <sigma_z>(t) against TEMPO (epsrel 1e-7)")
        print(
            f"{'method':12} {'epsrel':>9} {'build s':>9} {'dynamics s':>11} {'total s':>9} "
            f"{'bond':>5} {'max error':>10}"
        )
        for r in results["accuracy"]:
            print(
                f"{r['method']:12} {r['epsrel']:9.2e} {r['build_s']:9.2f} "
                f"{r['dynamics_s']:11.3f} {r['total_s']:9.2f} {r['bond']:5d} "
                f"{r['error']:10.2e}"
            )
    if results.get("oqupy"):
        theirs = results["oqupy"]
        print(f"\nB2, 256 steps, side by side with OQuPy 0.5 (epsrel {theirs['epsrel']:.2e})")
        print(
            f"{'method':12} {'total s':>9} {'OQuPy s':>9} {'ratio':>7} {'bond':>5} "
            f"{'error':>9} {'OQuPy error':>12}"
        )
        for r in results.get("accuracy", []):
            if abs(r["epsrel"] - theirs["epsrel"]) <= 1e-12 * theirs["epsrel"]:
                print(
                    f"{r['method']:12} {r['total_s']:9.2f} {theirs['total_s']:9.1f} "
                    f"{theirs['total_s'] / r['total_s']:7.1f} {r['bond']:5d} "
                    f"{r['error']:9.2e} {theirs['error']:12.2e}"
                )
    if results.get("scaling"):
        print(
            "\nWall time (s) against the number of steps N "
            f"(epsrel {results['scaling'][0]['epsrel']:.2e})"
        )
        steps = sorted({r["steps"] for r in results["scaling"]})
        print(f"{'method':12} " + " ".join(f"{n:>8d}" for n in steps))
        for method in METHODS:
            cells = []
            for n in steps:
                match = [r for r in results["scaling"] if r["method"] == method and r["steps"] == n]
                cells.append(f"{match[0]['total_s']:8.2f}" if match else f"{'-':>8}")
            print(f"{method:12} " + " ".join(cells))
    if results.get("long"):
        print("\nUniform PT, long runs (each in its own process)")
        print(
            f"{'steps':>7} {'build s':>8} {'dynamics s':>11} {'total s':>8} {'bond':>5} "
            f"{'maxrss MiB':>11} {'sz(end)':>9} {'sz steady':>10}"
        )
        for r in results["long"]:
            print(
                f"{r['steps']:7d} {r['build_s']:8.2f} {r['dynamics_s']:11.2f} "
                f"{r['total_s']:8.2f} {r['bond']:5d} {r['maxrss_kib'] / 1024:11.0f} "
                f"{r['sigma_z_final']:9.5f} {r['sigma_z_steady']:10.5f}"
            )


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    if results.get("scaling"):
        for method, marker in zip(METHODS, "ods^"):
            rows = sorted(
                (r for r in results["scaling"] if r["method"] == method), key=lambda r: r["steps"]
            )
            if rows:
                axes[0].loglog(
                    [r["steps"] for r in rows],
                    [r["total_s"] for r in rows],
                    marker=marker,
                    label=method,
                )
        axes[0].set_xlabel("steps N")
        axes[0].set_ylabel("wall time (s), build + dynamics")
        axes[0].legend()
        axes[0].set_title("cost against N")
    if results.get("accuracy"):
        for method, marker in zip(METHODS, "ods^"):
            rows = [r for r in results["accuracy"] if r["method"] == method]
            if rows:
                axes[1].loglog(
                    [r["epsrel"] for r in rows],
                    [r["error"] for r in rows],
                    marker=marker,
                    label=method,
                )
        axes[1].axhline(1e-3, color="grey", linestyle=":")
        axes[1].set_xlabel("epsrel")
        axes[1].set_ylabel("max |error| of <sigma_z>")
        axes[1].legend()
        axes[1].set_title("B2, 256 steps, against TEMPO 1e-7")
    if results.get("long"):
        longest = max(results["long"], key=lambda r: r["steps"])
        curve = np.array(longest["sigma_z_every_16"])
        axes[2].plot(np.arange(len(curve)) * 16 * DT, curve, label="uniform PT")
        axes[2].axhline(
            longest["sigma_z_steady"], color="k", linestyle="--", label="compute_steady_state"
        )
        axes[2].set_xlabel("t")
        axes[2].set_ylabel("<sigma_z>")
        axes[2].set_xscale("log")
        axes[2].legend()
        axes[2].set_title(f"{longest['steps']} steps")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["accuracy", "oqupy", "scaling", "long"],
        choices=["accuracy", "oqupy", "scaling", "long"],
    )
    parser.add_argument("--oqupy-python", default=None, help=OQUPY_PYTHON_HELP)
    parser.add_argument(
        "--oqupy-cache",
        default=None,
        help="JSON of an earlier OQuPy run to reuse (written if missing)",
    )
    parser.add_argument("--json", default=os.path.join(RESULTS, "long_time.json"))
    parser.add_argument("--png", default=os.path.join(RESULTS, "long_time.png"))
    parser.add_argument("--quick", action="store_true", help="fewer points (smoke test)")
    parser.add_argument(
        "--epsrel", type=float, default=2.0**-14, help="epsrel of the scaling and long parts"
    )
    parser.add_argument("--worker-long", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker_long is not None:
        record = long_worker(args.worker_long, args.epsrel)
        with open(args.json, "w") as handle:
            json.dump(record, handle)
        return 0

    if args.quick:
        epsrels = {"sequential": [2.0**-12], "divide": [2.0**-12], "uniform": [2.0**-12]}
        steps, sequential_max, long_steps = [64, 256, 1000], 256, [1000]
    else:
        epsrels = {
            "sequential": [2.0**-14, 2.0**-16],
            "divide": [2.0**-12, 2.0**-14, 2.0**-15, 2.0**-16],
            "blocks": [2.0**-14],
            "uniform": [2.0**-14, 2.0**-16],
        }
        steps, sequential_max = [64, 128, 256, 512, 1024, 4096, 10000], 512
        long_steps = [1000, 10000]
    results: dict = {"model": "B2 spin-boson", "dt": DT, "tcut": TCUT}
    if "accuracy" in args.parts:
        results["accuracy"] = part_accuracy(epsrels)
    if "oqupy" in args.parts:
        results["oqupy"] = part_oqupy(args.oqupy_python, args.oqupy_cache, args.epsrel)
    if "scaling" in args.parts:
        results["scaling"] = part_scaling(steps, sequential_max, args.epsrel)
    if "long" in args.parts:
        results["long"] = part_long(long_steps, args.epsrel)
    print_tables(results)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as handle:
        json.dump(results, handle)
    plot(results, args.png)
    print(f"\nwrote {args.json} and {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
