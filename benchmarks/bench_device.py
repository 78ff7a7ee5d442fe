"""The compiled JAX window on each device: the host CPU against the accelerator.

For ``gpu_check.sh``. B1 (TEMPO) and B2 (PT-TEMPO) of ``bench_jax.py`` run with
the compiled zip-up step from the first step (``compiled='on'``) on the host CPU
(``device='host'``) and on the accelerator (``device='accelerator'``), each twice
in this process (the second run finds its kernels compiled: the step time), and
with NumPy; the table gives the seconds of both runs, the compiled steps, the
kernels compiled, the device the engine reports and max |rho - rho_numpy|. Exit
status 1 when a JAX run differs from NumPy by more than 1e-6 (these problems are
not well-conditioned to rounding at their epsrel: a change of 1e-13 in the model
moves NumPy's own result by up to 1e-3 for B1) or runs on the wrong device.

    python benchmarks/bench_device.py [--problems B1 B2] [--end-time 3]
        [--fake-accelerator] [--json out.json]

``--fake-accelerator`` (dry runs on a CPU): the last CPU device stands in for
the accelerator (start Python with
``XLA_FLAGS=--xla_force_host_platform_device_count=2`` so that it is another
device).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import bench_jax


def _fake(enabled: bool) -> None:
    if enabled:
        import jax

        from nonmarkov.engines.jax import placement

        other = jax.devices("cpu")[-1]
        placement.accelerators = lambda: [other]


def _run(problem: str, end_time: float, backend: str, **options) -> tuple[np.ndarray, float, dict]:
    import nonmarkov as nm

    spec = bench_jax.PROBLEMS[problem]
    with nm.backends.use_backend(backend):
        _, system, bath, rho0 = bench_jax._model(spec["spin"])
        parameters = nm.TempoParameters(
            dt=spec.get("dt", bench_jax.DT),
            tcut=spec.get("tcut", bench_jax.TCUT),
            epsrel=spec["epsrel"],
        )
        engine_options = nm.options.EngineOptions(**options)
        start = time.perf_counter()
        if spec.get("kind") == "pt":
            builder = nm.PtTempo(bath, 0.0, end_time, parameters, options=engine_options)
            pt = builder.get_process_tensor(progress_type="silent")
            dynamics = nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent")
        else:
            builder = nm.Tempo(system, bath, parameters, rho0, 0.0, options=engine_options)
            dynamics = builder.compute(end_time, progress_type="silent")
        seconds = time.perf_counter() - start
        stats = getattr(builder.engine, "stats", None)
    record = {}
    if stats is not None:
        record = {
            "compiled_steps": stats.compiled_steps,
            "host_steps": stats.host_steps,
            "kernels_compiled": stats.kernels_compiled,
            "device": stats.device,
        }
    return np.asarray(dynamics.states), seconds, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", nargs="+", default=["B1", "B2"])
    parser.add_argument("--end-time", type=float, default=3.0)
    parser.add_argument("--fake-accelerator", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    _fake(args.fake_accelerator)
    from nonmarkov.engines.jax import placement

    have_accelerator = bool(placement.accelerators())
    devices = ["host"] + (["accelerator"] if have_accelerator else [])
    records, good = [], True
    print(
        f"{'problem':8} {'device':12} {'first s':>8} {'second s':>9} {'compiled':>8} "
        f"{'kernels':>7} {'max|drho|':>9}  engine device"
    )
    for problem in args.problems:
        reference, numpy_s, _ = _run(problem, args.end_time, "numpy")
        print(f"{problem:8} {'numpy':12} {numpy_s:8.2f}")
        for device in devices:
            _, first_s, first = _run(problem, args.end_time, "jax", compiled="on", device=device)
            states, second_s, second = _run(
                problem, args.end_time, "jax", compiled="on", device=device
            )
            deviation = float(np.max(np.abs(states - reference)))
            expected = "cpu" if device == "host" else None
            on_device = expected is None or str(second.get("device", "")).startswith(expected)
            good = good and deviation <= 1e-6 and on_device
            print(
                f"{problem:8} {device:12} {first_s:8.2f} {second_s:9.2f} "
                f"{second.get('compiled_steps', 0):8d} {first.get('kernels_compiled', 0):7d} "
                f"{deviation:9.1e}  {second.get('device')}"
            )
            records.append(
                {
                    "problem": problem,
                    "device": device,
                    "numpy_s": numpy_s,
                    "first_s": first_s,
                    "second_s": second_s,
                    "max_deviation": deviation,
                    **second,
                }
            )
    if not have_accelerator:
        print("no accelerator: the host CPU only")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle, indent=1)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
