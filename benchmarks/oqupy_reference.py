"""Reference timings and results from OQuPy 0.5.0 for the nonmarkov benchmarks.

Run with the python of the separate OQuPy virtual environment created by
``benchmarks/setup_oqupy_env.sh`` (never with the nonmarkov environment)::

    python oqupy_reference.py --problem B1 --json b1.json
    python oqupy_reference.py --problem B2 [--steps N] --json b2.json

Both problems are the spin-boson model: system Hamiltonian ``0.5*sigma_x``,
coupling operator ``0.5*sigma_z``, an Ohmic power-law spectral density
(alpha=0.3, zeta=1, cutoff=5, exponential cutoff, zero temperature) and the
initial state spin up (``|up><up|``, ``<sigma_z> = +1``).

* ``B1``: TEMPO with dt=0.1, tcut=3, epsrel=1e-4, ``unique=True``, evolved
  from t=0 to t=10.
* ``B2``: PT-TEMPO with dt=1/16, tcut=4, epsrel=2**-14; the process tensor
  is built from t=0 for ``--steps`` steps (default 128) and then the
  dynamics are computed from it with ``compute_dynamics``.

What is measured and written to the JSON file: the problem and its
parameters, the OQuPy and NumPy versions, the wall time (``time.perf_counter``)
of each phase (setup, TEMPO compute, or PT build and dynamics), the peak
traced memory of each phase (``tracemalloc``, bytes), the peak resident set
size of the process (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, KiB on
Linux) before and after the phases, the maximal bond dimension of the process
tensor where the public API exposes it (``get_bond_dimensions``; ``None`` for
TEMPO, whose public API does not expose it), and the time grid, the real part
of ``<sigma_z>(t)`` and the real part of the trace of the reduced state.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
import tracemalloc

import numpy as np
import oqupy

ALPHA = 0.3
ZETA = 1.0
CUTOFF = 5.0
CUTOFF_TYPE = "exponential"
TEMPERATURE = 0.0

B1_PARAMS = {"dt": 0.1, "tcut": 3.0, "epsrel": 1e-4, "end_time": 10.0}
B2_PARAMS = {"dt": 1.0 / 16.0, "tcut": 4.0, "epsrel": 2.0**-14, "steps": 128}


def _maxrss_kib() -> int:
    """Peak resident set size of this process so far (KiB on Linux)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


class _Phase:
    """Context manager timing one phase and recording its tracemalloc peak."""

    def __init__(self, name: str, record: dict, trace: bool) -> None:
        self.name = name
        self.record = record
        self.trace = trace
        self._start = 0.0

    def __enter__(self) -> None:
        if self.trace:
            tracemalloc.reset_peak()
        self._start = time.perf_counter()

    def __exit__(self, *exc_info: object) -> None:
        elapsed = time.perf_counter() - self._start
        self.record["wall_time_s"][self.name] = elapsed
        if self.trace:
            _, peak = tracemalloc.get_traced_memory()
            self.record["tracemalloc_peak_bytes"][self.name] = int(peak)
        else:
            self.record["tracemalloc_peak_bytes"][self.name] = None


def _model() -> tuple[oqupy.System, oqupy.Bath, np.ndarray]:
    system = oqupy.System(0.5 * oqupy.operators.sigma("x"))
    correlations = oqupy.PowerLawSD(
        alpha=ALPHA,
        zeta=ZETA,
        cutoff=CUTOFF,
        cutoff_type=CUTOFF_TYPE,
        temperature=TEMPERATURE,
    )
    bath = oqupy.Bath(0.5 * oqupy.operators.sigma("z"), correlations)
    initial_state = oqupy.operators.spin_dm("z+")
    return system, bath, initial_state


def _sigma_z(dynamics: oqupy.Dynamics) -> tuple[list[float], list[float]]:
    times, sz = dynamics.expectations(oqupy.operators.sigma("z"), real=True)
    return [float(t) for t in np.real(times)], [float(v) for v in np.real(sz)]


def _trace(dynamics: oqupy.Dynamics) -> list[float]:
    """Real part of the trace of each reduced density matrix."""
    return [float(np.real(np.trace(state))) for state in dynamics.states]


def run_b1(record: dict, trace: bool, overrides: dict) -> None:
    """TEMPO: dt=0.1, tcut=3, epsrel=1e-4, unique=True, t in [0, 10] (or overrides)."""
    params = dict(B1_PARAMS, **overrides)
    record["parameters"] = dict(params, unique=True, method="Tempo")
    with _Phase("setup", record, trace):
        system, bath, initial_state = _model()
        tempo_parameters = oqupy.TempoParameters(
            dt=params["dt"], tcut=params["tcut"], epsrel=params["epsrel"]
        )
        tempo = oqupy.Tempo(
            system=system,
            bath=bath,
            parameters=tempo_parameters,
            initial_state=initial_state,
            start_time=0.0,
            unique=True,
        )
    with _Phase("tempo_compute", record, trace):
        dynamics = tempo.compute(end_time=params["end_time"], progress_type="silent")
    record["parameters"]["dkmax"] = tempo_parameters.dkmax
    record["max_bond_dimension"] = None
    record["max_bond_dimension_note"] = "not exposed by the public OQuPy 0.5.0 Tempo/Dynamics API"
    record["times"], record["sigma_z"] = _sigma_z(dynamics)
    record["trace"] = _trace(dynamics)


def run_b2(record: dict, trace: bool, steps: int, overrides: dict) -> None:
    """PT-TEMPO: dt=1/16, tcut=4, epsrel=2**-14, then compute_dynamics (or overrides)."""
    params = dict(B2_PARAMS, steps=steps, **overrides)
    dt = params["dt"]
    end_time = steps * dt
    record["parameters"] = dict(params, end_time=end_time, unique=False, method="pt_tempo_compute")
    with _Phase("setup", record, trace):
        system, bath, initial_state = _model()
        tempo_parameters = oqupy.TempoParameters(
            dt=dt, tcut=params["tcut"], epsrel=params["epsrel"]
        )
    with _Phase("pt_build", record, trace):
        process_tensor = oqupy.pt_tempo_compute(
            bath=bath,
            start_time=0.0,
            end_time=end_time,
            parameters=tempo_parameters,
            progress_type="silent",
        )
    with _Phase("dynamics", record, trace):
        dynamics = oqupy.compute_dynamics(
            system,
            process_tensor=process_tensor,
            initial_state=initial_state,
            start_time=0.0,
            progress_type="silent",
        )
    record["parameters"]["dkmax"] = tempo_parameters.dkmax
    record["pt_steps"] = len(process_tensor)
    bond_dimensions = np.asarray(process_tensor.get_bond_dimensions())
    record["bond_dimensions"] = [int(b) for b in bond_dimensions]
    record["max_bond_dimension"] = int(bond_dimensions.max())
    record["times"], record["sigma_z"] = _sigma_z(dynamics)
    record["trace"] = _trace(dynamics)


def main(argv: list[str] | None = None) -> int:
    """Run one reference problem and write its JSON record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", required=True, choices=["B1", "B2"])
    parser.add_argument(
        "--steps",
        type=int,
        default=B2_PARAMS["steps"],
        help="number of PT-TEMPO steps for B2 (default: %(default)s)",
    )
    parser.add_argument("--json", required=True, help="output JSON file")
    parser.add_argument("--epsrel", type=float, default=None, help="override the problem's epsrel")
    parser.add_argument("--end-time", type=float, default=None, help="override B1's end time")
    parser.add_argument(
        "--no-tracemalloc",
        action="store_true",
        help="do not run tracemalloc during the timed phases (less overhead)",
    )
    args = parser.parse_args(argv)
    trace = not args.no_tracemalloc

    record: dict = {
        "problem": args.problem,
        "oqupy_version": oqupy.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "thread_env": {
            key: os.environ.get(key)
            for key in (
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS",
            )
        },
        "model": {
            "hamiltonian": "0.5*sigma_x",
            "coupling_operator": "0.5*sigma_z",
            "spectral_density": {
                "alpha": ALPHA,
                "zeta": ZETA,
                "cutoff": CUTOFF,
                "cutoff_type": CUTOFF_TYPE,
                "temperature": TEMPERATURE,
            },
            "initial_state": "spin up |up><up|",
        },
        "tracemalloc_active": trace,
        "wall_time_s": {},
        "tracemalloc_peak_bytes": {},
        "maxrss_kib_before": _maxrss_kib(),
    }
    if trace:
        tracemalloc.start()
    total_start = time.perf_counter()
    overrides = {} if args.epsrel is None else {"epsrel": args.epsrel}
    if args.problem == "B1":
        if args.end_time is not None:
            overrides["end_time"] = args.end_time
        run_b1(record, trace, overrides)
    else:
        run_b2(record, trace, args.steps, overrides)
    record["wall_time_s"]["total"] = time.perf_counter() - total_start
    if trace:
        record["tracemalloc_peak_bytes"]["max_over_phases"] = max(
            record["tracemalloc_peak_bytes"].values()
        )
        tracemalloc.stop()
    record["maxrss_kib_after"] = _maxrss_kib()

    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1)
    summary = {
        key: record[key]
        for key in ("problem", "wall_time_s", "max_bond_dimension", "maxrss_kib_after")
    }
    print(json.dumps(summary), file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
