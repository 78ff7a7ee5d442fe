"""Does ``guess_tempo_parameters`` meet its tolerance, and at what cost? (issue 42)

For each model and tolerance the parameters are guessed, TEMPO runs with exactly
those parameters, and the achieved error (max over times and matrix elements of
|rho(t) - rho_ref(t)|) is compared with the tolerance. References:

- independent-boson models (H_S, S diagonal): the exact solution
  rho_nm(t) = rho_nm(0) e^{-i(E_n-E_m)t} e^{-(s_n-s_m)^2 G(t) + i(s_n^2-s_m^2) P(t)}
  with G, P by ``scipy.integrate.quad`` (written here, independent of the library);
- spin-boson models: a converged TEMPO run (``REFERENCE`` below: finer dt, full
  memory, epsrel 1e-9), interpolated (cubic) to the guessed run's times.

Models (hbar = k_B = 1; J(w) = sum_k |g_k|^2 delta(w - w_k), DESIGN.md):

- ``IB-ohmic-T0``: spin, E = +-0.3, s = +-0.5, J = 2 0.2 w e^{-w/4}, T = 0, t = 2;
- ``IB-ohmic-T1``: the same with alpha 0.5, T = 1, t = 5;
- ``IB-subohmic``: zeta 0.5, alpha 0.3, T = 0.5, t = 5;
- ``IB-superohmic``: zeta 3, Gaussian cutoff 3, alpha 0.5, T = 0.5, t = 5;
- ``IB-3level``: E = (0.4, 0, -0.7), s = (1, 0, -0.5), ohmic alpha 0.1, T = 0, t = 2;
- ``SB-ohmic``: H_S = 0.5 sx + 0.2 sz, S = sz / 2, ohmic alpha 0.3, wc 5, T = 0.5, t = 3;
- ``SB-drude``: the model of issue 42: H_S = 0.5 sx + 0.3 sz, S = sz / 2, a
  Drude-Lorentz bath lambda 0.25, gamma 1, T = 1 as a ``CustomSD``
  (J = (2 lambda gamma / pi) w / (gamma^2 + w^2), exponential cutoff 50), t = 5.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_guess.py
        [--models ...] [--tolerances 1e-2 1e-3 1e-4] [--json out.json]

By default 1e-4 runs on the independent-boson models only (a spin-boson run at
1e-4 takes minutes); ``--models SB-ohmic --tolerances 1e-4`` asks for it.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import numpy as np
import scipy.integrate
import scipy.interpolate

import nonmarkov as nm

SX = np.array([[0, 1], [1, 0]], dtype=complex)
SZ = np.array([[1, 0], [0, -1]], dtype=complex)

# name: (alpha, zeta, cutoff, cutoff_type, temperature, energies, couplings)
INDEPENDENT_BOSON = {
    "IB-ohmic-T0": (0.2, 1.0, 4.0, "exponential", 0.0, (0.3, -0.3), (0.5, -0.5)),
    "IB-ohmic-T1": (0.5, 1.0, 4.0, "exponential", 1.0, (0.3, -0.3), (0.5, -0.5)),
    "IB-subohmic": (0.3, 0.5, 4.0, "exponential", 0.5, (0.3, -0.3), (0.5, -0.5)),
    "IB-superohmic": (0.5, 3.0, 3.0, "gaussian", 0.5, (0.3, -0.3), (0.5, -0.5)),
    "IB-3level": (0.1, 1.0, 4.0, "exponential", 0.0, (0.4, 0.0, -0.7), (1.0, 0.0, -0.5)),
}
SPIN_BOSON = ("SB-ohmic", "SB-drude")
#: reference parameters of the spin-boson models (dt, epsrel; full memory)
REFERENCE = {"SB-ohmic": (0.02, 1e-9), "SB-drude": (0.025, 1e-9)}
END_TIME = {"SB-drude": 5.0}


def _state(amplitudes):
    psi = np.asarray(amplitudes, dtype=complex)
    psi = psi / np.linalg.norm(psi)
    return np.outer(psi, psi.conj())


def _ib_exact(name, times):
    alpha, zeta, wc, kind, temperature, energies, couplings = INDEPENDENT_BOSON[name]
    shape = (lambda x: math.exp(-x)) if kind == "exponential" else (lambda x: math.exp(-x * x))

    def j(w):
        return 2.0 * alpha * w**zeta * wc ** (1.0 - zeta) * shape(w / wc)

    def coth(w):
        return 1.0 / math.tanh(w / (2.0 * temperature)) if temperature > 0 else 1.0

    upper = (60.0 if kind == "exponential" else 10.0) * wc
    e, s = np.asarray(energies), np.asarray(couplings)
    rho0 = _model(name)[2]
    states = []
    for t in times:
        kw = {"limit": 500, "epsabs": 1e-14, "epsrel": 1e-12}
        g = scipy.integrate.quad(
            lambda w: j(w) * coth(w) * 2 * math.sin(0.5 * w * t) ** 2 / w**2, 0, upper, **kw
        )[0]
        p = scipy.integrate.quad(
            lambda w: j(w) * ((w * t) ** 3 / 6 if w * t < 1e-3 else w * t - math.sin(w * t)) / w**2,
            0,
            upper,
            **kw,
        )[0]
        factor = np.exp(
            -1j * np.subtract.outer(e, e) * t
            - np.subtract.outer(s, s) ** 2 * g
            + 1j * np.subtract.outer(s**2, s**2) * p
        )
        states.append(rho0 * factor)
    return np.array(states)


def _model(name):
    """(system, bath, rho0, end_time)."""
    if name in INDEPENDENT_BOSON:
        alpha, zeta, wc, kind, temperature, energies, couplings = INDEPENDENT_BOSON[name]
        system = nm.System(np.diag(energies).astype(complex))
        bath = nm.Bath(
            np.diag(couplings).astype(complex),
            nm.PowerLawSD(alpha, zeta, wc, kind, temperature),
        )
        rho0 = (
            _state([1.0, 0.8 * np.exp(0.3j), 0.6 * np.exp(-1.1j)])
            if len(energies) == 3
            else _state([0.8, 0.6 * np.exp(0.4j)])
        )
        return system, bath, rho0, (2.0 if temperature == 0.0 else 5.0)
    if name == "SB-ohmic":
        system = nm.System(0.5 * SX + 0.2 * SZ)
        bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.3, 1.0, 5.0, temperature=0.5))
        return system, bath, _state([0.8, 0.6 * np.exp(0.4j)]), 3.0
    if name == "SB-drude":
        lam, gamma = 0.25, 1.0
        correlations = nm.CustomSD(
            lambda w: 2 * lam * gamma / np.pi * w / (gamma**2 + w**2),
            cutoff=50.0,
            cutoff_type="exponential",
            temperature=1.0,
        )
        system = nm.System(0.5 * SX + 0.3 * SZ)
        return system, nm.Bath(0.5 * SZ, correlations), _state([1.0, 0.0]), END_TIME[name]
    raise ValueError(f"unknown model {name!r}; known: {list(INDEPENDENT_BOSON) + list(SPIN_BOSON)}")


def _run(system, bath, rho0, end_time, parameters):
    start = time.perf_counter()
    dynamics = nm.tempo_compute(
        system, bath, rho0, 0.0, end_time, parameters, progress_type="silent"
    )
    return np.asarray(dynamics.times), np.asarray(dynamics.states), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(INDEPENDENT_BOSON) + list(SPIN_BOSON))
    parser.add_argument("--tolerances", nargs="+", type=float, default=[1e-2, 1e-3, 1e-4])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    explicit_models = args.models != parser.get_default("models")
    warnings.simplefilter("ignore", UserWarning)
    rows = []
    header = (
        f"{'model':14} {'tol':>7} {'dt':>8} {'dkmax':>6} {'steps':>6} {'epsrel':>9} "
        f"{'guess s':>8} {'run s':>7} {'error':>9} {'err/tol':>8}  ok"
    )
    print(header)
    print("-" * len(header))
    references = {}
    for name in args.models:
        system, bath, rho0, end_time = _model(name)
        for tolerance in args.tolerances:
            if name in SPIN_BOSON and tolerance < 1e-3 and not explicit_models:
                continue
            start = time.perf_counter()
            parameters = nm.guess_tempo_parameters(bath, 0.0, end_time, system, tolerance)
            guess_s = time.perf_counter() - start
            times, states, run_s = _run(system, bath, rho0, end_time, parameters)
            if name in INDEPENDENT_BOSON:
                exact = _ib_exact(name, times)
            else:
                if name not in references:
                    dt, epsrel = REFERENCE[name]
                    ref = nm.TempoParameters(dt=dt, epsrel=epsrel)
                    ref_times, ref_states, _ = _run(system, bath, rho0, end_time, ref)
                    references[name] = scipy.interpolate.CubicSpline(ref_times, ref_states, axis=0)
                exact = references[name](times)
            error = float(np.max(np.abs(states - exact)))
            steps = len(times) - 1
            row = {
                "model": name,
                "tolerance": tolerance,
                "dt": parameters.dt,
                "dkmax": parameters.dkmax,
                "steps": steps,
                "epsrel": parameters.epsrel,
                "guess_s": guess_s,
                "run_s": run_s,
                "error": error,
            }
            rows.append(row)
            print(
                f"{name:14} {tolerance:7.0e} {parameters.dt:8.4f} {parameters.dkmax:6d} "
                f"{steps:6d} {parameters.epsrel:9.2e} {guess_s:8.2f} {run_s:7.2f} "
                f"{error:9.2e} {error / tolerance:8.3f}  {'yes' if error <= tolerance else 'NO'}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"backend": nm.backends.get_backend(), "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
