"""BLAS threads against matrix size: the data behind the thread rule.

For the factorisations and products of a PT step at bond b (complex128):
the sweep's SVD of a (4b, b) site matrix, the QR of a (4b, b) block, and a
zip-up product (5b, 9b) @ (9b, b/4 + 8), each timed with one BLAS thread and
with all cores (``--threads``, default: the cores this process may use),
switching in the same process exactly as the library's rule does (through
threadpoolctl), best of ``--repeats`` interleaved samples. Prints the
speed-up of all cores over one per size and writes ``--json``.

    python benchmarks/bench_threads.py [--bonds 32 64 128 256 512] [--threads N]
        [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import scipy.linalg as sl
from threadpoolctl import ThreadpoolController


def _cases(bond: int, rng: np.random.Generator) -> dict:
    def complex_matrix(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols)) + 1j * rng.standard_normal((rows, cols))

    site = complex_matrix(4 * bond, bond)
    left, right = complex_matrix(5 * bond, 9 * bond), complex_matrix(9 * bond, bond // 4 + 8)
    return {
        "svd (4b, b)": lambda: sl.svd(site, full_matrices=False, check_finite=False),
        "qr (4b, b)": lambda: np.linalg.qr(site),
        "matmul (5b, 9b)(9b, b/4)": lambda: left @ right,
    }


def _best(call, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bonds", nargs="+", type=int, default=[32, 64, 128, 256, 512])
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    controller = ThreadpoolController()
    rng = np.random.default_rng(1)
    rows = []
    print(
        f"{'bond':>5} {'operation':<26} {'1 thread ms':>12} {args.threads:>3} threads ms  speed-up"
    )
    for bond in args.bonds:
        for name, call in _cases(bond, rng).items():
            times = {1: float("inf"), args.threads: float("inf")}
            for _ in range(args.repeats):  # interleaved, so drifts of a shared machine hit both
                for threads in times:
                    with controller.limit(limits=threads, user_api="blas"):
                        call()  # warm the pool at this setting
                        times[threads] = min(times[threads], _best(call, 1))
            one, many = times[1], times[args.threads]
            rows.append(
                dict(bond=bond, operation=name, one_s=one, many_s=many, threads=args.threads)
            )
            print(f"{bond:>5} {name:<26} {one * 1e3:>12.2f} {many * 1e3:>14.2f} {one / many:>9.2f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
