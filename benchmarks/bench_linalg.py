"""The factorisations of the compiled window step, JAX (CPU or GPU) against NumPy.

One compiled TEMPO/PT-TEMPO step at bond bucket D (carrier bond r = 3,
m = 4 values per point, as in the spin-boson PT) spends its time in, per
window site:

- a QR of a (4 * 3D, 3D) complex matrix (left-to-right orthonormalisation);
- an SVD of a (3D, 4D) complex matrix (right-to-left truncation).

This script times both, complex128, for a few D: NumPy/LAPACK on the CPU
(BLAS threads as configured by the environment) and ``jax.jit`` on JAX's
default device, with every SVD algorithm the library offers (the ``svd``
engine option, ``nonmarkov.options.EngineOptions``: ``default``, ``qr``,
``divide_and_conquer``; the factorisation of
``nonmarkov.engines.jax.padding``). Each variant is checked against NumPy:
relative error of the reconstruction and of the singular values (a variant
that fails the check, or that the platform does not offer, is marked, not
hidden).

    python benchmarks/bench_linalg.py [--bonds 64 128 256 512] [--repeat 3]

``--step-memory`` instead compiles the whole PT-TEMPO window step (29 sites,
as in B3; ``nonmarkov.engines.jax.window``, compiled as the library compiles
it, ``nonmarkov.engines.jax.compiler.compile_kernel``) at each bond bucket with
each of those SVD algorithms and prints the temporary memory XLA plans for it
(``memory_analysis``), without running it (the GPU-only polar SVD, since
removed, asked for 135 GiB inside the B3 run on a GPU).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _timed(function, repeat: int) -> float:
    """Median wall time (s) of ``function()`` after one warm-up call."""
    function()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _graded_matrix(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Random complex matrix with singular values falling from 1 to 1e-12 (like a window)."""
    rank = min(rows, cols)

    def gaussian(size: int) -> np.ndarray:
        return rng.standard_normal((size, rank)) + 1j * rng.standard_normal((size, rank))

    left, right = np.linalg.qr(gaussian(rows))[0], np.linalg.qr(gaussian(cols))[0]
    values = np.logspace(0, -12, rank)
    return (left * values) @ right.conj().T


def svd_algorithms(platform: str) -> dict:
    """The library's SVD choices (``nonmarkov.config.VALID_JAX_SVD``) and the algorithm
    argument each gives the compiled steps on ``platform``; a choice the installed JAX
    does not offer maps to the exception its lookup raised."""
    from nonmarkov.config import VALID_JAX_SVD
    from nonmarkov.engines.jax import padding

    algorithms = {}
    for name in VALID_JAX_SVD:
        try:
            algorithms[name] = padding.svd_algorithm(name, platform)
        except Exception as failure:  # not in this JAX version
            algorithms[name] = failure
    return algorithms


def step_memory(bonds: list[int], algorithms: dict) -> None:
    """Print XLA's temporary memory of the compiled PT-TEMPO step per bucket and SVD."""
    import functools

    import jax.numpy as jnp

    from nonmarkov.engines.jax import compiler, window

    sites, classes, carrier = 29, 4, 3
    constants = {
        "projector": jnp.eye(classes, dtype=complex),
        "first": jnp.ones((classes, classes), complex),
        "carrier": jnp.eye(carrier)[np.array([0, 1, 1, 2])].astype(complex),
        "lags": jnp.ones((sites, carrier, classes), complex),
        "out_map": jnp.eye(classes, dtype=complex),
        "epsrel": jnp.asarray(1e-7),
    }
    print(f"{'D':>5} {'svd':20} {'temp GiB':>9} {'compile s':>9}", flush=True)
    for bond in bonds:
        arguments = (
            jnp.zeros((classes, bond), complex),
            jnp.zeros((sites, bond, classes, bond), complex),
            jnp.asarray(3, jnp.int32),
            jnp.asarray(0.0),
            jnp.ones((classes, classes), complex),
            jnp.eye(classes, dtype=complex),
            constants,
        )
        for name, algorithm in algorithms.items():
            start = time.perf_counter()
            try:
                if isinstance(algorithm, Exception):
                    raise algorithm
                step = compiler.compile_kernel(
                    functools.partial(
                        window._step,
                        memory=sites + 1,
                        max_rank=None,
                        oldest="finalize",
                        svd_algorithm=algorithm,
                    )
                )
                memory = step.lower(*arguments).compile().memory_analysis()
                text = f"{memory.temp_size_in_bytes / 2**30:9.3f}"
            except Exception as failure:  # an algorithm the platform does not offer
                text = f"{type(failure).__name__:>9}"
            print(f"{bond:5d} {name:20} {text} {time.perf_counter() - start:9.1f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bonds", nargs="+", type=int, default=[64, 128, 256, 512])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--carrier", type=int, default=3, help="carrier bond r")
    parser.add_argument("--classes", type=int, default=4, help="values m per point")
    parser.add_argument(
        "--precision",
        choices=("double", "single"),
        default="double",
        help="complex128 or complex64 factorisations (errors always "
        "against the complex128 NumPy reference)",
    )
    parser.add_argument(
        "--step-memory",
        action="store_true",
        help="XLA memory of the compiled window step instead (see above)",
    )
    args = parser.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    device = jax.devices()[0]
    from nonmarkov.engines.jax import padding

    algorithms = svd_algorithms(device.platform)
    if args.step_memory:
        step_memory(args.bonds, algorithms)
        return 0
    rng = np.random.default_rng(7)
    dtype = np.complex128 if args.precision == "double" else np.complex64
    print(
        f"JAX device: {device.platform} ({device.device_kind}); {np.dtype(dtype).name}; "
        f"r = {args.carrier}, m = {args.classes}",
        flush=True,
    )
    header = f"{'D':>5} {'operation':32} {'numpy ms':>9} {'jax ms':>9} {'np/jax':>7} {'error':>8}"
    print(header, flush=True)
    for bond in args.bonds:
        wide = args.carrier * bond
        tall_exact = _graded_matrix(rng, args.classes * wide, wide)
        flat_exact = _graded_matrix(rng, wide, args.classes * bond)
        tall, flat = tall_exact.astype(dtype), flat_exact.astype(dtype)
        numpy_qr = _timed(lambda: np.linalg.qr(tall), args.repeat)
        numpy_svd = _timed(lambda: np.linalg.svd(flat, full_matrices=False), args.repeat)
        reference = np.linalg.svd(flat_exact, compute_uv=False)

        tall_device = jax.device_put(tall)
        qr = jax.jit(lambda a: jnp.linalg.qr(a))
        q, r = qr(tall_device)
        error = np.linalg.norm(np.asarray(q) @ np.asarray(r) - tall_exact) / np.linalg.norm(tall)
        seconds = _timed(lambda: jax.block_until_ready(qr(tall_device)), args.repeat)
        label = f"qr ({tall.shape[0]}, {tall.shape[1]})"
        print(
            f"{bond:5d} {label:32} {numpy_qr * 1e3:9.1f} "
            f"{seconds * 1e3:9.1f} {numpy_qr / seconds:7.2f} {error:8.1e}",
            flush=True,
        )

        flat_device = jax.device_put(flat)
        for name, algorithm in algorithms.items():
            try:
                if isinstance(algorithm, Exception):
                    raise algorithm
                svd = jax.jit(lambda a, algorithm=algorithm: padding._svd(a, algorithm))
                weighted, s, vh = (np.asarray(part) for part in svd(flat_device))
                error = max(
                    np.linalg.norm(weighted @ vh - flat_exact) / np.linalg.norm(flat),
                    np.max(np.abs(s - reference)) / reference[0],
                )
                seconds = _timed(lambda: jax.block_until_ready(svd(flat_device)), args.repeat)
                ratio = f"{numpy_svd / seconds:7.2f}"
                jax_ms = f"{seconds * 1e3:9.1f}"
            except Exception as failure:  # an algorithm the platform does not offer
                jax_ms, ratio, error = f"{'-':>9}", f"{'-':>7}", float("nan")
                print(f"      svd {name}: {type(failure).__name__}: {str(failure)[:120]}")
            label = f"svd {name} ({wide}, {args.classes * bond})"
            print(
                f"{bond:5d} {label:32} {numpy_svd * 1e3:9.1f} {jax_ms} {ratio} {error:8.1e}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
