"""Large-bond PT-TEMPO problems, written once against OQuPy 0.5's public API.

Each problem builds a process tensor with ``pt_tempo_compute`` and then runs
``compute_dynamics`` with it; both phases are timed. The same script runs
with real OQuPy (``--library oqupy``, the python of the OQuPy venv made by
``setup_oqupy_env.sh``) and with nonmarkov (``--library nonmarkov``), so both
codes solve exactly the same problem. ``bench_large_bonds.py`` runs it both
ways side by side.

Problems (hbar = 1; Ohmic PowerLawSD(alpha, zeta=1, wc, 'exponential', T)):

- ``S1``: spin 1, H_S = S_x, coupling S_z, alpha = 0.1, wc = 4, T = 0,
  dt = 0.1, tcut = 1.5, t = 3, initial |+1><+1|.
- ``HB``: spin 1/2 biased and hot, H_S = 0.5 sigma_x + 0.5 sigma_z,
  coupling sigma_z / 2, alpha = 0.2, wc = 5, T = 1, dt = 0.05, tcut = 1.5,
  t = 3; observable <sigma_z>, <sigma_x>.
- ``SB``: spin-boson at strong coupling, H_S = 0.5 sigma_x, coupling
  sigma_z / 2, alpha = 0.6, wc = 5, T = 0, dt = 0.05, tcut = 2.0, t = 3;
  observable <sigma_z>.
- ``L3``: three levels (a V system), H_S = diag(0, 1, 1.2) + 0.5 (|0><1| +
  |0><2| + h.c.), coupling diag(0, 1, -1), alpha = 0.1, wc = 3, T = 0.5,
  dt = 0.1, tcut = 2.0, t = 4, initial |0><0|; observables the populations.

    python oqupy_large_bonds.py --library oqupy --problem S1 --json out.json
        [--epsrel 1e-6] [--dt DT] [--tcut TCUT] [--end T] [--profile out.prof]
        [--window-sweep zip_up|exact]   (nonmarkov only)

The JSON record holds the library and its version, the parameters, the wall
time of each phase (``pt_build``, ``dynamics``), the largest bond dimension
of the process tensor where the public API gives it, the times and the
states (real and imaginary parts, flattened).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import os
import platform
import time

import numpy as np

PROBLEMS = {
    "S1": dict(alpha=0.1, cutoff=4.0, temperature=0.0, dt=0.1, tcut=1.5, end=3.0, epsrel=1e-6),
    "HB": dict(alpha=0.2, cutoff=5.0, temperature=1.0, dt=0.05, tcut=1.5, end=3.0, epsrel=1e-6),
    "SB": dict(alpha=0.6, cutoff=5.0, temperature=0.0, dt=0.05, tcut=2.0, end=3.0, epsrel=1e-6),
    "L3": dict(alpha=0.1, cutoff=3.0, temperature=0.5, dt=0.1, tcut=2.0, end=4.0, epsrel=1e-6),
}


def _spin_one():
    """S_x, S_z of spin 1 (3 x 3)."""
    sx = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=complex) / np.sqrt(2.0)
    sz = np.diag([1.0, 0.0, -1.0]).astype(complex)
    return sx, sz


def build_problem(lib, name: str):
    """(system, coupling operator, initial state) of problem ``name`` for ``lib``."""
    sigma = lib.operators.sigma
    if name == "S1":
        sx, sz = _spin_one()
        return lib.System(sx), sz, np.diag([1.0, 0.0, 0.0]).astype(complex)
    if name == "HB":
        return (
            lib.System(0.5 * sigma("x") + 0.5 * sigma("z")),
            0.5 * sigma("z"),
            lib.operators.spin_dm("up"),
        )
    if name == "SB":
        return lib.System(0.5 * sigma("x")), 0.5 * sigma("z"), lib.operators.spin_dm("up")
    if name == "L3":
        hamiltonian = np.diag([0.0, 1.0, 1.2]).astype(complex)
        hamiltonian[0, 1:] = hamiltonian[1:, 0] = 0.5
        coupling = np.diag([0.0, 1.0, -1.0]).astype(complex)
        return lib.System(hamiltonian), coupling, np.diag([1.0, 0.0, 0.0]).astype(complex)
    raise ValueError(f"unknown problem {name!r}; valid: {sorted(PROBLEMS)}")


def run(args: argparse.Namespace) -> dict:
    """Solve the problem with ``args.library``; return the JSON record."""
    lib = importlib.import_module(args.library)
    if args.window_sweep is not None:  # nonmarkov only
        lib.set_default_options(window_sweep=args.window_sweep)
    spec = dict(PROBLEMS[args.problem])
    for key in ("epsrel", "dt", "tcut", "end"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    system, coupling, state = build_problem(lib, args.problem)
    correlations = lib.PowerLawSD(
        alpha=spec["alpha"],
        zeta=1.0,
        cutoff=spec["cutoff"],
        cutoff_type="exponential",
        temperature=spec["temperature"],
    )
    bath = lib.Bath(coupling, correlations)
    parameters = lib.TempoParameters(dt=spec["dt"], tcut=spec["tcut"], epsrel=spec["epsrel"])
    profile = cProfile.Profile() if args.profile else None
    wall: dict[str, float] = {}
    if profile:
        profile.enable()
    start = time.perf_counter()
    process_tensor = lib.pt_tempo_compute(
        bath=bath,
        start_time=0.0,
        end_time=spec["end"],
        parameters=parameters,
        progress_type="silent",
    )
    wall["pt_build"] = time.perf_counter() - start
    start = time.perf_counter()
    dynamics = lib.compute_dynamics(
        system=system, initial_state=state, process_tensor=process_tensor, progress_type="silent"
    )
    wall["dynamics"] = time.perf_counter() - start
    if profile:
        profile.disable()
        profile.dump_stats(args.profile)
    bonds = None
    if hasattr(process_tensor, "get_bond_dimensions"):
        bonds = [int(b) for b in process_tensor.get_bond_dimensions()]
    states = np.asarray(dynamics.states)
    return {
        "library": args.library,
        "version": getattr(lib, "__version__", None),
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "problem": args.problem,
        "parameters": spec,
        "window_sweep": args.window_sweep,
        "thread_env": {
            key: os.environ.get(key)
            for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NONMARKOV_BLAS_THREADS")
        },
        "load_average_before": list(os.getloadavg()),
        "wall_time_s": wall,
        "max_bond_dimension": None if bonds is None else max(bonds),
        "times": [float(t) for t in dynamics.times],
        "states_real": states.real.ravel().tolist(),
        "states_imag": states.imag.ravel().tolist(),
        "dimension": int(states.shape[-1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=["oqupy", "nonmarkov"], required=True)
    parser.add_argument("--problem", choices=sorted(PROBLEMS), required=True)
    parser.add_argument("--epsrel", type=float, default=None)
    parser.add_argument("--dt", type=float, default=None)
    parser.add_argument("--tcut", type=float, default=None)
    parser.add_argument("--end", type=float, default=None)
    parser.add_argument(
        "--window-sweep",
        default=None,
        choices=["zip_up", "exact"],
        help="nonmarkov's EngineOptions.window_sweep (default: the library default)",
    )
    parser.add_argument("--profile", default=None, help="write a cProfile of both phases here")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    record = run(args)
    with open(args.json, "w") as handle:
        json.dump(record, handle)
    print(
        f"{args.library:9s} {args.problem}: pt {record['wall_time_s']['pt_build']:.2f} s, "
        f"dynamics {record['wall_time_s']['dynamics']:.2f} s, bond {record['max_bond_dimension']}"
    )


if __name__ == "__main__":
    main()
