"""The OQuPy paper's mean-field problem, written once against OQuPy 0.5's public API.

A spin ensemble in a lossy cavity (Fowler-Wright et al., PRL 129, 173001
(2022); the set of OQuPy's ``tests/performance/mean_field.py``): N identical
two-level systems, each with

    H(t, a) = omega_0/2 sigma_z + Omega/2 (a sigma_+ + a^* sigma_-),
    Lindblad terms Gamma_down D[sigma_-] + Gamma_up D[sigma_+],

coupled through the cavity field a(t), whose mean-field equation is

    da/dt = -(i omega_c + kappa) a - (i Omega / 2) sum_i f_i Tr(sigma_- rho_i),
    f_i = 1/N,

with omega_0 = 0, omega_c = -30.4, Omega = 303.9, kappa = 15.2,
Gamma_down = 15.2, Gamma_up = 0.8 Gamma_down, a(0) = sqrt(0.05) (n_0 = 0.05)
and every spin down at t = 0. Each spin has its own bath: coupling
sigma_z / 2, ``PowerLawSD(alpha=0.25, zeta=1, cutoff=227.9, 'exponential',
temperature=39.3)``. Numerical parameters: dt = 2^-10, tcut = 0.1
(dkmax = 102), epsrel = 2^-26, 128 steps (t in [0, 0.125]).

Methods: ``tempo`` (``MeanFieldTempo(...).compute``) or ``pt``
(``pt_tempo_compute`` once, then ``compute_dynamics_with_field`` with that
process tensor for every system); the phases are timed separately.

The same script runs the problem with real OQuPy (``--library oqupy``, with
the python of the OQuPy venv made by ``setup_oqupy_env.sh``) and with
nonmarkov through its OQuPy-compatible API (``--library nonmarkov``, with the
nonmarkov venv's python), so both codes solve exactly the same problem.
``bench_mean_field.py`` runs it both ways::

    python oqupy_mean_field.py --library oqupy --method tempo --json out.json
        [--steps 128] [--dt 0.0009765625] [--epsrel 1.4901161193847656e-08]
        [--tcut 0.1] [--systems 1] [--profile out.prof]

The JSON record holds the library and its version, the parameters, the wall
time of each phase, the peak RSS (KiB), the bond dimensions where the public
API gives them, the times, the field (real and imaginary parts), every
system's states (real and imaginary parts, flattened) and the real parts of
<sigma_z>(t) and Tr rho(t) of the first system.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib
import json
import os
import platform
import resource
import time

import numpy as np

PARAMETERS = {
    "omega_0": 0.0,
    "omega_c": -30.4,
    "Omega": 303.9,
    "kappa": 15.2,
    "Gamma_down": 15.2,
    "Gamma_up": 0.8 * 15.2,
    "initial_field": float(np.sqrt(0.05)),
    "alpha": 0.25,
    "zeta": 1.0,
    "cutoff": 227.9,
    "cutoff_type": "exponential",
    "temperature": 39.3,
}
DEFAULTS = {"dt": 2.0**-10, "tcut": 0.1, "epsrel": 2.0**-26, "steps": 128}


def build_problem(lib, systems: int, dt: float, tcut: float, epsrel: float):
    """The mean-field system, baths, parameters, states and field for ``lib`` (the module)."""
    p = PARAMETERS
    sigma_z = lib.operators.sigma("z")
    sigma_plus = lib.operators.sigma("+")
    sigma_minus = lib.operators.sigma("-")
    fractions = [1.0 / systems] * systems

    def hamiltonian(t, a):
        return 0.5 * p["omega_0"] * sigma_z + 0.5 * p["Omega"] * (
            a * sigma_plus + np.conj(a) * sigma_minus
        )

    def field_eom(t, states, a):
        coherence = sum(f * np.matmul(sigma_minus, s).trace() for f, s in zip(fractions, states))
        return -(1j * p["omega_c"] + p["kappa"]) * a - 0.5j * p["Omega"] * coherence

    system = lib.TimeDependentSystemWithField(
        hamiltonian,
        gammas=[lambda t: p["Gamma_down"], lambda t: p["Gamma_up"]],
        lindblad_operators=[lambda t: sigma_minus, lambda t: sigma_plus],
    )
    mean_field_system = lib.MeanFieldSystem([system] * systems, field_eom=field_eom)
    correlations = lib.PowerLawSD(
        alpha=p["alpha"],
        zeta=p["zeta"],
        cutoff=p["cutoff"],
        cutoff_type=p["cutoff_type"],
        temperature=p["temperature"],
    )
    bath = lib.Bath(0.5 * sigma_z, correlations)
    parameters = lib.TempoParameters(dt=dt, tcut=tcut, epsrel=epsrel)
    states = [np.array([[0.0, 0.0], [0.0, 1.0]], dtype=complex) for _ in range(systems)]
    return mean_field_system, bath, parameters, states, p["initial_field"], sigma_z


class _Profile:
    """cProfile around the timed phases when a file is given (else nothing)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.profile = cProfile.Profile() if path else None

    @contextlib.contextmanager
    def on(self):
        if self.profile is None:
            yield
            return
        self.profile.enable()
        try:
            yield
        finally:
            self.profile.disable()

    def save(self) -> None:
        if self.profile is not None:
            self.profile.dump_stats(self.path)


def run(args: argparse.Namespace) -> dict:
    """Solve the problem with ``args.library``; return the JSON record."""
    start = time.perf_counter()
    lib = importlib.import_module(args.library)
    import_s = time.perf_counter() - start
    dt, tcut, epsrel, steps = args.dt, args.tcut, args.epsrel, args.steps
    end_time = steps * dt
    profile = _Profile(args.profile)
    wall: dict[str, float] = {"import": import_s}
    start = time.perf_counter()
    mean_field_system, bath, parameters, states, field, sigma_z = build_problem(
        lib, args.systems, dt, tcut, epsrel
    )
    wall["setup"] = time.perf_counter() - start
    record: dict = {
        "library": args.library,
        "version": getattr(lib, "__version__", None),
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "method": args.method,
        "parameters": dict(
            PARAMETERS, dt=dt, tcut=tcut, epsrel=epsrel, steps=steps, systems=args.systems
        ),
        "thread_env": {
            key: os.environ.get(key)
            for key in (
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS",
                "NONMARKOV_BLAS_THREADS",
            )
        },
        "load_average_before": list(os.getloadavg()),
        "wall_time_s": wall,
        "max_bond_dimension": None,
    }
    if args.method == "tempo":
        start = time.perf_counter()
        with profile.on():
            tempo = lib.MeanFieldTempo(
                mean_field_system=mean_field_system,
                bath_list=[bath] * args.systems,
                parameters=parameters,
                initial_state_list=states,
                initial_field=field,
                start_time=0.0,
            )
            dynamics = tempo.compute(end_time=end_time, progress_type="silent")
        wall["tempo"] = time.perf_counter() - start
        bond = getattr(tempo, "max_bond_dimension", None)  # not in OQuPy's public API
        record["max_bond_dimension"] = None if bond is None else int(bond)
    else:
        start = time.perf_counter()
        with profile.on():
            process_tensor = lib.pt_tempo_compute(
                bath=bath,
                start_time=0.0,
                end_time=end_time,
                parameters=parameters,
                progress_type="silent",
            )
        wall["pt_build"] = time.perf_counter() - start
        start = time.perf_counter()
        with profile.on():
            dynamics = lib.compute_dynamics_with_field(
                mean_field_system,
                initial_field=field,
                initial_state_list=states,
                start_time=0.0,
                process_tensor_list=[process_tensor] * args.systems,
                progress_type="silent",
            )
        wall["dynamics"] = time.perf_counter() - start
        bonds = np.asarray(process_tensor.get_bond_dimensions())
        record["bond_dimensions"] = [int(b) for b in bonds]
        record["max_bond_dimension"] = int(bonds.max())
    wall["total"] = sum(v for k, v in wall.items() if k in ("tempo", "pt_build", "dynamics"))
    profile.save()
    record["load_average_after"] = list(os.getloadavg())
    record["maxrss_kib_after"] = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    times, fields = dynamics.field_expectations()
    fields = np.asarray(fields, dtype=complex)
    record["times"] = [float(t) for t in np.real(times)]
    record["field_real"] = fields.real.tolist()
    record["field_imag"] = fields.imag.tolist()
    all_states = np.array([np.asarray(d.states) for d in dynamics.system_dynamics])
    record["states_shape"] = list(all_states.shape)
    record["states_real"] = all_states.real.reshape(-1).tolist()
    record["states_imag"] = all_states.imag.reshape(-1).tolist()
    first = dynamics.system_dynamics[0]
    record["sigma_z"] = [float(v) for v in first.expectations(sigma_z, real=True)[1]]
    record["trace"] = [float(np.real(np.trace(s))) for s in first.states]
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=["oqupy", "nonmarkov"], default="oqupy")
    parser.add_argument("--method", choices=["tempo", "pt"], required=True)
    parser.add_argument("--steps", type=int, default=DEFAULTS["steps"])
    parser.add_argument("--dt", type=float, default=DEFAULTS["dt"])
    parser.add_argument("--tcut", type=float, default=DEFAULTS["tcut"])
    parser.add_argument("--epsrel", type=float, default=DEFAULTS["epsrel"])
    parser.add_argument("--systems", type=int, default=1, help="number of identical spins")
    parser.add_argument("--profile", default=None, help="write a cProfile of the timed phases")
    parser.add_argument("--json", required=True, help="output JSON file")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.systems < 1:
        parser.error("--steps and --systems must be at least 1")
    record = run(args)
    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    summary = {k: record[k] for k in ("library", "method", "wall_time_s", "max_bond_dimension")}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
