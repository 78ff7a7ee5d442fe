"""Both programs on one bath: QuTiP's Pade expansion of a Drude-Lorentz C(t) in each.

HEOM never sees the exact Drude-Lorentz C(t) of a case of ``bench_heom.py``: it runs
its Pade expansion with Nk terms, a finite sum of exponentials. This check gives
nonmarkov that same sum (``CustomCorrelations``) and compares the two programs on it,
each converged in its own parameters (HEOM in hierarchy depth, nonmarkov in dt by
Richardson / Romberg extrapolation), so that a difference between them is not the
bath's. Then, with nonmarkov alone, it measures what the Pade terms beyond Nk change:
nonmarkov's exact C(t) against its run with the Nk-term sum. Together they tell which
side a difference between the two programs on the exact bath comes from.

Per Nk (``--terms``): HEOM at ``--depths`` (its last change printed; runs kept in
``--reference-cache``, shared with ``bench_heom.py``); nonmarkov TEMPO with the tail
modes at ``--dts`` (tcut ``--tcut``, epsrel ``--epsrel``), extrapolated; and the exact
bath at the same dts. Per Nk of ``--nonmarkov-terms`` (beyond HEOM's reach here):
nonmarkov's Nk-term run against its exact one only. Errors are the largest
|<sigma_z>(t) difference| on the comparison grid of ``bench_heom.py`` (t = 0, 0.4,
.., 20); one BLAS thread.

    python benchmarks/heom_same_bath.py --case lowT --terms 2 4 6 --depths 8 10 12
        [--nonmarkov-terms 12 16 24] [--dts 0.4 0.2 0.1] [--tcut 4] [--epsrel 1e-7]
        [--reference-cache DIR] [--json out.json]
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"
os.environ.setdefault("NONMARKOV_BLAS_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import bench_heom as bench  # noqa: E402


def pade_terms(case: dict, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """(amplitudes c_k, rates nu_k) of QuTiP's Nk-term Pade expansion of the case's
    C(t) = sum_k c_k exp(-nu_k t), t >= 0, checked against QuTiP's own sum."""
    environment = bench.qutip_environment(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expansion = environment.approximate("pade", Nk=terms)
    expansion = expansion[0] if isinstance(expansion, tuple) else expansion
    amplitudes, rates = [], []
    for exponent in expansion.exponents:
        kind = str(exponent.type).rsplit(".", 1)[-1]
        real = exponent.ck if kind in ("R", "RI") else 0.0
        imaginary = exponent.ck2 if kind == "RI" else exponent.ck if kind == "I" else 0.0
        amplitudes.append(complex(real, imaginary))
        rates.append(complex(exponent.vk))
    amplitudes, rates = np.array(amplitudes), np.array(rates)
    times = np.array([0.0, 0.3, 2.0, 7.0])
    ours = np.exp(-np.outer(times, rates)) @ amplitudes
    if not np.allclose(ours, expansion.correlation_function(times), rtol=0, atol=1e-12):
        raise ValueError(f"QuTiP's Pade terms (Nk {terms}) are not read as its sum")
    return amplitudes, rates


def pade_correlations(case: dict, terms: int):
    """The Nk-term Pade C(t) as nonmarkov ``CustomCorrelations``."""
    import nonmarkov as nm

    amplitudes, rates = pade_terms(case, terms)
    return nm.CustomCorrelations(
        lambda tau: complex(np.sum(amplitudes * np.exp(-rates * tau))),
        name=f"Pade, {terms} terms",
    )


def extrapolated(runs: list[dict]) -> np.ndarray:
    """Romberg over three levels (dt, dt/2, dt/4), else Richardson over two, on the grid."""
    from nonmarkov.methods.extrapolation import NEXT_ORDER, richardson

    pairs = [(run["times"], run["values"]) for run in runs]
    extra = {"next_order": NEXT_ORDER} if len(pairs) == 3 else {}
    return np.real(np.asarray(richardson(pairs, times=bench.GRID, **extra).values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    drude_lorentz = [name for name, case in bench.CASES.items() if "lam" in case]
    parser.add_argument("--case", default="lowT", choices=drude_lorentz)
    parser.add_argument("--terms", nargs="+", type=int, default=[2, 4, 6])
    parser.add_argument("--depths", nargs="+", type=int, default=[8, 10, 12])
    parser.add_argument(
        "--nonmarkov-terms",
        nargs="+",
        type=int,
        default=[12, 16, 24],
        help="Nk run by nonmarkov only: what the Pade terms beyond Nk change",
    )
    parser.add_argument("--dts", nargs="+", type=bench.time_step, default=[0.4, 0.2, 0.1])
    parser.add_argument("--tcut", type=float, default=4.0)
    parser.add_argument("--epsrel", type=float, default=1e-7)
    parser.add_argument("--reference-cache", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    case = bench.CASES[args.case]
    if len(args.dts) not in (2, 3):
        parser.error("--dts: two (Richardson) or three (Romberg) time steps, each half the last")

    def ladder(correlations=None) -> np.ndarray:
        runs = [
            bench.nonmarkov_run(
                case, "tail", dt, args.tcut, args.epsrel, bench.TRACE_WEIGHT, correlations
            )
            for dt in args.dts
        ]
        print(
            "  nonmarkov dt "
            + ", ".join(f"{run['dt']:.4g}" for run in runs)
            + ": "
            + ", ".join(f"{run['seconds']:.1f}" for run in runs)
            + " s",
            flush=True,
        )
        return extrapolated(runs)

    def largest(difference: np.ndarray) -> float:
        return float(np.max(np.abs(difference)))

    print(f"## {args.case}: {case}; tcut {args.tcut:g}, epsrel {args.epsrel:g}", flush=True)
    exact = ladder()
    records = []
    for terms in args.terms:
        print(f"Nk {terms}:", flush=True)
        heom = [
            bench.cached_heom(args.reference_cache, args.case, case, terms, depth)
            for depth in args.depths
        ]
        pade = ladder(pade_correlations(case, terms))
        record = {
            "terms": terms,
            "heom_depths": args.depths,
            "heom_seconds": [run["seconds"] for run in heom],
            "heom_last_depth_change": largest(heom[-1]["sz"] - heom[-2]["sz"]),
            "nonmarkov_vs_heom": [largest(pade - run["sz"]) for run in heom],
            "pade_vs_exact": largest(pade - exact),
        }
        records.append(record)
        print(
            f"  HEOM depth {args.depths[-2]} -> {args.depths[-1]}: "
            f"{record['heom_last_depth_change']:.1e}; nonmarkov against HEOM at depth "
            + ", ".join(f"{d}: {e:.1e}" for d, e in zip(args.depths, record["nonmarkov_vs_heom"]))
            + f"; the Pade terms beyond {terms} (nonmarkov, exact C - Nk-term C): "
            f"{record['pade_vs_exact']:.1e}",
            flush=True,
        )
    tails = {}
    for terms in args.nonmarkov_terms:
        print(f"Nk {terms} (nonmarkov only):", flush=True)
        tails[terms] = largest(ladder(pade_correlations(case, terms)) - exact)
        print(f"  the Pade terms beyond {terms}: {tails[terms]:.1e}", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "case": args.case,
                    "tcut": args.tcut,
                    "epsrel": args.epsrel,
                    "dts": args.dts,
                    "terms": records,
                    "pade_tail": tails,
                },
                handle,
                indent=1,
            )


if __name__ == "__main__":
    main()
