"""TEMPO's truncation error and time against the ``trace_weight`` engine option.

For each model, time step and epsrel, TEMPO runs with every trace weight; the
error is max_t |<sigma_z>(t) - reference| against a run at epsrel 1e-11 with the
same dt and memory (only the truncation differs; the reference is checked against
the flat norm's run at 1e-11). Models (H_S = 0.25 sz + 0.5 sx, coupling sz, spin up,
Drude-Lorentz bath with lambda 0.25, gamma 1, to t = 8):

- ``lowT``: T 0.1, a plain memory cut at tcut 2;
- ``weak``: lambda 0.05, T 1, a plain cut at tcut 2.

(Plain cuts: with the exponential tail modes epsrel also sets the modes' fit, so runs
at different epsrel differ by more than their truncation; benchmarks/bench_heom.py
measures those against HEOM.)

CPU seconds of each run, one BLAS thread:

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_trace_weight.py [--models lowT weak]
        [--dts 0.4 0.2 0.1] [--weights 1 3 10 30 100] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import nonmarkov as nm
from nonmarkov.options import EngineOptions

END = 8.0
EPSRELS = (1e-6, 1e-7, 1e-8)
REFERENCE_EPSREL = 1e-11
MODELS = {
    "lowT": {"lam": 0.25, "T": 0.1, "tcut": 2.0},
    "weak": {"lam": 0.05, "T": 1.0, "tcut": 2.0},
}


def run(model: dict, dt: float, epsrel: float, weight: float) -> tuple[np.ndarray, float, int]:
    """<sigma_z> at the multiples of dt, CPU seconds and the largest bond."""
    sz = nm.operators.sigma("z")
    system = nm.System(0.25 * sz + 0.5 * nm.operators.sigma("x"))
    correlations = nm.DrudeLorentzSD(
        reorganisation_energy=model["lam"], cutoff=1.0, temperature=model["T"]
    )
    bath = nm.Bath(sz, correlations)
    parameters = nm.TempoParameters(dt=dt, tcut=model["tcut"], epsrel=epsrel)
    start = time.process_time()
    tempo = nm.Tempo(
        system,
        bath,
        parameters,
        nm.operators.spin_dm("up"),
        0.0,
        options=EngineOptions(trace_weight=weight),
    )
    dynamics = tempo.compute(END, progress_type="silent")
    seconds = time.process_time() - start
    return dynamics.expectations(sz, real=True)[1], seconds, tempo.max_bond_dimension


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--dts", nargs="+", type=float, default=[0.4, 0.2, 0.1])
    parser.add_argument("--weights", nargs="+", type=float, default=[1, 3, 10, 30, 100])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    records = []
    print("| model | dt | epsrel | weight | error | bond | s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.models:
        model = MODELS[name]
        for dt in args.dts:
            reference, seconds, bond = run(model, dt, REFERENCE_EPSREL, 10.0)
            flat, flat_seconds, flat_bond = run(model, dt, REFERENCE_EPSREL, 1.0)
            check = float(np.max(np.abs(flat - reference)))
            print(
                f"| {name} | {dt:g} | {REFERENCE_EPSREL:g} | 10 (reference; flat: "
                f"{check:.1e} off, bond {flat_bond}, {flat_seconds:.1f} s) | - | {bond} | "
                f"{seconds:.1f} |",
                flush=True,
            )
            for epsrel in EPSRELS:
                for weight in args.weights:
                    values, seconds, bond = run(model, dt, epsrel, weight)
                    error = float(np.max(np.abs(values - reference)))
                    records.append(
                        {
                            "model": name,
                            "dt": dt,
                            "epsrel": epsrel,
                            "weight": weight,
                            "error": error,
                            "bond": int(bond),
                            "seconds": seconds,
                            "reference_check": check,
                        }
                    )
                    print(
                        f"| {name} | {dt:g} | {epsrel:g} | {weight:g} | {error:.1e} | {bond} | "
                        f"{seconds:.2f} |",
                        flush=True,
                    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle, indent=1)


if __name__ == "__main__":
    main()
