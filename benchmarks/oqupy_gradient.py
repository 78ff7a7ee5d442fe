"""OQuPy's fidelity-gradient problem, written once against OQuPy 0.5's public API.

The problem of OQuPy's ``examples/fidelity-gradient.py`` (arXiv:2303.16002): a
spin driven by H = (h_x sigma_x + h_y sigma_y + h_z sigma_z) / 2, parameters per
half step, coupled by sigma_z / 2 to ``PowerLawSD(alpha=0.126, zeta=3,
cutoff=3.04, 'gaussian', temperature=0.6545)``; PT-TEMPO with dt = 0.05, 50
steps, dkmax 60, epsrel 1e-7; from |x-> towards |x+>. Run by either library
(``--library oqupy`` with the python of the OQuPy venv, ``--library nonmarkov``),
so both codes solve exactly the same problem; ``bench_gradient.py`` runs them
side by side.

Phases, each timed: ``pt`` (the process tensor; or ``--pt-file``: read one, e.g.
OQuPy's, so that both codes differentiate the same process tensor),
``gradient`` (``state_gradient`` at the example's initial guess and at
``--points`` perturbed points, each ``--repeat`` times, the best kept), and with
``--maxiter`` the example's L-BFGS-B optimisation (``gtol`` 7e-5, bounds as the
example) with its iterations, fidelity and time. The JSON record holds the
gradients (real parts) for comparison.

    python oqupy_gradient.py --library nonmarkov --json out.json [--pt-file F]
        [--export-pt F] [--points 2] [--repeat 3] [--maxiter 200]
"""

from __future__ import annotations

import argparse
import importlib
import json
import time

import numpy as np
from scipy.optimize import minimize

END_TIME = 2.5
NUM_STEPS = 50


def initial_guess() -> np.ndarray:
    """(2N, 3): h_x = h_y = 0, h_z = pi / T on every half step (the example's)."""
    n = 2 * NUM_STEPS
    return np.vstack((np.zeros(n), np.zeros(n), np.ones(n) * np.pi / END_TIME)).T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=["oqupy", "nonmarkov"], required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--pt-file", default=None, help="read the process tensor from here")
    parser.add_argument("--export-pt", default=None, help="write the process tensor here")
    parser.add_argument("--points", type=int, default=2, help="perturbed points (seeded)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--maxiter", type=int, default=0, help="0: no optimisation")
    args = parser.parse_args()
    oqupy = importlib.import_module(args.library)
    op = oqupy.operators
    dt = END_TIME / NUM_STEPS
    times: dict[str, float] = {}

    started = time.perf_counter()
    if args.pt_file:
        pt = oqupy.import_process_tensor(args.pt_file)
    else:
        correlations = oqupy.PowerLawSD(
            alpha=0.126, zeta=3, cutoff=3.04, cutoff_type="gaussian", temperature=5 * 0.1309
        )
        bath = oqupy.Bath(0.5 * op.sigma("z"), correlations)
        parameters = oqupy.TempoParameters(dt=dt, epsrel=1e-7, dkmax=60)
        pt = oqupy.pt_tempo_compute(
            bath=bath,
            start_time=0.0,
            end_time=END_TIME,
            parameters=parameters,
            progress_type="silent",
        )
    times["pt"] = time.perf_counter() - started
    if args.export_pt:
        pt.export(args.export_pt, overwrite=True)

    def hamiltonian(x, y, z):  # as the example writes it
        h = np.zeros((2, 2), dtype="complex128")
        for var, var_name in zip([x, y, z], ["x", "y", "z"]):
            h += 0.5 * var * op.sigma(var_name)
        return h

    system = oqupy.ParameterizedSystem(hamiltonian)
    initial_state = op.spin_dm("x-")
    target = op.spin_dm("x+").T

    def gradient(parameters: np.ndarray) -> dict:
        return oqupy.state_gradient(
            system=system,
            initial_state=initial_state,
            target_derivative=target,
            process_tensors=[pt],
            parameters=parameters,
            progress_type="silent",
        )

    rng = np.random.default_rng(3)
    points = [initial_guess()] + [
        initial_guess() + 0.3 * rng.normal(size=initial_guess().shape) for _ in range(args.points)
    ]
    gradients, fidelities, gradient_seconds = [], [], []
    for point in points:
        best = np.inf
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = gradient(point)
            best = min(best, time.perf_counter() - started)
        gradient_seconds.append(best)
        gradients.append(np.asarray(result["gradient"]).real.tolist())
        fidelities.append(float(np.sum(result["final_state"] * target.T).real))

    record = {
        "library": args.library,
        "version": getattr(oqupy, "__version__", "?"),
        "bond": int(max(pt.get_bond_dimensions())),
        "times": times,
        "gradient_seconds": gradient_seconds,
        "gradients": gradients,
        "fidelities": fidelities,
    }

    if args.maxiter:
        num_params = 3

        def infidelity_and_gradient(flat: np.ndarray):
            halves = np.repeat(flat.reshape(-1, num_params), 2, axis=0)
            result = gradient(halves)
            fidelity = np.sum(result["final_state"] * target.T).real
            per_step = result["gradient"][0::2] + result["gradient"][1::2]
            return 1 - fidelity, (-per_step.reshape(-1).real).tolist()

        bounds = [(-5 * np.pi, 5 * np.pi), (0, 0), (-np.pi, np.pi)] * NUM_STEPS
        start = initial_guess()[0::2].reshape(-1)
        started = time.perf_counter()
        optimum = minimize(
            infidelity_and_gradient,
            start,
            method="L-BFGS-B",
            jac=True,
            bounds=bounds,
            options={"gtol": 7e-5, "maxiter": args.maxiter},
        )
        record["optimisation"] = {
            "seconds": time.perf_counter() - started,
            "iterations": int(optimum.nit),
            "evaluations": int(optimum.nfev),
            "fidelity": float(1 - optimum.fun),
            "converged": bool(optimum.success),
        }
    with open(args.json, "w") as stream:
        json.dump(record, stream)


if __name__ == "__main__":
    main()
