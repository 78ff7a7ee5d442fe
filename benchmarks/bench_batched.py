"""Batched dynamics on one process tensor: a Python loop of ``compute_dynamics``
against ``compute_dynamics_batch`` on NumPy and on JAX, side by side in one run.

    python benchmarks/bench_batched.py [--sizes 1 10 100 1000] [--loop-max 100]
        [--backends numpy jax] [--jax-platform cpu|cuda] [--json FILE]

The process tensor (built once with NumPy): the B1/B2 bath (spin-boson,
alpha 0.3, exponential cutoff 5, T = 0; ``_common.spin_boson_model``) with
PT-TEMPO at dt 0.1, tcut 2.5, epsrel 2**-14 (B2's) to t = 5: 50 steps, bond 32.
The members (``--cases``): ``detunings`` H_S = 0.5 sigma_x + e sigma_z for B
detunings e in [0, 1], spin up (the default); ``states`` one system, B initial
states; ``pulses`` B time-dependent systems (a Gaussian pulse each);
``correlations`` the detunings' <sigma_z(t_b) sigma_z(t_a)> (t_a = 0, 1, 2, every
t_b), ``compute_correlations`` in a loop against ``compute_correlations_batch``.
Per case and
size B the table gives the time per member of

- ``loop``: ``compute_dynamics`` member after member (NumPy; timed on the first
  min(B, --loop-max) members, the loop's cost being linear in B);
- ``numpy``: ``compute_dynamics_batch`` on NumPy, and its speed-up over the loop;
- ``jax``: ``compute_dynamics_batch`` on JAX, warm (the compile time of the
  first call at that size in its own column), and its speed-up over the loop;

and the largest deviation of any batched member from its own loop run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PT_PARAMETERS = {"dt": 0.1, "tcut": 2.5, "epsrel": 2**-14}
END_TIME = 5.0


def build_process_tensor():
    """(nonmarkov, the process tensor, the initial state), on NumPy."""
    from _common import spin_boson_model

    nm, _, bath, rho0 = spin_boson_model()
    with nm.backends.use_backend("numpy"):
        pt = nm.pt_tempo_compute(
            bath, 0.0, END_TIME, nm.TempoParameters(**PT_PARAMETERS), progress_type="silent"
        )
    return nm, pt, rho0


def detuned_systems(nm, count: int):
    import numpy

    sx, sz = nm.operators.sigma("x"), nm.operators.sigma("z")
    return [nm.System(0.5 * sx + e * sz) for e in numpy.linspace(0.0, 1.0, count)]


def batch_case(nm, case: str, count: int, rho0):
    """(systems, initial states) of B members: ``detunings`` (B time-independent
    systems, one state), ``states`` (one system, B pure states on the Bloch
    sphere), ``pulses`` (B time-dependent systems, a Gaussian pulse of amplitude
    in [0.5, 1.5] each, evaluated with the midpoint rule: subdiv_limit None)."""
    import numpy

    sx, sz = nm.operators.sigma("x"), nm.operators.sigma("z")
    if case == "detunings":
        return detuned_systems(nm, count), [rho0] * count
    if case == "states":
        angles = numpy.linspace(0.0, numpy.pi, count)
        states = [
            numpy.outer(v, v.conj())
            for v in (numpy.array([numpy.cos(a / 2), numpy.sin(a / 2)]) for a in angles)
        ]
        return [nm.System(0.5 * sx)] * count, states
    systems = [
        nm.TimeDependentSystem(
            lambda t, amplitude=amplitude: amplitude * numpy.exp(-((t - 2.5) ** 2)) * sx + 0.2 * sz
        )
        for amplitude in numpy.linspace(0.5, 1.5, count)
    ]
    return systems, [rho0] * count


def best_of(function, repeat: int) -> tuple[float, object]:
    """The shortest of ``repeat`` timings of ``function()`` and its last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def measure(nm, pt, rho0, case: str, size: int, args, jax_device, bond: int) -> dict:
    """One row of the table: the loop, then each backend's batch, of ``size`` members."""
    import numpy

    systems, states = batch_case(nm, "detunings" if case == "correlations" else case, size, rho0)
    keywords = {"process_tensor": pt, "progress_type": "silent"}
    if case == "pulses":
        keywords["subdiv_limit"] = None
    sz = nm.operators.sigma("z")
    # correlations: <sigma_z(t_b) sigma_z(t_a)>, t_a at 0, 1, 2 and every t_b of the grid

    def one(m):
        if case == "correlations":
            return nm.compute_correlations(
                systems[m],
                pt,
                sz,
                sz,
                [0, 10, 20],
                slice(None),
                initial_state=states[m],
                progress_type="silent",
            )[1]
        return nm.compute_dynamics(systems[m], states[m], **keywords).states

    def batched():
        if case == "correlations":
            return nm.compute_correlations_batch(
                systems,
                pt,
                sz,
                sz,
                [0, 10, 20],
                slice(None),
                initial_states=states,
                progress_type="silent",
            )[1]
        return nm.compute_dynamics_batch(systems, states, **keywords).states

    looped = min(size, args.loop_max)
    record: dict = {"case": case, "members": size, "bond": bond, "steps": len(pt)}
    loop_seconds, references = best_of(
        lambda: [one(m) for m in range(looped)], 1 if looped > 10 else args.repeat
    )
    record["loop_s_per_member"] = loop_seconds / looped
    deviation = 0.0
    for backend in args.backends:
        with nm.backends.use_backend(backend):
            if backend == "jax":
                start = time.perf_counter()
                batched()
                record["jax_first_call_s"] = time.perf_counter() - start
                record["jax_device"] = jax_device
            seconds, values = best_of(batched, args.repeat)
        record[f"{backend}_s_per_member"] = seconds / size
        for m, reference in enumerate(references):
            deviation = max(deviation, float(numpy.nanmax(numpy.abs(values[m] - reference))))
    record["max_deviation"] = deviation
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument(
        "--cases",
        nargs="+",
        default=["detunings"],
        choices=["detunings", "states", "pulses", "correlations"],
    )
    parser.add_argument("--loop-max", type=int, default=100, help="members timed in the loop")
    parser.add_argument("--backends", nargs="+", default=["numpy", "jax"], choices=["numpy", "jax"])
    parser.add_argument("--jax-platform", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeat", type=int, default=3, help="timings per case (best kept)")
    parser.add_argument("--json", default=None, help="write all records to this JSON file")
    args = parser.parse_args(argv)
    if "jax" in args.backends:
        os.environ["JAX_PLATFORMS"] = args.jax_platform

    nm, pt, rho0 = build_process_tensor()
    bond = int(max(pt.get_bond_dimensions()))
    print(
        f"process tensor: spin-boson alpha 0.3, {PT_PARAMETERS}, {len(pt)} steps, bond {bond}; "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}"
    )
    jax_device = None
    if "jax" in args.backends:
        with nm.backends.use_backend("jax"):
            jax_device = nm.backends.info()["default_device"]
    records = []
    for case in args.cases:
        for size in args.sizes:
            records.append(measure(nm, pt, rho0, case, size, args, jax_device, bond))
    print()
    header = f"{'case':>12} {'members':>7} {'loop ms':>9}"
    if "numpy" in args.backends:
        header += f" {'numpy ms':>9} {'speed-up':>8}"
    if "jax" in args.backends:
        header += f" {'jax ms':>9} {'speed-up':>8} {'jax 1st s':>9}"
    print("time per member (ms)")
    print(header + f" {'max dev':>9}")
    for r in records:
        line = f"{r['case']:>12} {r['members']:>7} {1e3 * r['loop_s_per_member']:>9.3f}"
        for backend in ("numpy", "jax"):
            if backend not in args.backends:
                continue
            per = r[f"{backend}_s_per_member"]
            line += f" {1e3 * per:>9.3f} {r['loop_s_per_member'] / per:>7.1f}x"
            if backend == "jax":
                line += f" {r['jax_first_call_s']:>9.2f}"
        print(line + f" {r['max_deviation']:>9.1e}")
    if jax_device:
        print(f"JAX device: {jax_device}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"benchmark": "batched", "records": records}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
