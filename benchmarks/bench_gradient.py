"""Gradients on OQuPy's fidelity-gradient problem, side by side with OQuPy 0.5.

Runs ``oqupy_gradient.py`` (the same problem code for both libraries) in one
process per library, one BLAS thread each:

1. OQuPy: its process tensor (written to a file), ``state_gradient`` at the
   example's initial guess and at perturbed points, and the example's L-BFGS-B
   optimisation (``--maxiter``);
2. nonmarkov on OQuPy's process tensor (read from that file): the same
   gradients, so the two codes' gradient values are compared on one process
   tensor, and the time of a gradient evaluation;
3. nonmarkov on its own process tensor (same parameters), with its optimisation;
4. a converged reference: nonmarkov at epsrel 1e-10 (exact window sweep), for
   the error of each code's final state and gradient against it;
5. on JAX (``--jax``): ``jax.grad`` through ``differentiable_dynamics`` against the
   adjoint on the same process tensor, and the time of each.

    python benchmarks/bench_gradient.py [--maxiter 200] [--json out.json] [--no-oqupy]
        [--jax]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from _common import oqupy_python, thread_env

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oqupy_gradient.py")


def run(python: str, library: str, env: dict, workdir: str, name: str, *extra: str) -> dict:
    out = os.path.join(workdir, f"{name}.json")
    command = [python, HELPER, "--library", library, "--json", out, *extra]
    subprocess.run(command, env=env, check=True)
    with open(out) as stream:
        return json.load(stream)


def reference(pt_points: int) -> dict:
    """Final states and gradients of nonmarkov at epsrel 1e-10 (exact sweep)."""
    sys.path.insert(0, os.path.dirname(HELPER))
    import nonmarkov as nm
    from oqupy_gradient import END_TIME, NUM_STEPS, initial_guess

    op = nm.operators
    correlations = nm.PowerLawSD(0.126, 3, 3.04, "gaussian", 5 * 0.1309)
    bath = nm.Bath(0.5 * op.sigma("z"), correlations)
    parameters = nm.TempoParameters(dt=END_TIME / NUM_STEPS, epsrel=1e-10, dkmax=60)
    pt = nm.pt_tempo_compute(
        bath,
        0.0,
        END_TIME,
        parameters,
        progress_type="silent",
        options=nm.EngineOptions(window_sweep="exact"),
    )
    sx, sy, sz = op.sigma("x"), op.sigma("y"), op.sigma("z")
    system = nm.ParameterizedSystem(lambda x, y, z: 0.5 * (x * sx + y * sy + z * sz))
    rng = np.random.default_rng(3)
    points = [initial_guess()] + [
        initial_guess() + 0.3 * rng.normal(size=initial_guess().shape) for _ in range(pt_points)
    ]
    target = op.spin_dm("x+").T
    results = [
        nm.state_gradient(system, op.spin_dm("x-"), target, [pt], q, progress_type="silent")
        for q in points
    ]
    return {
        "bond": int(max(pt.get_bond_dimensions())),
        "fidelities": [float(np.sum(r["final_state"] * target.T).real) for r in results],
        "gradients": [r["gradient"].real for r in results],
    }


def jax_comparison(pt_file: str) -> dict:
    """jax.grad through the compiled scan against the adjoint (on JAX and on NumPy)."""
    import nonmarkov as nm

    nm.backends.set_backend("jax")
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, os.path.dirname(HELPER))
    from oqupy_gradient import initial_guess

    op = nm.operators
    pt = nm.import_process_tensor(pt_file)
    sx, sy, sz = op.sigma("x"), op.sigma("y"), op.sigma("z")
    system = nm.ParameterizedSystem(lambda x, y, z: 0.5 * (x * sx + y * sy + z * sz))
    target = op.spin_dm("x+").T
    dynamics = nm.differentiable_dynamics(system, [pt], record_all=False)
    grad = jax.jit(jax.grad(lambda q: jnp.real(jnp.sum(target * dynamics(q, op.spin_dm("x-"))))))
    point = initial_guess()
    started = time.perf_counter()
    first = np.asarray(grad(point))
    compile_and_run = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(5):
        value = np.asarray(grad(point + 1e-3))
    jax_grad = (time.perf_counter() - started) / 5
    started = time.perf_counter()
    adjoint_jax = nm.state_gradient(
        system, op.spin_dm("x-"), target, [pt], point, progress_type="silent"
    )
    adjoint_jax_first = time.perf_counter() - started
    started = time.perf_counter()
    adjoint_jax = nm.state_gradient(
        system, op.spin_dm("x-"), target, [pt], point, progress_type="silent"
    )
    adjoint_jax_seconds = time.perf_counter() - started
    with nm.backends.use_backend("numpy"):
        started = time.perf_counter()
        adjoint = nm.state_gradient(
            system, op.spin_dm("x-"), target, [pt], point, progress_type="silent"
        )
        adjoint_seconds = time.perf_counter() - started
    scale = np.abs(adjoint["gradient"]).max()
    del value
    return {
        "jax_grad_first_call_s": compile_and_run,
        "jax_grad_s": jax_grad,
        "adjoint_jax_first_call_s": adjoint_jax_first,
        "adjoint_jax_s": adjoint_jax_seconds,
        "adjoint_numpy_s": adjoint_seconds,
        "jax_grad_vs_adjoint": float(np.abs(first - adjoint["gradient"].real).max() / scale),
        "jax_adjoint_vs_numpy": float(
            np.abs(adjoint_jax["gradient"] - adjoint["gradient"]).max() / scale
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oqupy-python", default=None)
    parser.add_argument("--no-oqupy", action="store_true")
    parser.add_argument("--maxiter", type=int, default=200)
    parser.add_argument("--points", type=int, default=2)
    parser.add_argument("--jax", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    env = thread_env(1)
    workdir = tempfile.mkdtemp(prefix="bench_gradient_")
    pt_file = os.path.join(workdir, "pt.hdf5")
    common = ["--points", str(args.points), "--maxiter", str(args.maxiter)]
    records = {}
    if not args.no_oqupy:
        python = oqupy_python(args.oqupy_python)
        records["oqupy"] = run(
            python,
            "oqupy",
            env,
            workdir,
            "oqupy",
            "--export-pt",
            pt_file,
            "--repeat",
            "1",
            *common,
        )
        records["nonmarkov_same_pt"] = run(
            sys.executable,
            "nonmarkov",
            env,
            workdir,
            "same",
            "--pt-file",
            pt_file,
            "--repeat",
            "3",
            "--points",
            str(args.points),
        )
    records["nonmarkov"] = run(
        sys.executable,
        "nonmarkov",
        env,
        workdir,
        "own",
        "--repeat",
        "3",
        "--export-pt",
        pt_file if args.no_oqupy else os.path.join(workdir, "own.hdf5"),
        *common,
    )
    ref = reference(args.points)
    print(f"reference: nonmarkov epsrel 1e-10, bond {ref['bond']}")
    header = ("run", "bond", "PT s", "grad s (guess, points)", "err F", "err grad")
    print(
        f"{header[0]:>20} {header[1]:>5} {header[2]:>6} {header[3]:>26} {header[4]:>9} "
        f"{header[5]:>9}"
    )
    for name, record in records.items():
        err_f = max(abs(a - b) for a, b in zip(record["fidelities"], ref["fidelities"]))
        err_g = max(
            float(np.abs(np.asarray(g) - r).max() / np.abs(r).max())
            for g, r in zip(record["gradients"], ref["gradients"])
        )
        record["error_fidelity"], record["error_gradient"] = err_f, err_g
        seconds = ", ".join(f"{s:.3f}" for s in record["gradient_seconds"])
        print(
            f"{name:>20} {record['bond']:5d} {record['times']['pt']:6.2f} {seconds:>26} "
            f"{err_f:9.2e} {err_g:9.2e}"
        )
    if "oqupy" in records:
        same = records["nonmarkov_same_pt"]
        difference = max(
            float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())
            for a, b in zip(same["gradients"], records["oqupy"]["gradients"])
        )
        ratios = [
            o / n for o, n in zip(records["oqupy"]["gradient_seconds"], same["gradient_seconds"])
        ]
        print(
            f"same process tensor: gradients agree to {difference:.1e} (relative); "
            f"OQuPy/nonmarkov time per gradient: " + ", ".join(f"{r:.0f}x" for r in ratios)
        )
        records["same_pt_gradient_difference"] = difference
    for name in ("oqupy", "nonmarkov"):
        opt = records.get(name, {}).get("optimisation")
        if opt:
            print(
                f"{name:>10} optimisation: {opt['seconds']:.1f} s, {opt['iterations']} "
                f"iterations, {opt['evaluations']} evaluations, fidelity {opt['fidelity']:.5f}"
            )
    if args.jax:
        records["jax"] = jax_comparison(pt_file)
        print("JAX: " + ", ".join(f"{k} {v:.3g}" for k, v in records["jax"].items()))
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(records, stream, default=lambda a: np.asarray(a).tolist())


if __name__ == "__main__":
    main()
