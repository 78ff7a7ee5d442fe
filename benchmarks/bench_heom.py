"""Accuracy per second: QuTiP 5's HEOM solver against nonmarkov on spin-boson models.

Model (both programs): H_S = (eps/2) sigma_z + (Delta/2) sigma_x with Delta = 1,
eps = 0.5, coupling operator sigma_z (H_I = sigma_z X, X = sum_k g_k b_k + h.c.),
initial state spin up (sigma_z = +1), observable <sigma_z(t)> on t = 0, 0.4, ..., 20.
Errors are the largest |<sigma_z>(t) - reference| over those times.

Baths (``--cases``):

- ``weak`` (lambda 0.05, T 1), ``intermediate`` (0.25, 1), ``lowT`` (0.25, 0.1),
  ``strong`` (1.0, 1), ``verylowT`` (0.25, 0.05): Drude-Lorentz with reorganisation
  energy lambda and width gamma = Delta. nonmarkov: ``DrudeLorentzSD(lambda, gamma, T)``,
  J(w) = (2 lambda / pi) gamma w / (gamma^2 + w^2); QuTiP: ``DrudeLorentzEnvironment(T,
  lam=lambda, gamma)`` (J_QuTiP = pi J, with 1/pi in its C(t)). Same C(t).
- ``superohmic``: J(w) = 2 alpha w^3 wc^-2 exp(-w/wc), alpha = 0.05, wc = 1, T = 0.5
  (nonmarkov: ``PowerLawSD(alpha, zeta=3, cutoff=wc, 'exponential', T)``; QuTiP:
  ``BosonicEnvironment.from_spectral_density(pi J, T=T)``, fitted with exponentials by
  ESPIRA-I on C(t) at 2000 times in [0, 20] (``approximate('espira-I', ...)``, N terms
  each for Re C and Im C): of QuTiP's fits of this C(t) the closest (N = 4 / 6 / 8:
  1.3e-3 / 4.2e-4 / 3.1e-5 of max |C| off; ESPRIT and Prony 1.5e-3 at N = 8 on 400
  times, 1.7e-2 on 2000) for the hierarchy).

Conventions are checked first: both programs' C(t) at t = 0.1 .. 10, against each
other and (Drude-Lorentz) against the closed-form Matsubara series, and QuTiP's Pade
expansion used by its HEOM (printed; a case stops if nonmarkov's C(t) is off by more
than 1e-6 relative to max |C|). QuTiP's ``DrudeLorentzEnvironment.correlation_function``
drifts at low temperature (7e-4 relative at T = 0.1, 2e-2 at T = 0.05 against the
series); its HEOM does not use it. The super-Ohmic C(t) of the two programs (both
numerical integrals) agree to 6e-5 relative (the limit there is 1e-4).

HEOM runs: Pade terms Nk (Drude-Lorentz, each with and without QuTiP's terminator
for the terms left out) or fitted exponentials (super-Ohmic) times hierarchy depth
(runs with more than ``MAX_ADOS`` auxiliary density operators skipped; per case
``max_ados``, and ``terminators`` where the terminator is known to change nothing), ODE
tolerance atol = rtol = 1e-9 (the time of a run: building the solver and running it).
nonmarkov runs (``--methods``): ``tail``, TEMPO with ``exponential_tail=True`` (the
memory beyond the cut carried by modes, fitted exponentials) at the case's short cuts
``tail_tcuts`` and epsrel 1e-6 .. 1e-9 (``--tail-tcuts``, ``--tail-epsrels``);
``tempo``, TEMPO with a plain cut (``tempo_compute``); ``uniform``, the uniform process
tensor (``pt_uniform_compute`` + ``compute_uniform_dynamics``); over dt, memory cut tcut
and epsrel (dt: the grid's, or ``--dts``, each dividing 0.4); TEMPO's window truncated
with the ``trace_weight`` engine option of ``--trace-weight`` (default the library's,
10; 1 is the flat norm of the tables before 2026-12-03; docs/trace_weight.md); every
set of runs at dt, dt/2 (and dt/4) with the same tcut and epsrel is also combined by
Richardson extrapolation (``nonmarkov.methods.extrapolation.richardson``, order 2, its order check
on three levels; from three levels that pass it also the second, Romberg stage,
``next_order=4``, labelled ``romberg``), and so is every pair dt, dt/1.5 (``--dts 0.4
0.2 0.4/3``), costing the sum of its runs.

Memory cut and epsrel (the default grid, ``rule``): per tolerance tol, the memory cut
is chosen from the decay of the bath's correlation function: the shortest tcut (a
multiple of 0.4, so that every dt cuts at the same time) with 2 int_tcut^inf |C(t)| dt
<= tol / 2 (:func:`memory_cut`; the error that a cut leaves in <sigma_z> was measured
at about 2 int_tcut^inf |C| on the weak case), and epsrel = tol / 100 and tol / 1000
(and tol / 10^4 for the finest tol).

Reference: at T = 1 (``weak``, ``intermediate``, ``strong``) and T = 0.1 (``lowT``) the
Matsubara hierarchy of ``heom_reference.py`` (per case, ``reference``: "hierarchy
K/kmax/ratio/threshold[/points]"; the exact Matsubara series, ADOs chosen by size),
checked against the same at a coarser threshold or merge (printed as ``reference
check``; ``--reference-cache DIR`` keeps the reference runs for reruns); otherwise
sums of deep QuTiP runs ("Nk/depth"): at T = 0.05
(``verylowT``) Nk 16 at depth 5 plus the change from Nk 16 to 32 at depth 4
and from depth 5 to 8 at Nk 8 (HEOM's grid there: Nk 2-16, to 110,000 ADOs); for the
super-Ohmic bath 12 fitted terms (each for Re C and Im C) at depth 4 plus the change
from depth 4 to 8 at 4 terms. With ``--nonmarkov-reference``, the three-level
extrapolation at the finest dt with the tightest epsrel and longest tcut, checked
against the next one and against the deepest HEOM run of the grid. For each
case and each tolerance 1e-3, 1e-4, 1e-5 the table gives the cheapest run of each
program whose error is within it (its parameters and seconds), and the ratio
nonmarkov/HEOM.

One BLAS thread (set before NumPy loads). All runs happen one after the other in this
process. The seconds compared are the process's CPU seconds of each run
(``time.process_time``: single-threaded runs, so the wall-clock time on an idle
core, and not inflated by other load on a shared machine); the wall-clock seconds
are kept too (``wall_s`` in the JSON).

    python benchmarks/bench_heom.py [--cases weak intermediate] [--quick]
        [--grid quick|medium|full] [--methods tempo tail uniform] [--reference-cache DIR]
        [--nonmarkov-reference] [--tail-tcuts ...] [--tail-epsrels ...] [--dts ...]
        [--trace-weight W]
        [--json out.json]

``--nonmarkov-reference``: judge every case against nonmarkov's most accurate
extrapolation (as at low temperature), printing its distance to HEOM's reference runs.

``--quick``: a small grid (for a check that everything runs). The default grid
(``rule``): HEOM Nk 1-4 x depth 2-6, 8; nonmarkov dt 0.4, 0.2, 0.1 x the (tcut, epsrel)
pairs of the rule above. ``--grid full``: dt 0.4, 0.2, 0.1 x epsrel 1e-6, 1e-8 at the
case's longer memory cut (``tcuts``); ``--grid medium``: the same at epsrel 1e-6 only.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"
os.environ.setdefault("NONMARKOV_BLAS_THREADS", "1")

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

from nonmarkov.options import TRACE_WEIGHT  # noqa: E402

DELTA, EPS, END = 1.0, 0.5, 20.0
#: spacing of the comparison times (every time step and memory cut is a divisor / multiple)
GRID_STEP = 0.4
GRID = np.round(np.arange(0.0, END + 1e-9, GRID_STEP), 10)
TOLERANCES = (1e-3, 1e-4, 1e-5)
ODE = {"atol": 1e-9, "rtol": 1e-9, "nsteps": 1_000_000, "progress_bar": False}

#: HEOM's Pade terms at low temperature (the grid's 1-4 do not converge there)
LOW_T = (2, 4, 6, 8, 10, 12)
#: "reference": two HEOM results, the reference and its check, each a run "Nk/depth" or a
#: sum of runs ("12/6 + 16/5 - 12/5": Nk 12 at depth 6 plus what Nk 16 changes at depth
#: 5), or None: nonmarkov's most accurate extrapolation, checked against the next one
#: and against the deepest HEOM run
CASES = {
    "weak": {
        "lam": 0.05,
        "T": 1.0,
        "tcuts": (4.0, 12.0),
        "tail_tcuts": (1.2, 2.0),
        # the Matsubara hierarchy (heom_reference.py; 1e-4 -> 3e-4 changes 3.8e-7);
        # QuTiP's Pade runs 6/8, 5/8 were the reference before
        "reference": ("hierarchy 2/1024/1.19/1e-4", "hierarchy 2/1024/1.19/3e-4"),
    },
    "intermediate": {
        "lam": 0.25,
        "T": 1.0,
        "tcuts": (4.0, 12.0),
        "tail_tcuts": (1.2, 2.0),
        # the Matsubara hierarchy (3.4e-7 from threshold 3e-4); QuTiP's Pade references
        # 6/10 and 5/12 are 1.1e-5 and 7.7e-6 from it
        "reference": ("hierarchy 2/1024/1.19/1e-4", "hierarchy 2/1024/1.19/3e-4"),
    },
    "lowT": {
        "lam": 0.25,
        "T": 0.1,
        "tcuts": (6.0, 12.0),
        "tail_tcuts": (4.0, 6.0),
        # the Matsubara hierarchy with two exponentials per merged block (threshold
        # 3e-4 -> 1e-4 moves the one-exponential merge by 1.4e-6); the QuTiP sum
        # "12/6 + 16/5 - 12/5 + 6/8 - 6/6" before it lacked ~1.5e-5 of Pade terms
        "reference": ("hierarchy 8/1024/2/3e-4/2", "hierarchy 8/1024/1.414/3e-4/2"),
        "heom_terms": LOW_T,
    },
    "strong": {
        "lam": 1.0,
        "T": 1.0,
        "tcuts": (4.0, 8.0),
        "tail_tcuts": (1.2, 2.0),
        # the Matsubara hierarchy (2.0e-6 from threshold 1e-3); QuTiP's Pade runs do not
        # converge here (4/12 is 4.8e-5 from it)
        "reference": ("hierarchy 2/1024/1.19/3e-4", "hierarchy 2/1024/1.19/1e-3"),
    },
    "verylowT": {
        "lam": 0.25,
        "T": 0.05,
        "tcuts": (8.0, 16.0),
        "tail_tcuts": (6.0, 8.0),
        # Nk 16 at depth 5 with the Pade terms' change from 16 to 32 at depth 4 and the
        # depth's from 5 to 8 at Nk 8 (measured: Nk 12 -> 16 -> 20 -> 24 at depth 4
        # changes <sigma_z> by 1.2e-4, 3.7e-5, 1.4e-5; depth 5 -> 6 -> 7 -> 8 at Nk 8 by
        # 1.5e-4, 5.4e-5, 2e-6; Nk 12 -> 16 is the same at depth 4 and 5 to 1e-7)
        "reference": ("16/5 + 32/4 - 16/4 + 8/8 - 8/5", "12/5 + 24/4 - 12/4 + 8/7 - 8/5"),
        "heom_terms": LOW_T + (14, 16),
        # 1e-4 needs Nk >= 14 at depth 6 (54,264 / 100,947 ADOs); the terminator
        # changes nothing here (Nk 12 and 16 at depth 5: the same error to 1e-6)
        "max_ados": 110_000,
        "terminators": (False,),
    },
    "superohmic": {
        "alpha": 0.05,
        "wc": 1.0,
        "T": 0.5,
        "tcuts": (4.0, 10.0),
        "tail_tcuts": (4.0, 8.0),
        # 12 fitted terms at depth 4 with the depth's change from 4 to 8 at 4 terms
        # (measured: 8 -> 10 -> 12 terms change <sigma_z> by 9e-6, 5e-6 at depth 4;
        # depth 4 -> 5 -> 6 -> 8 by 1.4e-4, 1.1e-5, 1e-6, the same at 4, 6, 8 terms
        # to 4e-6); the check takes both from other hierarchies
        "reference": ("12/4 + 4/8 - 4/4", "8/5 + 4/8 - 4/5"),
    },
}
#: HEOM terms and depths, nonmarkov dts, epsrels and which of the case's tcuts
GRIDS = {
    "quick": {
        "terms": (1, 2),
        "depths": (3, 5),
        "dts": (0.4, 0.2),
        "epsrels": (1e-5,),
        "tail_epsrels": (1e-6,),
        "tcuts": slice(0, 1),
    },
    "medium": {
        "terms": (1, 2, 3, 4),
        "depths": (2, 3, 4, 6, 8),
        "dts": (0.4, 0.2, 0.1),
        "epsrels": (1e-6,),
        "tcuts": slice(1, 2),
    },
    "full": {
        "terms": (1, 2, 3, 4),
        "depths": (2, 3, 4, 6, 8),
        "dts": (0.4, 0.2, 0.1),
        "epsrels": (1e-6, 1e-8),
        "tcuts": slice(1, 2),
    },
    "rule": {
        "terms": (1, 2, 3, 4),
        "depths": (2, 3, 4, 5, 6, 8),
        "dts": (0.4, 0.2, 0.1),
        "epsrel_factors": (1e-2, 1e-3),
        "finest_factor": 1e-4,
        "tail_epsrels": (1e-6, 1e-7, 1e-8, 1e-9),
    },
}
SUPEROHMIC_TERMS = (2, 4, 6, 8)
#: the largest hierarchy (auxiliary density operators) a HEOM run of the grid may have
MAX_ADOS = 25_000


def _sz():
    import qutip

    return qutip.sigmaz()


def qutip_environment(case: dict):
    """The bath of ``case`` as a QuTiP environment (exact, not yet fitted)."""
    from qutip.core.environment import BosonicEnvironment, DrudeLorentzEnvironment

    if "lam" in case:
        return DrudeLorentzEnvironment(T=case["T"], lam=case["lam"], gamma=DELTA)
    alpha, wc = case["alpha"], case["wc"]

    def spectral_density(w):
        w = np.asarray(w, dtype=float)
        return math.pi * 2 * alpha * np.where(w > 0, w**3 / wc**2 * np.exp(-w / wc), 0.0)

    return BosonicEnvironment.from_spectral_density(spectral_density, wMax=40 * wc, T=case["T"])


def nonmarkov_bath(case: dict, correlations=None):
    """The bath of ``case`` for nonmarkov (coupling sigma_z), or ``correlations``
    coupled the same way."""
    import nonmarkov as nm

    if correlations is None:
        correlations = (
            nm.DrudeLorentzSD(
                reorganisation_energy=case["lam"], cutoff=DELTA, temperature=case["T"]
            )
            if "lam" in case
            else nm.PowerLawSD(
                alpha=case["alpha"],
                zeta=3,
                cutoff=case["wc"],
                cutoff_type="exponential",
                temperature=case["T"],
            )
        )
    return nm.Bath(nm.operators.sigma("z"), correlations)


def memory_cut(case: dict, tolerance: float, step: float = GRID_STEP) -> float:
    """The memory cut for an error ``tolerance`` in <sigma_z>: the shortest multiple of
    ``step`` with 2 int_tcut^inf |C(t)| dt <= tolerance / 2 (C from nonmarkov's bath;
    the integral by trapezoids on a 0.01 grid to t = 200), at most the end time."""
    times = np.arange(0.01, 200.0, 0.01)
    magnitude = np.abs(np.asarray(nonmarkov_bath(case).correlations.correlation(times)))
    pieces = 0.5 * (magnitude[1:] + magnitude[:-1]) * np.diff(times)
    tails = np.concatenate([np.cumsum(pieces[::-1])[::-1], [0.0]])  # int_t^200 |C|
    index = int(np.argmax(2.0 * tails <= tolerance / 2.0))
    return round(min(END, step * math.ceil(times[index] / step - 1e-9)), 10)


def settings(case: dict, grid: dict, method: str = "tempo") -> list[tuple[float, float]]:
    """The (tcut, epsrel) pairs of nonmarkov's runs of ``method`` in ``grid``."""
    if method == "tail":  # the window covers what the modes do not: a short cut
        epsrels = grid.get("tail_epsrels", grid.get("epsrels"))
        return list(itertools.product(case["tail_tcuts"], epsrels))
    if "epsrel_factors" not in grid:
        return list(itertools.product(case["tcuts"][grid["tcuts"]], grid["epsrels"]))
    pairs = []
    for tolerance in TOLERANCES:
        tcut = memory_cut(case, tolerance)
        factors = list(grid["epsrel_factors"])
        if tolerance == min(TOLERANCES) and "finest_factor" in grid:
            factors.append(grid["finest_factor"])
        for factor in factors:
            pairs.append((tcut, float(f"{tolerance * factor:.1e}")))
    return list(dict.fromkeys(pairs))


def closed_form_correlation(case: dict, times: np.ndarray) -> np.ndarray:
    """The Drude-Lorentz C(t) (t > 0) from its Matsubara series, 200,000 terms."""
    lam, temperature = case["lam"], case["T"]
    nu = 2.0 * math.pi * temperature * np.arange(1, 200_001)
    first = lam * DELTA * (1.0 / math.tan(DELTA / (2.0 * temperature)) - 1j)
    series = [np.sum(nu * np.exp(-nu * t) / (nu**2 - DELTA**2)) for t in times]
    return first * np.exp(-DELTA * times) + 4.0 * lam * DELTA * temperature * np.asarray(series)


def check_conventions(case: dict) -> dict:
    """C(t) on t = 0.1 .. 10 of both programs, relative to max |C|: nonmarkov's and
    QuTiP's exact routines against each other and, for Drude-Lorentz, each against
    the closed form (QuTiP's ``correlation_function`` of ``DrudeLorentzEnvironment``
    drifts at low T; its HEOM uses the Pade expansion, checked too, at the largest
    number of terms of the QuTiP references, or else of the case's grid)."""
    times = np.array([0.1, 0.3, 1.0, 2.0, 5.0, 10.0])
    ours = np.asarray(nonmarkov_bath(case).correlations.correlation(times))
    environment = qutip_environment(case)
    theirs = np.asarray(environment.correlation_function(times))
    scale = float(np.max(np.abs(theirs)))
    result = {"nonmarkov_vs_qutip": float(np.max(np.abs(ours - theirs))) / scale}
    if "lam" in case:
        exact = closed_form_correlation(case, times)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            terms = max(
                [
                    terms
                    for f in case["reference"] or ()
                    if not f.startswith("hierarchy ")
                    for _, terms, _ in parse_composite(f)
                ]
                or case.get("heom_terms", GRIDS["rule"]["terms"])
            )
            pade = environment.approximate("pade", Nk=terms)
        pade = pade[0] if isinstance(pade, tuple) else pade
        expansion = np.asarray(pade.correlation_function(times))
        result["nonmarkov_vs_closed_form"] = float(np.max(np.abs(ours - exact))) / scale
        result["qutip_vs_closed_form"] = float(np.max(np.abs(theirs - exact))) / scale
        result["qutip_pade_vs_closed_form"] = float(np.max(np.abs(expansion - exact))) / scale
    return result


def heom_solver(case: dict, terms: int, depth: int, terminator: bool = False, **options):
    """QuTiP's HEOMSolver of ``case``: Pade terms Nk (Drude-Lorentz; ``terminator``: the
    terms left out enter as QuTiP's Markovian terminator, ``system_terminator`` of the
    expansion's ``delta``) or ESPIRA-I exponentials (super-Ohmic), hierarchy ``depth``."""
    import qutip
    from qutip.core.environment import system_terminator
    from qutip.solver.heom import HEOMSolver

    environment = qutip_environment(case)
    delta = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "lam" in case:
            fitted = environment.approximate("pade", Nk=terms, compute_delta=terminator)
            if terminator:
                fitted, delta = fitted
        else:
            tlist = np.linspace(0.0, 20.0 / case["wc"], 2000)
            fitted = environment.approximate("espira-I", tlist, Nr=terms, separate=False)
    if isinstance(fitted, tuple):
        fitted = fitted[0]
    hamiltonian = 0.5 * EPS * qutip.sigmaz() + 0.5 * DELTA * qutip.sigmax()
    if delta is not None:
        hamiltonian = qutip.liouvillian(hamiltonian) + system_terminator(
            qutip.sigmaz(), float(np.real(delta))
        )
    return HEOMSolver(hamiltonian, (fitted, qutip.sigmaz()), depth, **options)


def heom_run(case: dict, terms: int, depth: int, terminator: bool = False) -> dict:
    """<sigma_z> on GRID from QuTiP's HEOMSolver (:func:`heom_solver`); its seconds
    (setup + run)."""
    import qutip

    start, cpu = time.perf_counter(), time.process_time()
    solver = heom_solver(case, terms, depth, terminator, options=ODE)
    result = solver.run(qutip.basis(2, 0).proj(), GRID, e_ops=[_sz()])
    return {
        "program": "heom",
        "terms": terms,
        "depth": depth,
        "terminator": terminator,
        "seconds": time.process_time() - cpu,
        "wall_s": time.perf_counter() - start,
        "sz": np.real(np.asarray(result.expect[0])),
    }


def nonmarkov_run(
    case: dict,
    method: str,
    dt: float,
    tcut: float,
    epsrel: float,
    trace_weight: float,
    correlations=None,
) -> dict:
    """<sigma_z> at the multiples of dt from TEMPO (its window truncated with
    ``trace_weight``) or the uniform PT, for the bath of ``case`` (or ``correlations``);
    its seconds."""
    import nonmarkov as nm
    from nonmarkov.options import EngineOptions

    start, cpu = time.perf_counter(), time.process_time()
    sz = nm.operators.sigma("z")
    system = nm.System(0.5 * EPS * sz + 0.5 * DELTA * nm.operators.sigma("x"))
    bath = nonmarkov_bath(case, correlations)
    parameters = nm.TempoParameters(
        dt=dt, tcut=tcut, epsrel=epsrel, exponential_tail=method == "tail"
    )
    rho0 = nm.operators.spin_dm("up")
    if method in ("tempo", "tail"):
        dynamics = nm.tempo_compute(
            system,
            bath,
            rho0,
            0.0,
            END,
            parameters,
            progress_type="silent",
            options=EngineOptions(trace_weight=trace_weight),
        )
    else:
        pt = nm.pt_uniform_compute(bath, parameters, progress_type="silent")
        steps = int(round(END / dt))
        dynamics = nm.compute_uniform_dynamics(system, rho0, steps, pt, progress_type="silent")
    seconds, wall = time.process_time() - cpu, time.perf_counter() - start
    times, values = dynamics.expectations(sz, real=True)
    return {
        "program": "nonmarkov",
        "method": method,
        "dt": dt,
        "tcut": tcut,
        "epsrel": epsrel,
        "trace_weight": trace_weight if method in ("tempo", "tail") else 1.0,
        "seconds": seconds,
        "wall_s": wall,
        "times": np.asarray(times),
        "values": np.asarray(values),
        "sz": on_grid(np.asarray(times), np.asarray(values)),
    }


def on_grid(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    index = np.searchsorted(times, GRID - 1e-9)
    if np.any(np.abs(times[np.minimum(index, len(times) - 1)] - GRID) > 1e-9):
        raise ValueError("a run's times do not contain the comparison grid")
    return values[index]


def extrapolations(runs: list[dict]) -> list[dict]:
    """Richardson combinations of runs with the same method, tcut and epsrel: at dt,
    dt/2 (two levels, unchecked), dt, dt/2, dt/4 (order checked) and, where that check
    passes, its second (Romberg) stage; and at dt, dt/1.5 (two levels: a finer pair
    than dt, dt/2 for the cost of its finest run, leaving 1/9 of the dt^4 term of
    2 dt, dt)."""
    from nonmarkov.methods.extrapolation import NEXT_ORDER, richardson

    by_key: dict = {}
    for run in runs:
        by_key.setdefault((run["method"], run["tcut"], run["epsrel"]), {})[run["dt"]] = run
    ladders = [(2.0, 2), (2.0, 3), (1.5, 2)]  # (ratio, levels)
    combined = []
    for (method, tcut, epsrel), levels in by_key.items():
        for dt, (ratio, count) in itertools.product(sorted(levels, reverse=True), ladders):
            dts = [dt / ratio**k for k in range(count)]
            found = [[x for x in levels if abs(x - d) < 1e-9 * d] for d in dts]
            if not all(found):
                continue
            chosen = [levels[x[0]] for x in found]
            pairs = [(run["times"], run["values"]) for run in chosen]
            results = {
                f"richardson{count}": richardson(pairs, times=GRID, on_failed_check="finest")
            }
            if count == 3 and results["richardson3"].order_check == "passed":
                results["romberg"] = richardson(pairs, times=GRID, next_order=NEXT_ORDER)
            for name, result in results.items():
                combined.append(
                    {
                        "program": "nonmarkov",
                        "method": f"{method}+{name}",
                        "dt": dts[-1],
                        "dts": [run["dt"] for run in chosen],
                        "tcut": tcut,
                        "epsrel": epsrel,
                        "trace_weight": chosen[0]["trace_weight"],
                        "seconds": sum(run["seconds"] for run in chosen),
                        "wall_s": sum(run["wall_s"] for run in chosen),
                        "sz": np.real(np.asarray(result.values)),
                        "order_check": result.order_check,
                        "observed_order": result.observed_order,
                    }
                )
    return combined


def label(run: dict) -> str:
    if run["program"] == "hierarchy":
        return f"Matsubara hierarchy {run['spec']}"
    if run["program"] == "heom":
        if "formula" in run:
            return f"HEOM {run['formula']}"
        extra = ", terminator" if run.get("terminator") else ""
        return f"Nk {run['terms']}, depth {run['depth']}{extra}"
    check = f", order {run['order_check']}" if "order_check" in run else ""
    steps = ", ".join(f"{dt:.4g}" for dt in run.get("dts", [run["dt"]]))
    weight = f", trace weight {run['trace_weight']:g}" if run.get("trace_weight", 1.0) != 1 else ""
    return (
        f"{run['method']} dt {steps}, tcut {run['tcut']:g}, epsrel {run['epsrel']:g}{weight}{check}"
    )


def same_finest_run(run: dict, reference: dict) -> bool:
    """Whether ``run`` is the nonmarkov ``reference`` or another combination ending in
    the same finest run (same method, dt, tcut and epsrel)."""
    if reference["program"] != "nonmarkov" or run["program"] != "nonmarkov":
        return False
    keys = ("dt", "tcut", "epsrel")
    method = reference["method"].split("+")[0]
    return run["method"].split("+")[0] == method and all(run[k] == reference[k] for k in keys)


def cheapest(runs: list[dict], tolerance: float) -> dict | None:
    good = [run for run in runs if run["error"] <= tolerance]
    return min(good, key=lambda run: run["seconds"]) if good else None


def parse_composite(formula: str) -> list[tuple[int, int, int]]:
    """``"12/6 + 16/5 - 12/5"`` as (sign, terms, depth) of each HEOM run."""
    tokens = ["+"] + formula.split()
    if len(tokens) % 2:
        raise ValueError(f"a HEOM reference is 'Nk/depth [+|- Nk/depth ...]'; got {formula!r}")
    parsed = []
    for sign, run in zip(tokens[::2], tokens[1::2]):
        terms, depth = run.split("/")
        parsed.append(({"+": 1, "-": -1}[sign], int(terms), int(depth)))
    return parsed


def heom_composite(cache: str | None, name: str, case: dict, formula: str) -> dict:
    """The signed sum of the HEOM runs of ``formula`` (:func:`parse_composite`), each
    from ``cache`` where kept; its seconds the sum of theirs."""
    runs = [
        (sign, cached_heom(cache, name, case, terms, depth))
        for sign, terms, depth in parse_composite(formula)
    ]
    first = runs[0][1]
    return {
        **first,
        "formula": formula,
        "sz": sum(sign * run["sz"] for sign, run in runs),
        "seconds": sum(run["seconds"] for _, run in runs),
    }


def reference_run(cache: str | None, name: str, case: dict, formula: str) -> dict:
    """A reference of ``CASES``: "hierarchy K/kmax/ratio/threshold" (the Matsubara
    hierarchy of ``heom_reference.py``) or a signed sum of QuTiP runs
    (:func:`heom_composite`)."""
    if formula.startswith("hierarchy "):
        import heom_reference

        return heom_reference.cached_run(cache, name, case, formula.split()[1])
    return heom_composite(cache, name, case, formula)


def cached(cache: str | None, filename: str, compute) -> dict:
    """``compute()`` (a record with ``sz``), read from / written to ``cache/filename``
    (the reference runs are the longest; a rerun of a case need not repeat them)."""
    path = None if cache is None else os.path.join(cache, filename)
    if path is not None and os.path.exists(path):
        with open(path) as handle:
            record = json.load(handle)
        record["sz"] = np.asarray(record["sz"])
        return record
    record = compute()
    if path is not None:
        os.makedirs(cache, exist_ok=True)
        with open(path, "w") as handle:
            json.dump({**record, "sz": record["sz"].tolist()}, handle)
    return record


def cached_heom(cache: str | None, name: str, case: dict, terms: int, depth: int) -> dict:
    """:func:`heom_run` of ``case`` through :func:`cached`."""
    return cached(cache, f"heom_{name}_{terms}_{depth}.json", lambda: heom_run(case, terms, depth))


def run_case(
    name: str,
    grid: dict,
    methods: list[str],
    log,
    cache: str | None = None,
    nonmarkov_reference: bool = False,
) -> dict:
    case = dict(CASES[name])
    if nonmarkov_reference:
        case["reference"] = None
    deviations = check_conventions(CASES[name])
    log(
        f"\n## {name}: {case}\nC(t), max difference / max |C|: "
        + ", ".join(f"{key} {value:.1e}" for key, value in deviations.items())
    )
    # without a closed form: against QuTiP's numerical integral (to 40 wc), 1e-4
    deviation = deviations.get("nonmarkov_vs_closed_form", deviations["nonmarkov_vs_qutip"])
    if deviation > (1e-6 if "lam" in case else 1e-4):
        raise ValueError(f"{name}: the two programs' C(t) differ ({deviation:.1e})")
    heom_runs = []
    terms_list = case.get("heom_terms", grid["terms"]) if "lam" in case else SUPEROHMIC_TERMS
    terminators = case.get("terminators", (False, True) if "lam" in case else (False,))
    max_ados = case.get("max_ados", MAX_ADOS)
    for terms, depth, terminator in itertools.product(terms_list, grid["depths"], terminators):
        exponents = terms + 1 if "lam" in case else 2 * terms
        if math.comb(exponents + depth, depth) > max_ados:
            log(f"  heom Nk {terms}, depth {depth}: more than {max_ados} ADOs, skipped")
            continue
        heom_runs.append(heom_run(case, terms, depth, terminator))
        log(f"  heom {label(heom_runs[-1])}: {heom_runs[-1]['seconds']:.2f} s")
    nm_runs = []
    for method in methods:
        pairs = settings(case, grid, method)
        log(
            f"  nonmarkov {method} (tcut, epsrel): "
            + ", ".join(f"({t:g}, {e:g})" for t, e in pairs)
        )
        for (tcut, epsrel), dt in itertools.product(pairs, grid["dts"]):
            try:
                nm_runs.append(nonmarkov_run(case, method, dt, tcut, epsrel, grid["trace_weight"]))
            except ValueError as error:  # refused up front (e.g. too many tail modes)
                log(f"  nonmarkov {method} dt {dt:g}, tcut {tcut:g}, epsrel {epsrel:g}: {error}")
                continue
            log(f"  nonmarkov {label(nm_runs[-1])}: {nm_runs[-1]['seconds']:.2f} s")
    nm_all = nm_runs + extrapolations(nm_runs)
    if case.get("reference"):
        reference, second = (reference_run(cache, name, case, f) for f in case["reference"])
    else:  # the best two nonmarkov extrapolations, checked against each other
        # (a failed order check returns the finest run: not an independent result)
        candidates = [run for run in nm_all if run.get("order_check") != "failed"]
        ranked = sorted(
            candidates,
            key=lambda run: (
                not run["method"].endswith("romberg"),  # the second stage first
                not run["method"].endswith("richardson3"),
                run["dt"],
                run["epsrel"],
                -run["tcut"],
            ),
        )
        reference = ranked[0]
        second = next(
            run
            for run in ranked[1:]
            if (run["dt"], run["epsrel"]) != (reference["dt"], reference["epsrel"])
        )
    check = float(np.max(np.abs(reference["sz"] - second["sz"])))
    log(
        f"  reference {label(reference)} ({reference['seconds']:.1f} s); check against "
        f"{label(second)}: {check:.1e}"
    )
    if reference["program"] == "nonmarkov" and heom_runs:  # against the other program
        deepest = max(heom_runs, key=lambda run: (run["terms"], run["depth"]))
        log(
            f"  the deepest HEOM run, {label(deepest)}, against that reference: "
            f"{float(np.max(np.abs(deepest['sz'] - reference['sz']))):.1e}"
        )
    if reference["program"] == "nonmarkov" and CASES[name].get("reference"):
        for formula in CASES[name]["reference"]:
            deep = reference_run(cache, name, case, formula)
            log(
                f"  the HEOM reference run {label(deep)} against that reference: "
                f"{float(np.max(np.abs(deep['sz'] - reference['sz']))):.1e}"
            )
    for run in heom_runs + nm_all:
        run["error"] = float(np.max(np.abs(run["sz"] - reference["sz"])))
    rows = []
    for tolerance in TOLERANCES:
        # a nonmarkov reference is not a candidate (its error is 0 by definition), nor is a
        # combination of the same finest run (richardson2 at the reference's dt: the same values)
        pool = [run for run in nm_all if not same_finest_run(run, reference)]
        best = {p: cheapest(r, tolerance) for p, r in (("heom", heom_runs), ("nm", pool))}
        ratio = (
            best["nm"]["seconds"] / best["heom"]["seconds"] if best["nm"] and best["heom"] else None
        )
        rows.append({"tolerance": tolerance, **best, "ratio": ratio})
    for row in rows:
        cells = []
        for key in ("heom", "nm"):
            run = row[key]
            cells.append(
                "not reached"
                if run is None
                else f"{run['seconds']:.2f} s ({label(run)}; err {run['error']:.1e})"
            )
        ratio = "" if row["ratio"] is None else f"  nonmarkov/HEOM {row['ratio']:.1f}"
        log(f"  {row['tolerance']:.0e}: HEOM {cells[0]} | nonmarkov {cells[1]}{ratio}")
    strip = ("sz", "times", "values")
    return {
        "case": case,
        "c_deviations": deviations,
        "reference": label(reference),
        "reference_check": check,
        "runs": [{k: v for k, v in run.items() if k not in strip} for run in heom_runs + nm_all],
        "table": [
            {
                "tolerance": row["tolerance"],
                "heom": None if row["heom"] is None else label(row["heom"]),
                "heom_s": None if row["heom"] is None else row["heom"]["seconds"],
                "nonmarkov": None if row["nm"] is None else label(row["nm"]),
                "nonmarkov_s": None if row["nm"] is None else row["nm"]["seconds"],
                "ratio": row["ratio"],
            }
            for row in rows
        ],
    }


def time_step(text: str) -> float:
    """A time step from the command line, "0.1" or "0.4/3", that divides
    :data:`GRID_STEP`."""
    numerator, _, denominator = text.partition("/")
    try:
        dt = float(numerator) / float(denominator or 1)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(
            f"a time step is a number or a fraction; got {text!r}"
        ) from None
    if dt <= 0 or abs(GRID_STEP / dt - round(GRID_STEP / dt)) > 1e-9:
        raise argparse.ArgumentTypeError(
            f"the time step must divide the grid's {GRID_STEP:g}; got {text!r}"
        )
    return dt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--quick", action="store_true", help="a small grid (see above)")
    parser.add_argument(
        "--grid",
        default="rule",
        choices=list(GRIDS),
        help="'rule': tcut and epsrel per tolerance (see above); 'full', 'medium': fixed",
    )
    parser.add_argument(
        "--methods", nargs="+", default=["tempo", "tail"], choices=["tempo", "tail", "uniform"]
    )
    parser.add_argument("--json", default=None, help="write the records to this JSON file")
    parser.add_argument(
        "--reference-cache", default=None, help="directory keeping the HEOM reference runs"
    )
    parser.add_argument(
        "--tail-epsrels", nargs="+", type=float, default=None, help="epsrels of the tail runs"
    )
    parser.add_argument(
        "--tail-tcuts", nargs="+", type=float, default=None, help="tcuts of the tail runs"
    )
    parser.add_argument(
        "--dts",
        nargs="+",
        type=time_step,
        default=None,
        help="nonmarkov's time steps, each dividing 0.4 (a fraction like 0.4/3 allowed)",
    )
    parser.add_argument(
        "--trace-weight",
        type=float,
        default=TRACE_WEIGHT,
        help="TEMPO's trace_weight engine option (docs/trace_weight.md; 1: the flat norm)",
    )
    parser.add_argument(
        "--nonmarkov-reference",
        action="store_true",
        help="judge every case against nonmarkov's most accurate extrapolation (checked "
        "against the next one and the deepest HEOM run), also where HEOM has a reference",
    )
    args = parser.parse_args()
    grid = dict(GRIDS["quick" if args.quick else args.grid])
    if args.dts:
        grid["dts"] = tuple(args.dts)
    grid["trace_weight"] = args.trace_weight
    if args.tail_epsrels:
        grid["tail_epsrels"] = tuple(args.tail_epsrels)
    if args.tail_tcuts:
        for name in args.cases:
            CASES[name] = {**CASES[name], "tail_tcuts": tuple(args.tail_tcuts)}
    records = {}

    def log(text: str) -> None:
        print(text, flush=True)

    for name in args.cases:
        records[name] = run_case(
            name, grid, args.methods, log, args.reference_cache, args.nonmarkov_reference
        )
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(records, handle, indent=1, default=float)


if __name__ == "__main__":
    main()
