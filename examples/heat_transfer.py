"""Heat flow into the bath of a biased spin-boson model, and the equilibrium it heads for.

H = (Omega / 2) sigma_x + (epsilon / 2) sigma_z + (sigma_z / 2) sum_k g_k (b_k + b_k^dag) + H_B,
Ohmic bath J(w) = 2 alpha w exp(-w / wc) at temperature T, spin initially down
(the OQuPy paper's set: Omega = 1, epsilon = 2, alpha = 0.05, wc = 10, T = 1).

From one process tensor the script computes the spin's energy <H_S>(t) and, with
``TwoTimeBathCorrelations``, the energy that each band of bath modes has taken up,
w Delta n(w, t) (bands of width dw); their sum over the bands is the heat Q(t) that
has flowed into the bath. The energy left over, -(Delta <H_S> + Q), is the
interaction energy <H_I>(t). The spin relaxes towards the mean-force Gibbs state,
computed independently by Gibbs TEMPO in imaginary time: its energy is the dashed
line. Writes

- ``results/heat_transfer.npz``: times, <H_S>, Q, the frequencies, w Delta n(w, t),
  and the Gibbs state,
- ``results/heat_transfer.png``: Q(t) and <H_S>(t) against time, and the heat per
  band at the final time against frequency.

    python examples/heat_transfer.py [--end-time 16] [--output results]
                                     [--progress bar|silent]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import nonmarkov as nm


def simulate(end_time: float, progress: str) -> dict:
    sigma = nm.operators.sigma
    hamiltonian = 0.5 * 1.0 * sigma("x") + 0.5 * 2.0 * sigma("z")
    system = nm.System(hamiltonian)
    correlations = nm.PowerLawSD(0.05, 1.0, 10.0, "exponential", temperature=1.0)
    bath = nm.Bath(0.5 * sigma("z"), correlations)
    initial_state = nm.operators.spin_dm("down")
    parameters = nm.TempoParameters(dt=0.0625, tcut=1.0, epsrel=1e-7)
    pt = nm.pt_tempo_compute(bath, 0.0, end_time, parameters, progress_type=progress)
    dynamics = nm.compute_dynamics(
        system, initial_state=initial_state, process_tensor=pt, progress_type=progress
    )
    times, system_energy = dynamics.expectations(hamiltonian, real=True)
    bath_correlations = nm.TwoTimeBathCorrelations(system, bath, pt, initial_state)
    bath_correlations.generate_system_correlations(end_time, progress_type=progress)
    frequencies, dw = np.linspace(0.025, 60.0, 2400, retstep=True)
    band_energy = np.array(
        [w * bath_correlations.occupation(w, dw, change_only=True)[1] for w in frequencies]
    )
    gibbs = nm.gibbs_tempo_compute(
        system, bath, nm.GibbsParameters(40, 1e-11), progress_type=progress
    )
    return {
        "times": times,
        "system_energy": system_energy,
        "heat": band_energy.sum(axis=0),
        "frequencies": frequencies,
        "band_energy": band_energy,
        "gibbs_state": gibbs,
        "gibbs_energy": float(np.trace(hamiltonian @ gibbs).real),
    }


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    times = result["times"]
    left.plot(times, result["system_energy"], label=r"$\langle H_S \rangle$")
    left.plot(times, result["heat"], label=r"$Q$ (into the bath)")
    interaction = -(result["system_energy"] - result["system_energy"][0] + result["heat"])
    left.plot(times, interaction, label=r"$\langle H_I \rangle$ (the rest)")
    left.axhline(result["gibbs_energy"], color="k", ls="--", lw=0.8, label="mean-force Gibbs")
    left.set_xlabel(r"$\Omega t$")
    left.set_ylabel(r"energy / $\Omega$")
    left.legend()
    sel = result["frequencies"] < 12.0
    right.plot(
        result["frequencies"][sel],
        result["band_energy"][sel, -1] / np.diff(result["frequencies"])[0],
    )
    right.set_xlabel(r"mode frequency $\omega / \Omega$")
    right.set_ylabel(rf"heat per unit frequency at $t = {times[-1]:g}$")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--end-time", type=float, default=16.0)
    parser.add_argument("--output", default="results")
    parser.add_argument("--progress", default="bar", choices=["bar", "simple", "silent"])
    args = parser.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    result = simulate(args.end_time, args.progress)
    data_file = os.path.join(args.output, "heat_transfer.npz")
    np.savez(data_file, **result)
    plot_file = os.path.join(args.output, "heat_transfer.png")
    plot(result, plot_file)
    final = result["system_energy"][-1]
    print(
        f"<H_S>: {result['system_energy'][0]:.4f} -> {final:.4f} (mean-force Gibbs "
        f"{result['gibbs_energy']:.4f}); heat into the bath Q = {result['heat'][-1]:.4f}"
    )
    print(f"wrote {data_file} and {plot_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
