"""Optimal control of a spin in an Ohmic bath: flip it with a pulse found by L-BFGS-B.

H(t) = (h_x(t) sigma_x + h_z(t) sigma_z) / 2 + (sigma_z / 2) sum_k g_k (b_k + b_k^dag) + H_B,
Ohmic bath J(w) = 2 alpha w exp(-w / wc) (alpha = 0.1, wc = 5, T = 0.5). The spin
starts up and should end down at T_end = 2.5: a plain pi pulse about x passes
through the equator, where the sigma_z coupling dephases it. The controls are
piecewise constant over the 50 steps of dt = 0.05 (bounds |h_x| <= 5 pi,
|h_z| <= pi), the objective the fidelity F = <down| rho(T_end) |down>, and its
gradient with respect to all 100 controls comes from one adjoint pass
(``nonmarkov.state_gradient``) through the process tensor, built once.

Writes

- ``results/optimal_control.npz``: times, the optimal h_x and h_z per step, the
  fidelity per iteration, the Bloch vector under the optimal pulse,
- ``results/optimal_control.png``: fidelity against iteration, the optimal pulse,
  and the Bloch vector under it.

    python examples/optimal_control.py [--output results] [--progress bar|silent]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from scipy.optimize import minimize

import nonmarkov as nm

END_TIME = 2.5
NUM_STEPS = 50


def optimise(progress: str) -> dict:
    op = nm.operators
    dt = END_TIME / NUM_STEPS
    bath = nm.Bath(0.5 * op.sigma("z"), nm.PowerLawSD(0.1, 1, 5.0, temperature=0.5))
    pt = nm.pt_tempo_compute(
        bath,
        0.0,
        END_TIME,
        nm.TempoParameters(dt=dt, tcut=1.5, epsrel=1e-7),
        progress_type=progress,
    )
    sx, sz = op.sigma("x"), op.sigma("z")
    system = nm.ParameterizedSystem(lambda h_x, h_z: 0.5 * (h_x * sx + h_z * sz))
    initial_state, target = op.spin_dm("up"), op.spin_dm("down")
    history: list[float] = []

    def infidelity_and_gradient(controls: np.ndarray) -> tuple[float, np.ndarray]:
        halves = np.repeat(controls.reshape(NUM_STEPS, 2), 2, axis=0)  # one value per step
        result = nm.state_gradient(
            system, initial_state, target.T, [pt], halves, progress_type="silent"
        )
        fidelity = float(np.sum(target.T * result["final_state"]).real)
        per_step = result["gradient"][0::2] + result["gradient"][1::2]
        history.append(fidelity)
        return 1.0 - fidelity, -per_step.real.reshape(-1)

    pi_pulse = np.tile([np.pi / END_TIME, 0.0], NUM_STEPS)  # rotates up to down without bath
    bounds = [(-5 * np.pi, 5 * np.pi), (-np.pi, np.pi)] * NUM_STEPS
    result = minimize(
        infidelity_and_gradient,
        pi_pulse,
        method="L-BFGS-B",
        jac=True,
        bounds=bounds,
        options={"gtol": 1e-7, "maxiter": 200},
    )
    controls = result.x.reshape(NUM_STEPS, 2)
    final = nm.state_gradient(
        system,
        initial_state,
        target.T,
        [pt],
        np.repeat(controls, 2, axis=0),
        progress_type="silent",
    )
    times, bloch = (
        final["dynamics"].times,
        [final["dynamics"].expectations(op.sigma(axis), real=True)[1] for axis in "xyz"],
    )
    return {
        "times": np.asarray(times),
        "step_times": np.arange(NUM_STEPS) * dt,
        "h_x": controls[:, 0],
        "h_z": controls[:, 1],
        "fidelity_history": np.asarray(history),
        "pi_pulse_fidelity": history[0],
        "fidelity": history[-1] if result.success else float(1.0 - result.fun),
        "bloch": np.asarray(bloch),
        "iterations": result.nit,
    }


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4))
    left.plot(results["fidelity_history"], marker=".")
    left.set_xlabel("evaluation")
    left.set_ylabel("fidelity")
    left.set_title(
        f"from {results['pi_pulse_fidelity']:.4f} (pi pulse) to {results['fidelity']:.4f}"
    )
    middle.step(results["step_times"], results["h_x"], where="post", label="$h_x$")
    middle.step(results["step_times"], results["h_z"], where="post", label="$h_z$")
    middle.set_xlabel("t")
    middle.set_ylabel("control")
    middle.legend()
    for label, values in zip("xyz", results["bloch"]):
        right.plot(results["times"], values, label=rf"$\langle\sigma_{label}\rangle$")
    right.plot(
        results["times"], np.linalg.norm(results["bloch"], axis=0), "k--", label="|Bloch vector|"
    )
    right.set_xlabel("t")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="results")
    parser.add_argument("--progress", default="bar", choices=["bar", "simple", "silent"])
    args = parser.parse_args(argv)
    results = optimise(args.progress)
    os.makedirs(args.output, exist_ok=True)
    data = os.path.join(args.output, "optimal_control.npz")
    np.savez(data, **{k: v for k, v in results.items() if not isinstance(v, str)})
    figure = os.path.join(args.output, "optimal_control.png")
    plot(results, figure)
    print(
        f"fidelity: pi pulse {results['pi_pulse_fidelity']:.5f}, optimal "
        f"{results['fidelity']:.5f} after {results['iterations']} iterations"
    )
    print(f"wrote {data} and {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
