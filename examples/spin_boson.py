"""Driven spin-boson model: TEMPO and a process tensor, for several couplings.

H = (Omega / 2) sigma_x + (sigma_z / 2) sum_k (g_k b_k + g_k^* b_k^dag) + H_B,
Ohmic bath J(w) = 2 alpha w exp(-w / wc) at temperature T, spin initially up.

For each coupling alpha the script computes <sigma_z>(t) with TEMPO and,
independently, with PT-TEMPO followed by ``compute_dynamics``, checks that the
two agree, and writes

- ``results/spin_boson_py_alpha_<alpha>.h5``: the TEMPO dynamics of each
  coupling (load with ``nonmarkov.import_dynamics``),
- ``results/spin_boson_py.npz``: times and <sigma_z> of both methods, all alphas,
- ``results/spin_boson_py.png``: the plot.

(``_py``: the same model run from its spec, ``nonmarkov run
examples/spin_boson.toml``, writes ``results/spin_boson_<k>.h5`` and
``results/spin_boson.png``; neither replaces the other's files.)

    python examples/spin_boson.py [--alphas 0.05 0.1 0.2] [--end-time 6]
                                  [--output results] [--progress bar|silent]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import nonmarkov as nm

#: the base of the output names (not the spec's ``spin_boson``: see above)
STEM = "spin_boson_py"


def simulate(alpha: float, end_time: float, progress: str) -> dict:
    """<sigma_z>(t) of the driven spin-boson model by TEMPO and by PT-TEMPO."""
    correlations = nm.PowerLawSD(
        alpha=alpha, zeta=1, cutoff=5.0, cutoff_type="exponential", temperature=0.2
    )
    bath = nm.Bath(0.5 * nm.operators.sigma("z"), correlations, name=f"alpha={alpha}")
    system = nm.System(0.5 * nm.operators.sigma("x"), name="driven spin")
    initial_state = nm.operators.spin_dm("up")
    parameters = nm.TempoParameters(dt=0.1, tcut=2.0, epsrel=1e-6)

    tempo = nm.Tempo(
        system, bath, parameters, initial_state, start_time=0.0, name=f"TEMPO alpha={alpha}"
    )
    dynamics = tempo.compute(end_time, progress_type=progress)
    process_tensor = nm.pt_tempo_compute(bath, 0.0, end_time, parameters, progress_type=progress)
    from_pt = nm.compute_dynamics(
        system, initial_state, process_tensor=process_tensor, progress_type=progress
    )
    sigma_z = nm.operators.sigma("z")
    times, z_tempo = dynamics.expectations(sigma_z, real=True)
    _, z_pt = from_pt.expectations(sigma_z, real=True)
    return {"dynamics": dynamics, "times": times, "tempo": z_tempo, "pt": z_pt}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    parser.add_argument("--end-time", type=float, default=6.0)
    parser.add_argument("--output", default="results")
    parser.add_argument("--progress", default="bar", choices=["bar", "simple", "silent"])
    args = parser.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    print(f"nonmarkov {nm.__version__}, backend {nm.backends.get_backend()}")

    results = {}
    for alpha in args.alphas:
        print(f"alpha = {alpha}")
        result = simulate(alpha, args.end_time, args.progress)
        deviation = float(np.max(np.abs(result["tempo"] - result["pt"])))
        print(f"  max |<sigma_z>_TEMPO - <sigma_z>_PT| = {deviation:.2e}")
        result["dynamics"].export(
            os.path.join(args.output, f"{STEM}_alpha_{alpha}.h5"), overwrite=True
        )
        results[alpha] = result

    arrays = {"alphas": np.array(args.alphas), "times": results[args.alphas[0]]["times"]}
    for alpha, result in results.items():
        arrays[f"sigma_z_tempo_{alpha}"] = result["tempo"]
        arrays[f"sigma_z_pt_{alpha}"] = result["pt"]
    data_file = os.path.join(args.output, f"{STEM}.npz")
    np.savez(data_file, **arrays)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for alpha, result in results.items():
        (line,) = axes.plot(result["times"], result["tempo"], label=f"TEMPO, alpha={alpha}")
        axes.plot(
            result["times"],
            result["pt"],
            "o",
            markersize=3,
            color=line.get_color(),
            markevery=3,
            label=f"process tensor, alpha={alpha}",
        )
    axes.set_xlabel("time t")
    axes.set_ylabel(r"$\langle\sigma_z\rangle(t)$")
    axes.set_title("Driven spin-boson model (Ohmic, wc = 5, T = 0.2)")
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    plot_file = os.path.join(args.output, f"{STEM}.png")
    figure.savefig(plot_file, dpi=120)
    print(f"wrote {data_file}, {plot_file} and one .h5 dynamics file per alpha")
    return 0


if __name__ == "__main__":
    sys.exit(main())
