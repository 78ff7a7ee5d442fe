"""A reference for the Drude-Lorentz cases of ``bench_heom.py``: a hierarchy on the exact
Matsubara series, independent of nonmarkov and of QuTiP's Pade sums.

QuTiP's hierarchies run a Pade sum of C(t) with Nk terms and a total-depth cut. The
Drude-Lorentz C(t) is log-singular at t = 0 (J ~ 1/w), so the sum converges slowly
(at T 0.1, Nk 16 is still ~1e-5 off in <sigma_z>) while the hierarchy's size grows as
C(Nk + 1 + depth, depth). This hierarchy keeps the bath exact to a controlled order
and spends auxiliary density operators (ADOs) only where they are large:

- bath: C(t) = sum_j c_j exp(-nu_j t) with the Drude pole and the Matsubara terms
  k <= K exactly; the terms K < k <= kmax merged in blocks (k, ratio k], each one
  exponential with its block's sum of c/nu and of c/nu^2 (or two, with the sums of
  c/nu^p, p = 1 .. 4: ``points`` 2); the terms beyond kmax a quasi-static terminator
  at every ADO (below).
- index set: ADO n (occupations n_j) kept while prod_j A_j^n_j / sqrt(n_j!) >=
  ``threshold``, A_j = 2 |S| sqrt|c_j| / nu_j (the size of a scaled ADO quasi-static in
  its parent), and only if all its parents n - e_j are kept.
- closure: a child m missing from the set is taken quasi-static, driven by all its
  kept parents through the resolvent int_0^inf exp(-(m.nu) t) exp(L_S t) X
  exp(-L_S t) dt of the system Liouvillian L_S (Redfield-like: exact for a child whose
  parents move with L_S only), and fed back to them.
- propagation: ``scipy.sparse.linalg.expm_multiply`` of the sparse generator onto the
  comparison grid (no ODE tolerance).

Scaled ADOs rho_n / prod_j sqrt(n_j! |c_j|^n_j); with C(t) = <X(t) X(0)> (QuTiP's
convention, checked against QuTiP's Matsubara exponents below):
d rho_n/dt = (L_S - n.nu) rho_n - i sum_j sqrt(n_j + 1) s_j [S, rho_{n+e_j}]
             - i sum_j sqrt(n_j) / s_j (c_j S rho_{n-e_j} - c_j^* rho_{n-e_j} S), s_j = sqrt|c_j|.

Checks (``--check``): with QuTiP's Pade exponents, a total-depth cut and no closure it
reproduces QuTiP's ``HEOMSolver`` (to its ODE tolerance, 1e-9). Convergence: each run
of ``--runs`` is printed against the others (parameters K/kmax/ratio/threshold and
optionally /points).

    python benchmarks/heom_reference.py --case lowT --runs 8/1024/2/3e-4/2
        8/1024/1.414/3e-4/2 [--check] [--reference-cache DIR] [--json out.json]

(the T 0.1 reference of ``bench_heom.py`` and its check: 336 s and 607 s; at T 1
``--case intermediate --runs 2/1024/1.19/3e-4 2/1024/1.19/1e-4`` takes 22 s and 83 s)
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sparse  # noqa: E402
from scipy.sparse.linalg import expm_multiply  # noqa: E402

import bench_heom as bench  # noqa: E402

#: Matsubara terms summed explicitly in the terminator beyond kmax (the rest ~ 1/k^2)
TAIL_TERMS = 200_000


def matsubara_amplitude(case: dict, rate: np.ndarray) -> np.ndarray:
    """c_k of the Matsubara term at rate nu_k = 2 pi k T (QuTiP's Drude-Lorentz
    convention: 4 lambda gamma T nu_k / (nu_k^2 - gamma^2))."""
    gamma = bench.DELTA
    return 4 * case["lam"] * gamma * case["T"] * rate / (rate**2 - gamma**2)


def exponents(
    case: dict, K: int, kmax: int, ratio: float, points: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """(c_j, nu_j): the Drude pole, Matsubara terms k <= K, and the blocks of K < k <=
    kmax (:func:`matsubara_amplitude`), each block's exponential with its sum of c/nu
    and c/nu^2; checked against QuTiP's Matsubara expansion for k <= K."""
    lam, gamma, temperature = case["lam"], bench.DELTA, case["T"]
    rates = [gamma] + [2 * math.pi * k * temperature for k in range(1, K + 1)]
    amplitudes = [lam * gamma * (1 / math.tan(gamma / (2 * temperature)) - 1j)]
    amplitudes += list(matsubara_amplitude(case, np.array(rates[1:])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expansion = bench.qutip_environment(case).approximate("matsubara", Nk=K)
    expansion = expansion[0] if isinstance(expansion, tuple) else expansion
    times = np.array([0.0, 0.3, 2.0, 7.0])
    ours = np.exp(-np.outer(times, rates)) @ np.array(amplitudes)
    if not np.allclose(ours, expansion.correlation_function(times), rtol=1e-12, atol=0):
        raise ValueError("the Matsubara terms differ from QuTiP's expansion")
    low = K
    while low < kmax:
        high = min(kmax, max(low + 1, int(round(low * ratio))))
        rate = 2 * math.pi * temperature * np.arange(low + 1, high + 1)
        amplitude = matsubara_amplitude(case, rate)
        for merged_rate, merged_amplitude in merge(amplitude, rate, points):
            rates.append(merged_rate)
            amplitudes.append(merged_amplitude)
        low = high
    return np.array(amplitudes, complex), np.array(rates, float)


def merge(amplitudes: np.ndarray, rates: np.ndarray, points: int) -> list[tuple[float, float]]:
    """(rate, amplitude) of ``points`` exponentials (1 or 2) with the same sums of
    c/nu^p, p = 1 .. 2 points, as the terms (c_k, nu_k) (c_k > 0): Gauss quadrature of
    the weights c_k / nu_k at the nodes 1 / nu_k."""
    weights, nodes = amplitudes / rates, 1.0 / rates
    moments = [float(np.sum(weights * nodes**p)) for p in range(2 * points)]
    if points == 1 or len(rates) < 2:
        return [(moments[0] / moments[1], moments[0] ** 2 / moments[1])]
    # x^2 + b x + c orthogonal to 1 and x under the weights
    b, c = np.linalg.solve(
        [[moments[1], moments[0]], [moments[2], moments[1]]], [-moments[2], -moments[3]]
    )
    roots = np.roots([1.0, b, c]).real
    node_weights = np.linalg.solve([[1.0, 1.0], roots], moments[:2])
    return [(1.0 / x, w / x) for x, w in zip(roots, node_weights)]


def tail_sums(case: dict, kmax: int, shifts: np.ndarray) -> np.ndarray:
    """sum_{k > kmax} c_k / (z + nu_k) for each complex z of ``shifts``."""
    rate = 2 * math.pi * case["T"] * np.arange(kmax + 1, kmax + TAIL_TERMS + 1)
    amplitude = matsubara_amplitude(case, rate)
    z = np.asarray(shifts, complex).reshape(-1, 1)
    sums = (amplitude / (z + rate)).sum(axis=1).reshape(np.shape(shifts))
    # beyond: c_k / (z + nu_k) -> 4 lambda gamma T / nu_k^2 = a / k^2
    a = 4 * case["lam"] * bench.DELTA * case["T"] / (2 * math.pi * case["T"]) ** 2
    return sums + a / (kmax + TAIL_TERMS + 0.5)


def index_set(
    amplitudes: np.ndarray,
    rates: np.ndarray,
    coupling_norm: float,
    threshold: float | None = None,
    max_depth: int | None = None,
) -> list[tuple[int, ...]]:
    """ADO occupations: total depth <= ``max_depth``, or the importance estimate
    prod_j A_j^n_j / sqrt(n_j!) >= ``threshold``; closed downward; level by level."""
    modes = len(amplitudes)
    weight = 2 * coupling_norm * np.sqrt(np.abs(amplitudes)) / rates
    zero = (0,) * modes
    kept = {zero: 1.0}
    level = [zero]
    while level:
        found: dict[tuple[int, ...], float] = {}
        for parent in level:
            for j in range(modes):
                child = parent[:j] + (parent[j] + 1,) + parent[j + 1 :]
                if child in found or child in kept:
                    continue
                if max_depth is not None:
                    if sum(child) > max_depth:
                        continue
                    estimate = 1.0
                else:
                    estimate = kept[parent] * weight[j] / math.sqrt(child[j])
                    if estimate < threshold:
                        continue
                parents = (
                    child[:i] + (child[i] - 1,) + child[i + 1 :] for i in range(modes) if child[i]
                )
                if all(p in kept for p in parents):
                    found[child] = estimate
        kept.update(found)
        level = list(found)
    return list(kept)


def generator(
    hamiltonian: np.ndarray,
    coupling: np.ndarray,
    amplitudes: np.ndarray,
    rates: np.ndarray,
    labels: list[tuple[int, ...]],
    closure: bool = True,
    tail=None,
) -> sparse.csr_matrix:
    """The hierarchy's generator on the scaled ADOs (d^2 N x d^2 N, row-major vec:
    vec(A rho B) = (A kron B^T) vec(rho)); ``closure``: the missing children
    quasi-static; ``tail(rate, shifts)``: the terminator sums beyond kmax."""
    d = hamiltonian.shape[0]
    eye = np.eye(d)
    system = -1j * (np.kron(hamiltonian, eye) - np.kron(eye, hamiltonian.T))
    left, right = np.kron(coupling, eye), np.kron(eye, coupling.T)
    commutator = left - right
    eigenvalues, vectors = np.linalg.eig(system)
    inverse = np.linalg.inv(vectors)
    shifts = eigenvalues[:, None] - eigenvalues[None, :]
    left_eig, right_eig = inverse @ left @ vectors, inverse @ right @ vectors

    def resolvent(rate: float, amplitude: complex) -> np.ndarray:
        # int_0^inf exp(-rate t) exp(L_S t) (c S . - c^* . S) exp(-L_S t) dt
        driven = amplitude * left_eig - np.conj(amplitude) * right_eig
        return vectors @ (driven / (rate - shifts)) @ inverse

    index = {label: i for i, label in enumerate(labels)}
    scale = np.sqrt(np.abs(amplitudes))
    rows: list[int] = []
    cols: list[int] = []
    blocks: list[np.ndarray] = []
    missing = set()
    for i, label in enumerate(labels):
        rate = float(np.dot(label, rates))
        diagonal = system - rate * np.eye(d * d)
        for j in range(len(rates)):
            child = label[:j] + (label[j] + 1,) + label[j + 1 :]
            k = index.get(child)
            if k is not None:
                rows += [i, k]
                cols += [k, i]
                blocks.append(-1j * math.sqrt(child[j]) * scale[j] * commutator)
                driven = amplitudes[j] * left - np.conj(amplitudes[j]) * right
                blocks.append(-1j * math.sqrt(child[j]) / scale[j] * driven)
            elif closure:
                missing.add(child)
        if tail is not None:  # the Matsubara terms beyond kmax (real c_k)
            driven = vectors @ ((left_eig - right_eig) * tail(rate, shifts)) @ inverse
            diagonal = diagonal - commutator @ driven
        rows.append(i)
        cols.append(i)
        blocks.append(diagonal)
    for child in missing:
        rate = float(np.dot(child, rates))
        parents = []
        for i in range(len(rates)):
            if child[i]:
                p = index.get(child[:i] + (child[i] - 1,) + child[i + 1 :])
                if p is not None:
                    # the child from parent p, up to the factor of the parent it feeds
                    feed = math.sqrt(child[i]) / scale[i] * resolvent(rate, amplitudes[i])
                    parents.append((i, p, commutator @ feed))
        for j, n, _ in parents:
            for _, p, fed in parents:
                rows.append(n)
                cols.append(p)
                blocks.append(-math.sqrt(child[j]) * scale[j] * fed)
    size = d * d
    stacked = np.array(blocks)
    r = np.repeat((np.array(rows)[:, None, None] * size + np.arange(size)[None, :, None]), size, 2)
    c = np.repeat((np.array(cols)[:, None, None] * size + np.arange(size)[None, None, :]), size, 1)
    n = len(labels) * size
    return sparse.csr_matrix((stacked.ravel(), (r.ravel(), c.ravel())), shape=(n, n))


def propagate(matrix: sparse.csr_matrix, rho0: np.ndarray, times: np.ndarray) -> np.ndarray:
    """<sigma_z>(times) from rho0 (t = times[0] = 0, equally spaced times)."""
    vector = np.zeros(matrix.shape[0], complex)
    vector[: rho0.size] = rho0.ravel()
    states = expm_multiply(
        matrix, vector, start=times[0], stop=times[-1], num=len(times), endpoint=True
    )
    return np.real(states[:, 0] - states[:, 3])


def spin_boson() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """H_S, the coupling operator sigma_z and spin up, as in ``bench_heom.py``."""
    sz = np.diag([1.0, -1.0])
    sx = np.array([[0.0, 1.0], [1.0, 0.0]])
    return 0.5 * bench.EPS * sz + 0.5 * bench.DELTA * sx, sz, np.diag([1.0, 0.0]).astype(complex)


def parse(spec: str) -> tuple[int, int, float, float, int]:
    """ "K/kmax/ratio/threshold[/points]" as numbers (points per block, 1 or 2)."""
    try:
        fields = spec.split("/")
        if len(fields) not in (4, 5):
            raise ValueError
        k, kmax, ratio, threshold = fields[:4]
        points = int(fields[4]) if len(fields) == 5 else 1
        parsed = int(k), int(kmax), float(ratio), float(threshold), points
    except ValueError:
        raise ValueError(
            f"a hierarchy is 'K/kmax/ratio/threshold[/points]'; got {spec!r}"
        ) from None
    if parsed[0] < 0 or parsed[1] < parsed[0] or parsed[2] <= 1 or parsed[3] <= 0:
        raise ValueError(f"need 0 <= K <= kmax, ratio > 1, threshold > 0; got {spec!r}")
    if points not in (1, 2):
        raise ValueError(f"points per merged block are 1 or 2; got {spec!r}")
    return parsed


def run(case: dict, spec: str) -> dict:
    """<sigma_z> on ``bench_heom.GRID`` from the hierarchy ``spec`` of a Drude-Lorentz
    case; its CPU seconds (building and propagating)."""
    if "lam" not in case:
        raise ValueError("the Matsubara hierarchy is for the Drude-Lorentz cases")
    k, kmax, ratio, threshold, points = parse(spec)
    start = time.process_time()
    amplitudes, rates = exponents(case, k, kmax, ratio, points)
    hamiltonian, coupling, rho0 = spin_boson()
    labels = index_set(amplitudes, rates, np.linalg.norm(coupling, 2), threshold)
    sums: dict[float, np.ndarray] = {}

    def tail(rate: float, shifts: np.ndarray) -> np.ndarray:
        if rate not in sums:
            sums[rate] = tail_sums(case, kmax, rate - shifts)
        return sums[rate]

    matrix = generator(hamiltonian, coupling, amplitudes, rates, labels, tail=tail)
    sz = propagate(matrix, rho0, bench.GRID)
    return {
        "program": "hierarchy",
        "spec": spec,
        "modes": len(rates),
        "ados": len(labels),
        "seconds": time.process_time() - start,
        "sz": sz,
    }


def cached_run(cache: str | None, name: str, case: dict, spec: str) -> dict:
    """:func:`run` through ``bench_heom.cached``."""
    filename = f"hierarchy_{name}_{spec.replace('/', '_')}.json"
    return bench.cached(cache, filename, lambda: run(case, spec))


def check_against_qutip(case: dict, terms: int = 2, depth: int = 6) -> float:
    """Largest |<sigma_z>| difference to QuTiP's HEOMSolver on its Pade exponents with
    the same total-depth cut and no closure."""
    from heom_same_bath import pade_terms

    amplitudes, rates = pade_terms(case, terms)
    hamiltonian, coupling, rho0 = spin_boson()
    labels = index_set(amplitudes, np.real(rates), 1.0, max_depth=depth)
    matrix = generator(hamiltonian, coupling, amplitudes, np.real(rates), labels, closure=False)
    ours = propagate(matrix, rho0, bench.GRID)
    return float(np.max(np.abs(ours - bench.heom_run(case, terms, depth)["sz"])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--case", default="lowT", choices=[n for n, c in bench.CASES.items() if "lam" in c]
    )
    parser.add_argument("--runs", nargs="+", required=True, help="K/kmax/ratio/threshold")
    parser.add_argument(
        "--check", action="store_true", help="first reproduce QuTiP (Pade 2, depth 6)"
    )
    parser.add_argument("--reference-cache", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    for spec in args.runs:
        parse(spec)
    case = bench.CASES[args.case]
    if args.check:
        print(f"Pade Nk 2, depth 6, no closure, against QuTiP: {check_against_qutip(case):.1e}")
    records = []
    for spec in args.runs:
        record = cached_run(args.reference_cache, args.case, case, spec)
        against = " | ".join(
            f"vs {other['spec']} {np.max(np.abs(record['sz'] - other['sz'])):.1e}"
            for other in records
        )
        print(
            f"{spec}: {record['modes']} modes, {record['ados']} ADOs, "
            f"{record['seconds']:.1f} s  {against}",
            flush=True,
        )
        records.append(record)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([{**r, "sz": r["sz"].tolist()} for r in records], handle, indent=1)


if __name__ == "__main__":
    main()
