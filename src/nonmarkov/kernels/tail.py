"""Kernels of the exponential tail: the memory beyond a window's cut held by modes.

Where the discretised correlation beyond lag K is a sum of geometric terms,
eta_j = sum_m b_m r_m^(j - K - 1) (:func:`fit_geometric` finds the terms: exactly
where C is a sum of exponentials, to a tolerance for any other bath), it couples a new
point k (row value x_k = s+ - s-) to every older point k' (lag j > K) by

    exp(sum_m alpha_k beta_m(k') r_m^(j - K - 1)),   alpha_k = -x_k,

with a rate r_m and an injection beta_m(class) per mode (its amplitude when
the point leaves the window, at lag K + 1). A sum of products
alpha beta r^j is what one bosonic mode per term gives: with [a, a^dag] = 1,
<0| e^{alpha a} r^{j a^dag a} e^{beta a^dag} |0> = exp(alpha beta r^j). So a
point that leaves the window is put into the modes (e^{beta a^dag}),
the modes decay by r per step (r^{a^dag a}), a new point is coupled by
e^{alpha a}, and a read-out closes the modes with the vacuum <0|: the
product over all pairs comes out exactly, up to the truncation of the mode
space to occupations n_1 + ... + n_M <= depth (a hierarchy, as in the
hierarchical equations of motion; the coupling e^{alpha a} is exact there,
the injection loses the terms beyond the depth).

Here: the fit, the index set, the per-row coupling matrices and the per-class
merge matrices (host NumPy arrays, built once per run), and the depth rule.
"""

from __future__ import annotations

import itertools
import math

import numpy as default_np
import scipy.sparse

#: the largest mode space a run may hold (occupation vectors)
MAX_TAIL_STATES = 1000
#: the deepest hierarchy the depth rule picks
MAX_DEPTH = 24
#: the most geometric terms a fit may use
MAX_FIT_TERMS = 16


def fit_geometric(
    samples: default_np.ndarray, tolerance: float
) -> tuple[default_np.ndarray, default_np.ndarray]:
    """The fewest geometric terms f_i ~ sum_m b_m r_m^i (|r_m| < 1) of a sequence.

    Matrix pencil: the real and imaginary parts' Hankel matrices share the rates,
    so their stacked row space is spanned by (r_m^i)_i; its leading M right
    singular vectors give the rates as the eigenvalues of their shift (a real
    matrix: the rates come in conjugate pairs), the amplitudes by least squares.
    M grows from 1 until sum_i |f_i - fit_i| <= ``tolerance`` with every |r_m| < 1.

    Parameters
    ----------
    samples : (N,) complex sequence f_0 .. f_{N-1}.
    tolerance : largest allowed sum of the residual's moduli.

    Returns
    -------
    amplitudes b (M,) complex, rates r (M,) complex; M = 0 where sum |f_i| is
    within the tolerance. A ``ValueError`` where no M <= ``MAX_FIT_TERMS`` fits.
    """
    samples = default_np.asarray(samples, dtype=complex)
    if float(default_np.sum(default_np.abs(samples))) <= tolerance:
        return default_np.zeros(0, dtype=complex), default_np.zeros(0, dtype=complex)
    size = len(samples)
    columns = min(size // 2, 16 * MAX_FIT_TERMS)
    rows = default_np.arange(size - columns)[:, None] + default_np.arange(columns + 1)[None, :]
    hankel = default_np.vstack([samples.real[rows], samples.imag[rows]])
    row_space = default_np.linalg.svd(hankel, full_matrices=False)[2].T  # (columns + 1, .)
    powers = default_np.arange(size)[:, None]
    best = math.inf
    for count in range(1, min(MAX_FIT_TERMS, columns) + 1):
        basis = row_space[:, :count]
        shift = default_np.linalg.lstsq(basis[:-1], basis[1:], rcond=None)[0]
        rates = default_np.linalg.eigvals(shift).astype(complex)
        if default_np.any(default_np.abs(rates) >= 1.0):
            continue
        vandermonde = rates[None, :] ** powers
        amplitudes = default_np.linalg.lstsq(vandermonde, samples, rcond=None)[0]
        residual = float(default_np.sum(default_np.abs(samples - vandermonde @ amplitudes)))
        best = min(best, residual)
        if residual <= tolerance:
            return amplitudes, rates
    raise ValueError(
        f"the memory beyond the cut is not {MAX_FIT_TERMS} or fewer decaying exponentials "
        f"to {tolerance:.2g} (best: {best:.2g}); use a longer memory cut (tcut) or "
        "exponential_tail=False"
    )


def occupations(num_modes: int, depth: int) -> list[tuple[int, ...]]:
    """The occupation vectors n (num_modes,) with sum(n) <= depth; the vacuum first."""
    return sorted(
        (n for n in itertools.product(range(depth + 1), repeat=num_modes) if sum(n) <= depth),
        key=lambda n: (sum(n), n),
    )


def _lowering(states: list[tuple[int, ...]], mode: int) -> scipy.sparse.csr_matrix:
    """a_mode on the truncated space, (D, D) sparse: a |n> = sqrt(n_mode) |n - e_mode>."""
    position = {n: i for i, n in enumerate(states)}
    rows, columns, values = [], [], []
    for column, n in enumerate(states):
        if n[mode] > 0:
            rows.append(position[n[:mode] + (n[mode] - 1,) + n[mode + 1 :]])
            columns.append(column)
            values.append(math.sqrt(n[mode]))
    size = len(states)
    return scipy.sparse.csr_matrix((values, (rows, columns)), shape=(size, size))


def _exp_nilpotent(generator: scipy.sparse.spmatrix, depth: int) -> default_np.ndarray:
    """exp(X) for X that changes the total occupation by one (X^(depth+1) = 0 on the
    truncated space): the series to X^depth / depth!, dense (D, D)."""
    term = default_np.eye(generator.shape[0], dtype=complex)
    total = term.copy()
    for n in range(1, depth + 1):
        term = (generator @ term) / n
        total += term
    return total


def tail_depth(
    rates: default_np.ndarray,
    injections: default_np.ndarray,
    row_differences: default_np.ndarray,
    epsrel: float,
) -> int:
    """The smallest depth L >= 1 with u^(L+1) / (L+1)! <= epsrel: the terms that need
    more than L quanta in the modes at once are of that order, for u the larger of two
    bounds on the exponent the quanta open at one time carry.

    - One step: a new point couples (x) to all the quanta the earlier points put in,
      at most max|x| sum_m max_c|beta_m(c)| / (1 - |r_m|) (large where one step's
      coupling to the tail is large: coarse dt).
    - One moment: a quantum of mode m goes in with a point that leaves (beta_m(c)) and
      comes out with the coupling of a point j steps later (r_m^j); for a history that
      holds its class and row, the quanta open across one moment carry
      max|x| max_c |sum_m beta_m(c) / (1 - r_m)^2| (the modes' parts add before the
      modulus, as the couplings they fit do). This one does not shrink with dt
      (beta ~ dt^2, 1 - r ~ dt): it is about int (t - t_cut) C(t) dt beyond the cut."""
    if len(rates) == 0:
        return 1
    largest_row = float(default_np.max(default_np.abs(row_differences)))
    largest_injection = default_np.max(default_np.abs(injections), axis=1)  # (M,)
    per_step = largest_row * float(
        default_np.sum(largest_injection / (1.0 - default_np.abs(rates)))
    )
    open_quanta = default_np.sum(injections / (1.0 - rates[:, None]) ** 2, axis=0)  # (m,)
    per_moment = largest_row * float(default_np.max(default_np.abs(open_quanta)))
    total = max(per_step, per_moment)
    for depth in range(1, MAX_DEPTH + 1):
        if total ** (depth + 1) / math.factorial(depth + 1) <= epsrel:
            return depth
    return MAX_DEPTH


def tail_operators(
    rates: default_np.ndarray,
    injections: default_np.ndarray,
    row_differences: default_np.ndarray,
    depth: int,
) -> tuple[default_np.ndarray, default_np.ndarray]:
    """The matrices of the modes on their truncated space (D states, ``occupations``).

    Parameters
    ----------
    rates : (M,) decay of each mode per step.
    injections : (M, m) amplitude beta_m of each class of a point leaving the window
        (its coupling at lag K + 1, the first through the modes).
    row_differences : (r,) the values x = s+ - s- of the carrier rows.
    depth : the largest total occupation kept.

    Returns
    -------
    couple : (r, D, D) e^{-x sum_m a_m} per row x (a new point's coupling).
    merge : (m, D, D) e^{sum_m beta_m(c) a_m^dag} r^{a^dag a} per class c
        (the modes decay by one step, then take the point that leaves the window).
    Without modes (M = 0) both are ones, D = 1.
    """
    num_modes = len(rates)
    if num_modes == 0:
        return (
            default_np.ones((len(row_differences), 1, 1), dtype=complex),
            default_np.ones((injections.shape[1], 1, 1), dtype=complex),
        )
    states = occupations(num_modes, depth)
    if len(states) > MAX_TAIL_STATES:
        raise ValueError(
            f"the bath's tail needs {num_modes} modes to depth {depth}: {len(states)} states "
            f"(at most {MAX_TAIL_STATES}); use a longer memory cut (tcut), so that fewer "
            "Matsubara terms outlast it"
        )
    lowering = [_lowering(states, mode) for mode in range(num_modes)]
    # each mode's coupling and its amplitude scaled to the same size (their product is what
    # counts): the amplitude a mode builds up is its injection summed over its lifetime,
    # beta / (1 - |r|); so the mode states carry the tail's weight evenly, and the
    # window's truncation (relative to the largest singular value) sees them at their
    # importance (scaling by the injection alone kept bonds ~1.5-2x larger at low T)
    entering = default_np.max(default_np.abs(injections), axis=1) / (1.0 - default_np.abs(rates))
    largest_row = float(default_np.max(default_np.abs(row_differences)))
    scales = default_np.sqrt(
        default_np.where(entering > 0, entering / max(largest_row, 1e-300), 1.0)
    )
    total = sum(scale * lower for scale, lower in zip(scales, lowering))
    couple = default_np.array([_exp_nilpotent(-x * total, depth) for x in row_differences])
    decay = default_np.array(
        [default_np.prod([rates[mode] ** n[mode] for mode in range(num_modes)]) for n in states]
    )
    merge = []
    for c in range(injections.shape[1]):
        raising = sum(
            injections[mode, c] / scales[mode] * lowering[mode].T for mode in range(num_modes)
        )
        merge.append(_exp_nilpotent(scipy.sparse.csr_matrix(raising), depth) * decay[None, :])
    return couple.astype(complex), default_np.array(merge, dtype=complex)
