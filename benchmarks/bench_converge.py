"""``nonmarkov.converge`` against the convergence study a physicist runs by hand (issue 40).

For each model, at one tolerance (default 1e-4):

- ``converge``: the ladder from the guessed parameters to an estimate within the
  tolerance; its wall time, cost units (window site updates N x dkmax), the true
  error of its result and its estimate;
- the hand study: a 3 x 3 x 3 grid around the guess (dt x {2, 1, 1/2}, memory
  cut tcut x {1/2, 1, 2}, epsrel x {10, 1, 1/10}), 27 TEMPO runs. A grid point
  "looks converged" when its result differs by less than the tolerance (max over
  times on the common grid and matrix elements) from each of its three neighbours
  one step finer in dt, in the cut and in epsrel; the study's answer is the
  cheapest point that looks converged (the finest point when none does). Reported:
  its wall time and cost units, the true error of its answer, and how many of the
  points that look converged are off by more than the tolerance.

True errors are against exact results, written here independently of the
library: the independent-boson model (H_S and S diagonal)
rho_nm(t) = rho_nm(0) e^{-i phi_nm(t)} e^{-(s_n-s_m)^2 G(t) + i(s_n^2-s_m^2) P(t)},
G, P by ``scipy.integrate.quad`` (DESIGN.md section 1), with phi_nm the integral of
E_n - E_m (a splitting that changes in time gives TEMPO a genuine dt error).

Models (hbar = k_B = 1; J(w) = 2 alpha w^zeta wc^(1-zeta) e^{-w/wc}, S = sz/2):

- ``IB-ohmic``: alpha 0.5, wc 4, T 1, E = +-0.3, t in [0, 3];
- ``IB-subohmic``: zeta 0.5, alpha 0.2, wc 4, T 0.5, E = +-0.3, t in [0, 3];
- ``IB-driven``: ohmic alpha 0.2, wc 4, T 1, E(t) = +-(0.3 + 0.8 sin 2t) with
  midpoint Liouvillians (``subdiv_limit=None``), t in [0, 1].

    OPENBLAS_NUM_THREADS=1 NONMARKOV_BLAS_THREADS=1 python benchmarks/bench_converge.py
        [--models ...] [--tolerance 1e-4] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
import warnings

import numpy as np
import scipy.integrate

import nonmarkov as nm

SZ = np.array([[1, 0], [0, -1]], dtype=complex)
RHO0 = np.outer([0.8, 0.6 * np.exp(0.4j)], np.conj([0.8, 0.6 * np.exp(0.4j)]))

# name: (alpha, zeta, temperature, end time, driven)
MODELS = {
    "IB-ohmic": (0.5, 1.0, 1.0, 3.0, False),
    "IB-subohmic": (0.2, 0.5, 0.5, 3.0, False),
    "IB-driven": (0.2, 1.0, 1.0, 1.0, True),
}
CUTOFF = 4.0


def splitting(t: float, driven: bool) -> float:
    return 0.3 + 0.8 * math.sin(2.0 * t) if driven else 0.3


def model(name: str):
    alpha, zeta, temperature, end, driven = MODELS[name]
    if driven:
        system = nm.TimeDependentSystem(
            lambda t: np.diag([splitting(t, True), -splitting(t, True)]).astype(complex)
        )
    else:
        system = nm.System(0.3 * SZ)
    sd = nm.PowerLawSD(alpha, zeta, CUTOFF, temperature=temperature)
    return system, nm.Bath(0.5 * SZ, sd), end, driven


def exact(name: str, times: np.ndarray) -> np.ndarray:
    """Exact states (len(times), 2, 2), independent of the library."""
    alpha, zeta, temperature, _, driven = MODELS[name]

    def j(w):
        return 2 * alpha * w**zeta * CUTOFF ** (1 - zeta) * math.exp(-w / CUTOFF)

    def coth(w):
        return 1.0 / math.tanh(w / (2 * temperature)) if temperature > 0 else 1.0

    out = []
    for t in times:
        if t == 0:
            g = 0.0
        else:
            kw = {"limit": 500, "epsabs": 1e-14, "epsrel": 1e-12}
            g = scipy.integrate.quad(
                lambda w: j(w) * coth(w) * 2 * math.sin(0.5 * w * t) ** 2 / w**2,
                0,
                60 * CUTOFF,
                **kw,
            )[0]
        # phase of E_0 - E_1 = 2 E(t), integrated; s = +-1/2: (s0 - s1)^2 = 1, and P(t)
        # drops out (s0^2 = s1^2)
        phase = 2 * (0.3 * t + (0.8 * (1 - math.cos(2 * t)) / 2 if driven else 0.0))
        rho = RHO0.copy()
        rho[0, 1] *= np.exp(-1j * phase - g)
        rho[1, 0] *= np.exp(1j * phase - g)
        out.append(rho)
    return np.array(out)


def true_error(dynamics, name: str) -> float:
    return float(np.max(np.abs(dynamics.states - exact(name, dynamics.times))))


def on_grid(dynamics, times: np.ndarray) -> np.ndarray:
    """States at ``times`` (a subset of the dynamics' times)."""
    index = [int(np.argmin(np.abs(dynamics.times - t))) for t in times]
    return dynamics.states[index]


def hand_study(name: str, tolerance: float) -> dict:
    system, bath, end, driven = model(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        guess = nm.guess_tempo_parameters(bath, 0.0, end, system, tolerance)
    extra = {"subdiv_limit": None} if driven else {}
    dts = [2 * guess.dt, guess.dt, guess.dt / 2]
    tcuts = [0.5 * guess.tcut, guess.tcut, 2 * guess.tcut]
    epsrels = [min(10 * guess.epsrel, 1.0), guess.epsrel, max(guess.epsrel / 10, 1e-15)]
    runs = {}
    seconds = 0.0
    units = 0
    for i, j, k in itertools.product(range(3), repeat=3):
        steps = max(1, round(end / dts[i]))
        dkmax = min(steps, max(1, round(tcuts[j] / dts[i])))
        parameters = nm.TempoParameters(dt=dts[i], dkmax=dkmax, epsrel=epsrels[k], **extra)
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            dynamics = nm.tempo_compute(
                system, bath, RHO0, 0.0, end, parameters, progress_type="silent"
            )
        seconds += time.perf_counter() - started
        units += steps * dkmax
        runs[i, j, k] = (dynamics, steps * dkmax)
    # common times: the coarsest grid
    common = runs[0, 0, 0][0].times
    looks = []
    for i, j, k in itertools.product(range(2), repeat=3):
        here = on_grid(runs[i, j, k][0], common)
        finer = [(i + 1, j, k), (i, j + 1, k), (i, j, k + 1)]
        if all(np.max(np.abs(here - on_grid(runs[f][0], common))) < tolerance for f in finer):
            looks.append((i, j, k))
    errors = {point: true_error(runs[point][0], name) for point in looks}
    answer = min(looks, key=lambda p: (runs[p][1], -sum(p))) if looks else (2, 2, 2)
    return {
        "guess": {"dt": guess.dt, "dkmax": guess.dkmax, "epsrel": guess.epsrel},
        "seconds": seconds,
        "cost_units": units,
        "looks_converged": len(looks),
        "looks_converged_but_off": sum(e > tolerance for e in errors.values()),
        "answer": list(answer),
        "answer_error": true_error(runs[answer][0], name),
        "finest_error": true_error(runs[2, 2, 2][0], name),
    }


def converge_run(name: str, tolerance: float) -> dict:
    system, bath, end, driven = model(name)
    start = None
    if driven:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            guess = nm.guess_tempo_parameters(bath, 0.0, end, system, tolerance)
        start = nm.TempoParameters(
            dt=guess.dt, dkmax=guess.dkmax, epsrel=guess.epsrel, subdiv_limit=None
        )
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dynamics = nm.converge(system, bath, RHO0, 0.0, end, tolerance, parameters=start)
    seconds = time.perf_counter() - started
    stats = dynamics.statistics
    return {
        "seconds": seconds,
        "cost_units": stats["ladder_cost_units"],
        "levels": len(stats["ladder"]),
        "parameters": dynamics.metadata["convergence"]["parameters"],
        "estimate": float(np.max(dynamics.error_estimate)),
        "true_error": true_error(dynamics, name),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--json", default=None, help="write the records to this JSON file")
    args = parser.parse_args()
    records = []
    header = (
        f"{'model':12} {'converge s':>10} {'units':>9} {'est':>8} {'true':>8} | "
        f"{'hand s':>8} {'units':>9} {'answer err':>10} {'looks conv.':>11} {'off>tol':>7}"
    )
    print(f"tolerance {args.tolerance:g}")
    print(header)
    for name in args.models:
        mine = converge_run(name, args.tolerance)
        hand = hand_study(name, args.tolerance)
        records.append({"model": name, "tolerance": args.tolerance, "converge": mine, "hand": hand})
        print(
            f"{name:12} {mine['seconds']:10.1f} {mine['cost_units']:9d} {mine['estimate']:8.1e} "
            f"{mine['true_error']:8.1e} | {hand['seconds']:8.1f} {hand['cost_units']:9d} "
            f"{hand['answer_error']:10.1e} {hand['looks_converged']:11d} "
            f"{hand['looks_converged_but_off']:7d}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle, indent=2)


if __name__ == "__main__":
    main()
