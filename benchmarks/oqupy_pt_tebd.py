"""PT-TEBD problems written once against OQuPy 0.5's public API.

Two problems, each run by real OQuPy (``--library oqupy``, the python of the
OQuPy venv made by ``setup_oqupy_env.sh``) or by nonmarkov through its
OQuPy-compatible API (``--library nonmarkov``):

- ``paper``: the OQuPy paper's set (OQuPy's ``tests/performance/pt_tebd.py``):
  a ``--sites``-site XY chain, H = sum_n h/2 sigma_z^n + sum_n (Jx/4 sigma_x^n
  sigma_x^{n+1} + Jy/4 sigma_y^n sigma_y^{n+1}) with h = 1, Jx = 0.96,
  Jy = 1.04; the first ``--baths`` sites each coupled through sigma_z/2 to an
  Ohmic bath ``PowerLawSD(alpha, zeta=1, cutoff=1, 'exponential', T=0)``;
  the process tensor by ``pt_tempo_compute`` with tcut = 4, PT epsrel
  ``--pt-epsrel`` (2^-15 as in OQuPy's file); dt = 1/16, 64 steps, second
  order, TEBD epsrel ``--epsrel`` (2^-15); first spin up, the others down.
- ``xyz``: OQuPy's ``examples/spin-chain.py``: a 5-site XYZ chain (J = 1.3,
  0.7, 1.2, field 1 along z), baths (sigma_y/2, alpha 0.08, cutoff 4,
  T = 1.6, dkmax 40, PT epsrel 1e-5) on sites 3 and 4, dt = 0.2, 20 steps,
  order 2, TEBD epsrel ``--epsrel`` (the example's 1e-5).

The process tensor is computed once (timed as ``pt_build``) and used for
every bathed site; ``pt_tebd`` times ``PtTebd(...).compute``. ``--save-pt
FILE`` writes it (its untransformed MPO tensors, OQuPy's layout, ``.npz``),
``--load-pt FILE`` reads such a file into the library's ``SimpleProcessTensor``
instead of computing one, so that both codes can run PT-TEBD with the very
same process tensor (only for baths whose coupling is diagonal: no basis
change). ``--pt-only`` stops after the process tensor.
``--parallel multithread|multiprocess`` passes OQuPy's ``backend_config``
(ignored, with a warning, by nonmarkov); OQuPy 0.5.0 uses
``concurrent.futures`` there without importing it, so this script imports it.
The JSON record: library, version, parameters, wall times, the largest chain
bond per step, the norm per step and every site's states (real and imaginary
parts) per step::

    python oqupy_pt_tebd.py --library oqupy --problem paper --baths 2 --json out.json
"""

from __future__ import annotations

import argparse
import concurrent.futures  # noqa: F401  OQuPy 0.5.0's 'parallel' option uses it unimported
import importlib
import json
import platform
import time
import warnings

import numpy as np

DEFAULTS = {
    "paper": {"sites": 7, "baths": 2, "alpha": 0.16, "epsrel": 2.0**-15, "pt_epsrel": 2.0**-15},
    "xyz": {"sites": 5, "baths": 2, "alpha": 0.08, "epsrel": 1.0e-5, "pt_epsrel": 1.0e-5},
}


def build(lib, problem: str, sites: int, baths: int, alpha: float, pt_epsrel: float):
    """(chain, initial MPS, dt, steps, bathed sites, a function that makes the PT)."""
    op = lib.operators
    if problem == "paper":
        h = np.array([[0.0, 0.0, 1.0]] * sites)
        couplings = np.array([[0.96, 1.04, 0.0]] * (sites - 1))
        dt, steps = 2.0**-4, 64
        bathed = list(range(baths))

        def make_pt():
            sd = lib.PowerLawSD(
                alpha=alpha, zeta=1, cutoff=1.0, cutoff_type="exponential", temperature=0.0
            )
            bath = lib.Bath(op.sigma("z") / 2.0, sd)
            parameters = lib.TempoParameters(dt=dt, tcut=4.0, epsrel=pt_epsrel)
            return lib.pt_tempo_compute(
                bath=bath,
                start_time=0.0,
                end_time=steps * dt,
                parameters=parameters,
                progress_type="silent",
            )

    else:
        h = np.array([[0.0, 0.0, 1.0]] * sites)
        couplings = np.array([[1.3, 0.7, 1.2]] * (sites - 1))
        dt, steps = 0.2, 20
        bathed = list(range(sites - baths, sites))

        def make_pt():
            sd = lib.PowerLawSD(
                alpha=alpha, zeta=1, cutoff=4.0, cutoff_type="exponential", temperature=1.6
            )
            bath = lib.Bath(0.5 * op.sigma("y"), sd)
            parameters = lib.TempoParameters(dt=dt, epsrel=pt_epsrel, dkmax=40)
            return lib.pt_tempo_compute(
                bath=bath,
                start_time=0.0,
                end_time=steps * dt,
                parameters=parameters,
                progress_type="silent",
            )

    chain = lib.SystemChain(hilbert_space_dimensions=[2] * sites)
    for n in range(sites):
        for i, xyz in enumerate("xyz"):
            if h[n, i]:
                chain.add_site_hamiltonian(site=n, hamiltonian=0.5 * h[n, i] * op.sigma(xyz))
    for n in range(sites - 1):
        for i, xyz in enumerate("xyz"):
            if couplings[n, i]:
                chain.add_nn_hamiltonian(
                    site=n,
                    hamiltonian_l=0.5 * couplings[n, i] * op.sigma(xyz),
                    hamiltonian_r=0.5 * op.sigma(xyz),
                )
    mps = lib.AugmentedMPS([op.spin_dm("z+")] + [op.spin_dm("z-")] * (sites - 1))
    return chain, mps, dt, steps, bathed, make_pt


def save_pt(pt, path: str) -> None:
    """The untransformed MPO tensors (b, b', d^2, d^2) of ``pt`` to ``path`` (.npz)."""
    if pt.transform_in is not None and not np.allclose(pt.transform_in, np.eye(4)):
        raise ValueError("--save-pt: only process tensors without a basis change")
    tensors = {f"step{k}": pt.get_mpo_tensor(k, transformed=False) for k in range(len(pt))}
    np.savez(path, dt=pt.dt, steps=len(pt), **tensors)


def load_pt(lib, path: str, dt: float):
    """A ``SimpleProcessTensor`` of ``lib`` from a file of :func:`save_pt`."""
    data = np.load(path)
    if abs(float(data["dt"]) - dt) > 1e-12:
        raise ValueError(f"{path} has dt = {float(data['dt'])}, the problem {dt}")
    pt = lib.SimpleProcessTensor(2, dt)
    for k in range(int(data["steps"])):
        pt.set_mpo_tensor(k, data[f"step{k}"])
    if hasattr(pt, "compute_caps"):
        pt.compute_caps()
    return pt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=["oqupy", "nonmarkov"], required=True)
    parser.add_argument("--problem", choices=sorted(DEFAULTS), default="paper")
    parser.add_argument("--sites", type=int, default=None)
    parser.add_argument("--baths", type=int, default=None)
    parser.add_argument("--alpha", type=float, default=None)
    parser.add_argument("--epsrel", type=float, default=None)
    parser.add_argument("--pt-epsrel", type=float, default=None)
    parser.add_argument("--order", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="fewer steps than the problem's")
    parser.add_argument(
        "--parallel", choices=["none", "multithread", "multiprocess"], default="none"
    )
    parser.add_argument("--save-pt", default=None, help="write the process tensor (.npz)")
    parser.add_argument("--load-pt", default=None, help="read the process tensor (.npz)")
    parser.add_argument("--pt-only", action="store_true", help="stop after the process tensor")
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    settings = dict(DEFAULTS[args.problem])
    for key in settings:
        value = getattr(args, key)
        if value is not None:
            settings[key] = value

    start = time.perf_counter()
    lib = importlib.import_module(args.library)
    import_s = time.perf_counter() - start
    chain, mps, dt, steps, bathed, make_pt = build(
        lib,
        args.problem,
        settings["sites"],
        settings["baths"],
        settings["alpha"],
        settings["pt_epsrel"],
    )
    steps = steps if args.steps is None else args.steps
    start = time.perf_counter()
    if args.load_pt:
        pt = load_pt(lib, args.load_pt, dt)
    else:
        pt = make_pt() if bathed or args.save_pt else None
    pt_build_s = time.perf_counter() - start
    if args.save_pt:
        save_pt(pt, args.save_pt)
    if args.pt_only:
        record = {"library": args.library, "wall_time_s": {"pt_build": pt_build_s}}
        record["pt_bond"] = int(np.max(pt.get_bond_dimensions()))
        with open(args.json, "w") as handle:
            json.dump(record, handle)
        return
    pt = pt if bathed else None
    pts = [pt if n in bathed else None for n in range(settings["sites"])]
    parameters = lib.PtTebdParameters(dt=dt, order=args.order, epsrel=settings["epsrel"])
    config = None if args.parallel == "none" else {"parallel": args.parallel}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tebd = lib.PtTebd(
            initial_augmented_mps=mps,
            system_chain=chain,
            process_tensors=pts,
            parameters=parameters,
            dynamics_sites=list(range(settings["sites"])),
            backend_config=config,
        )
    start = time.perf_counter()
    results = tebd.compute(steps, progress_type="silent")
    tebd_s = time.perf_counter() - start
    states = np.array([results["dynamics"][n].states for n in range(settings["sites"])])
    record = {
        "library": args.library,
        "version": getattr(lib, "__version__", "?"),
        "python": platform.python_version(),
        "problem": args.problem,
        "parameters": {
            **settings,
            "order": args.order,
            "steps": steps,
            "dt": dt,
            "parallel": args.parallel,
        },
        "wall_time_s": {"import": import_s, "pt_build": pt_build_s, "pt_tebd": tebd_s},
        "pt_bond": int(np.max(pt.get_bond_dimensions())) if pt is not None else 0,
        "max_bond": [int(np.max(b)) if np.size(b) else 1 for b in results["bond_dimensions"]],
        "norm_real": np.real(results["norm"]).tolist(),
        "times": np.asarray(results["time"], dtype=float).tolist(),
        "states_shape": list(states.shape),
        "states_real": states.real.reshape(-1).tolist(),
        "states_imag": states.imag.reshape(-1).tolist(),
    }
    with open(args.json, "w") as handle:
        json.dump(record, handle)


if __name__ == "__main__":
    main()
