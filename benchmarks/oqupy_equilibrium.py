"""Gibbs TEMPO and bath dynamics, written once against OQuPy 0.5's public API.

Two problems, run by either library (``--library oqupy`` with the python of the
OQuPy venv made by ``setup_oqupy_env.sh``, ``--library nonmarkov`` with the
nonmarkov venv's python), so both codes solve exactly the same problem;
``bench_equilibrium.py`` runs them side by side.

- ``gibbs``: the mean-force Gibbs state of H_S = 0.5 sigma_x + 0.2 sigma_z with
  coupling sigma_z / 2 to ``PowerLawSD(alpha=0.2, zeta=1, cutoff=5,
  'exponential', temperature=0.5)`` (OQuPy's Gibbs TEMPO needs a diagonal
  coupling), ``GibbsTempo(...).compute()`` at ``--n-steps`` and ``--epsrel``.
- ``bath``: the OQuPy paper's bath-dynamics set (OQuPy's
  ``tests/performance/bath_dynamics.py``): H_S = 0.5 Omega sigma_x + 0.5 epsilon
  sigma_z (Omega = 1, epsilon = 2), spin down, coupling sigma_z / 2 to
  ``PowerLawSD(alpha=0.05, zeta=1, cutoff=10, 'exponential', temperature=1)``,
  PT-TEMPO with dt = 1/8, tcut = 1, epsrel = 2^-15, 256 steps; then
  ``TwoTimeBathCorrelations``: the system correlations, and the energy
  w * occupation change of the modes w = 1.00, 1.05, ..., 2.95 (band 0.1).
  Phases timed separately: ``pt``, ``system_correlations``, ``occupations``.

    python oqupy_equilibrium.py --library nonmarkov --problem gibbs --n-steps 40 \
        --epsrel 1e-10 --json out.json
    python oqupy_equilibrium.py --library oqupy --problem bath --json out.json
        [--dt 0.125] [--steps 256] [--epsrel 3.0517578125e-05]

The JSON record holds the library and its version, the parameters, the wall
time of each phase and the results (Gibbs: the state, real and imaginary parts;
bath: the times and the energies, one row per frequency).
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import time

import numpy as np

FREQUENCIES = np.arange(1.0, 3.0, 0.05)
BAND = 0.1


def gibbs(lib, n_steps: int, epsrel: float, cutoff_type: str) -> dict:
    system = lib.System(0.5 * lib.operators.sigma("x") + 0.2 * lib.operators.sigma("z"))
    correlations = lib.PowerLawSD(0.2, 1.0, 5.0, cutoff_type, temperature=0.5)
    bath = lib.Bath(0.5 * lib.operators.sigma("z"), correlations)
    start = time.perf_counter()
    tempo = lib.GibbsTempo(system, bath, lib.GibbsParameters(n_steps, epsrel))
    tempo.compute(progress_type="silent")
    state = np.asarray(tempo.get_state())
    return {
        "times": {"gibbs": time.perf_counter() - start},
        "state_real": state.real.tolist(),
        "state_imag": state.imag.tolist(),
    }


def bath_dynamics(lib, dt: float, steps: int, epsrel: float) -> dict:
    sigma = lib.operators.sigma
    system = lib.System(0.5 * 1.0 * sigma("x") + 0.5 * 2.0 * sigma("z"))
    correlations = lib.PowerLawSD(0.05, 1.0, 10.0, "exponential", temperature=1.0)
    bath = lib.Bath(0.5 * sigma("z"), correlations)
    initial_state = lib.operators.spin_dm("down")
    times = {}
    start = time.perf_counter()
    parameters = lib.TempoParameters(dt=dt, tcut=1.0, epsrel=epsrel)
    pt = lib.pt_tempo_compute(bath, 0.0, dt * steps, parameters, progress_type="silent")
    times["pt"] = time.perf_counter() - start
    start = time.perf_counter()
    correlations_of_bath = lib.bath_dynamics.TwoTimeBathCorrelations(
        system, bath, pt, initial_state
    )
    correlations_of_bath.generate_system_correlations(dt * steps, progress_type="silent")
    times["system_correlations"] = time.perf_counter() - start
    start = time.perf_counter()
    energies = []
    for w in FREQUENCIES:
        grid, occupation = correlations_of_bath.occupation(w, BAND, change_only=True)
        energies.append((w * np.asarray(occupation).real).tolist())
    times["occupations"] = time.perf_counter() - start
    return {
        "times": times,
        "bond": int(max(pt.get_bond_dimensions())),
        "grid": np.asarray(grid).tolist(),
        "frequencies": FREQUENCIES.tolist(),
        "energies": energies,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=["oqupy", "nonmarkov"], required=True)
    parser.add_argument("--problem", choices=["gibbs", "bath"], required=True)
    parser.add_argument("--n-steps", type=int, default=40)
    parser.add_argument("--cutoff-type", default="exponential", help="gibbs: the bath's cutoff")
    parser.add_argument("--epsrel", type=float, default=None)
    parser.add_argument("--dt", type=float, default=0.125)
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--json", required=True)
    arguments = parser.parse_args()
    lib = importlib.import_module(arguments.library)
    if arguments.problem == "gibbs":
        epsrel = 1e-10 if arguments.epsrel is None else arguments.epsrel
        record = gibbs(lib, arguments.n_steps, epsrel, arguments.cutoff_type)
        record["parameters"] = {
            "n_steps": arguments.n_steps,
            "epsrel": epsrel,
            "cutoff_type": arguments.cutoff_type,
        }
    else:
        epsrel = 2.0**-15 if arguments.epsrel is None else arguments.epsrel
        record = bath_dynamics(lib, arguments.dt, arguments.steps, epsrel)
        record["parameters"] = {"dt": arguments.dt, "steps": arguments.steps, "epsrel": epsrel}
    record.update(
        library=arguments.library,
        version=getattr(lib, "__version__", "?"),
        problem=arguments.problem,
        python=platform.python_version(),
    )
    with open(arguments.json, "w") as handle:
        json.dump(record, handle)


if __name__ == "__main__":
    main()
