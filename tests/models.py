"""Models with exact solutions, and the helpers the test modules share.

Every test module takes its models from here (no test module imports another).
The exact results are written independently of the library: closed forms, or
``scipy.integrate.quad`` / ``scipy.linalg.expm`` and plain matrix products; only
the sequential PT-TEMPO reference (:func:`sequential`) uses the library.

States are ``(d, d)`` density matrices; dynamics are arrays ``(len(times), d, d)``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import scipy.integrate

import nonmarkov as nm

# --------------------------------------------------------------------------
# operators (spin basis: index 0 is sz = +1, "up")
# --------------------------------------------------------------------------

SX = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=complex)
SY = np.array([[0.0, -1.0j], [1.0j, 0.0]], dtype=complex)
SZ = np.array([[1.0, 0.0], [0.0, -1.0]], dtype=complex)
SIGMA_MINUS = np.array([[0.0, 0.0], [1.0, 0.0]], dtype=complex)  # |0> (sz=+1) -> |1>
HADAMARD = np.array([[1.0, 1.0], [1.0, -1.0]], dtype=complex) / math.sqrt(2.0)


# --------------------------------------------------------------------------
# helpers (independent of the library)
# --------------------------------------------------------------------------


def pure_state(*amplitudes: complex) -> np.ndarray:
    """|psi><psi| of the normalised vector ``amplitudes``; shape (d, d), d = len(amplitudes)."""
    psi = np.asarray(amplitudes, dtype=complex)
    psi = psi / np.linalg.norm(psi)
    return np.outer(psi, psi.conj())


def spectral_density(alpha: float, zeta: float, wc: float, cutoff_type: str):
    """J(w) = 2 alpha w^zeta wc^(1-zeta) X(w) with X = exp(-w/wc) ('exponential') or
    exp(-(w/wc)^2) ('gaussian'), written out here; a scalar function of w."""
    if cutoff_type == "exponential":
        return lambda w: 2.0 * alpha * w**zeta * wc ** (1.0 - zeta) * math.exp(-w / wc)
    if cutoff_type == "gaussian":
        return lambda w: 2.0 * alpha * w**zeta * wc ** (1.0 - zeta) * math.exp(-((w / wc) ** 2))
    raise ValueError(cutoff_type)


def g_and_p(j_function, temperature: float, t: float, upper: float) -> tuple[float, float]:
    """G(t) = int J coth(w/2T) (1 - cos wt)/w^2 dw, P(t) = int J (wt - sin wt)/w^2 dw over
    [0, upper] by ``scipy.integrate.quad`` (epsrel 1e-12); Phi(t) = G(t) - i P(t) is the
    double integral of the bath correlation function (docs/index.md, "Conventions").
    For J = 2 alpha w exp(-w/wc) at T = 0 they equal the closed forms
    G = alpha ln(1 + wc^2 t^2), P = 2 alpha (wc t - arctan(wc t))."""
    if t == 0.0:
        return 0.0, 0.0

    def coth(w):
        return 1.0 / math.tanh(w / (2.0 * temperature)) if temperature > 0 else 1.0

    def g_integrand(w):
        return j_function(w) * coth(w) * 2.0 * math.sin(0.5 * w * t) ** 2 / w**2

    def p_integrand(w):
        x = w * t
        small = x**3 / 6.0 - x**5 / 120.0
        return j_function(w) * (small if x < 1e-3 else x - math.sin(x)) / w**2

    kwargs = {"limit": 500, "epsabs": 1e-14, "epsrel": 1e-12}
    g = scipy.integrate.quad(g_integrand, 0.0, upper, **kwargs)[0]
    p = scipy.integrate.quad(p_integrand, 0.0, upper, **kwargs)[0]
    return g, p


def liouvillian(hamiltonian, gamma=0.0, lindblad=None):
    """Row-major Liouvillian -i[H, .] + gamma D[L] (D[L] = L . L^+ - {L^+ L, .}/2; no
    dissipator when ``lindblad`` is None), written here; shape (d^2, d^2), acting on
    ``rho.reshape(-1)``."""
    d = hamiltonian.shape[0]
    eye = np.eye(d)
    generator = -1j * (np.kron(hamiltonian, eye) - np.kron(eye, hamiltonian.T))
    if lindblad is not None:
        ada = lindblad.conj().T @ lindblad
        generator = generator + gamma * (
            np.kron(lindblad, lindblad.conj()) - 0.5 * np.kron(ada, eye) - 0.5 * np.kron(eye, ada.T)
        )
    return generator


# --------------------------------------------------------------------------
# spin-boson models
# --------------------------------------------------------------------------


def spin_boson(
    alpha: float = 0.3,
    temperature: float = 0.5,
    *,
    bias: float = 0.2,
    cutoff: float = 5.0,
    initial_state=None,
):
    """Spin-boson model with a driving field: H_S = 0.5 sx + bias sz, S = 0.5 sz, an ohmic
    bath J = 2 alpha w exp(-w/cutoff) at ``temperature``; the initial state is
    ``initial_state`` or by default the superposition (0.8, 0.6 e^{0.4i}).
    Returns (system, bath, rho0), rho0 of shape (2, 2). No closed-form solution: the
    tests compare methods with each other on it."""
    system = nm.System(0.5 * SX + bias * SZ)
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(alpha, 1.0, cutoff, temperature=temperature))
    if initial_state is None:
        initial_state = pure_state(0.8, 0.6 * np.exp(0.4j))
    return system, bath, initial_state


def driven_spin_boson(alpha: float = 0.2, temperature: float = 0.0):
    """:func:`spin_boson` without bias (H_S = 0.5 sx), cutoff 4, spin up at t = 0;
    (system, bath, rho0)."""
    return spin_boson(alpha, temperature, bias=0.0, cutoff=4.0, initial_state=pure_state(1.0, 0.0))


def biased_spin_boson():
    """:func:`spin_boson` with H_S = 0.5 sx + 0.3 sz, alpha 0.2, cutoff 4, T = 0.5, spin
    up at t = 0 (biased, driven, diagonal coupling at T > 0); (system, bath, rho0)."""
    return spin_boson(0.2, 0.5, bias=0.3, cutoff=4.0, initial_state=pure_state(1.0, 0.0))


def degenerate_three_level():
    """Three-level system with S = R diag(1, 0, 0) R^T (degenerate, non-diagonal) and an H
    that does not commute with S, ohmic bath (alpha 0.2, cutoff 3, T = 0.5); no exact
    solution (for ``unique`` against the full index). (system, bath, rho0), rho0 (3, 3)."""
    angle_1, angle_2 = 0.4, 0.9
    r1 = np.array(
        [
            [math.cos(angle_1), -math.sin(angle_1), 0.0],
            [math.sin(angle_1), math.cos(angle_1), 0.0],
            [0.0, 0.0, 1.0],
        ]
    )
    r2 = np.array(
        [
            [1.0, 0.0, 0.0],
            [0.0, math.cos(angle_2), -math.sin(angle_2)],
            [0.0, math.sin(angle_2), math.cos(angle_2)],
        ]
    )
    rotation = r1 @ r2
    coupling = rotation @ np.diag([1.0, 0.0, 0.0]) @ rotation.T
    hamiltonian = np.array([[0.5, 0.3, 0.0], [0.3, 0.0, 0.2j], [0.0, -0.2j, -0.4]])
    system = nm.System(hamiltonian)
    bath = nm.Bath(coupling, nm.PowerLawSD(0.2, 1.0, 3.0, temperature=0.5))
    rho0 = pure_state(1.0, 0.5j, 0.3)
    return system, bath, rho0


def sequential(system, bath, rho0, parameters, num_steps, unique=False):
    """Reference dynamics: sequential PT-TEMPO over ``num_steps`` steps of
    ``parameters.dt`` from t = 0, then ``compute_dynamics``; a Dynamics object with
    states (num_steps + 1, d, d)."""
    pt = nm.PtTempo(bath, 0.0, num_steps * parameters.dt, parameters, unique=unique)
    return nm.compute_dynamics(
        system,
        rho0,
        process_tensor=pt.get_process_tensor(progress_type="silent"),
        progress_type="silent",
    )


# --------------------------------------------------------------------------
# independent-boson model (H_S and S diagonal): exact
# --------------------------------------------------------------------------

# named independent-boson models: the parameters of :func:`independent_boson` and the
# grid (dt, steps) of :func:`independent_boson_problem`
INDEPENDENT_BOSON_MODELS = {
    "ohmic-T0": {
        "alpha": 0.2,
        "zeta": 1.0,
        "cutoff": 4.0,
        "cutoff_type": "exponential",
        "temperature": 0.0,
        "energies": (0.3, -0.3),
        "couplings": (0.5, -0.5),
        "dt": 0.2,
        "steps": 6,
    },
    "ohmic-T1": {
        "alpha": 0.2,
        "zeta": 1.0,
        "cutoff": 4.0,
        "cutoff_type": "exponential",
        "temperature": 1.0,
        "energies": (0.3, -0.3),
        "couplings": (0.5, -0.5),
        "dt": 0.2,
        "steps": 6,
    },
    "superohmic-gaussian": {
        "alpha": 0.2,
        "zeta": 3.0,
        "cutoff": 3.0,
        "cutoff_type": "gaussian",
        "temperature": 0.5,
        "energies": (0.3, -0.3),
        "couplings": (0.5, -0.5),
        "dt": 0.2,
        "steps": 6,
    },
    "three-level": {
        "alpha": 0.1,
        "zeta": 1.0,
        "cutoff": 4.0,
        "cutoff_type": "exponential",
        "temperature": 0.0,
        "energies": (0.4, 0.0, -0.7),
        "couplings": (1.0, 0.0, -0.5),
        "dt": 0.2,
        "steps": 4,
    },
}


def independent_boson(key: str = "ohmic-T0", **changes):
    """Independent-boson model ``INDEPENDENT_BOSON_MODELS[key]`` with ``changes`` to its
    parameters: H_S = diag(energies), S = diag(couplings), J(w) = 2 alpha w^zeta
    cutoff^(1-zeta) X(w) at ``temperature``; rho0 the superposition (0.8, 0.6 e^{0.4i})
    for a spin, (1, 0.8 e^{0.3i}, 0.6 e^{-1.1i}) (normalised) for three levels.
    Returns (system, bath, rho0), rho0 of shape (d, d). [H_S, S] = 0: exact dynamics
    :func:`independent_boson_exact`."""
    model = {**INDEPENDENT_BOSON_MODELS[key], **changes}
    energies, couplings = model["energies"], model["couplings"]
    correlations = nm.PowerLawSD(
        model["alpha"],
        model["zeta"],
        model["cutoff"],
        cutoff_type=model["cutoff_type"],
        temperature=model["temperature"],
    )
    system = nm.System(np.diag(energies).astype(complex))
    bath = nm.Bath(np.diag(couplings).astype(complex), correlations)
    rho0 = (
        pure_state(1.0, 0.8 * np.exp(0.3j), 0.6 * np.exp(-1.1j))
        if len(couplings) == 3
        else pure_state(0.8, 0.6 * np.exp(0.4j))
    )
    return system, bath, rho0


def independent_boson_exact(rho0, energies, couplings, j_function, temperature, times, upper):
    """Exact states of the independent-boson model (H_S = diag(E), S = diag(s)):
    rho_nm(t) = rho_nm(0) e^{-i(E_n-E_m)t} e^{-(s_n-s_m)^2 G(t) + i(s_n^2-s_m^2) P(t)},
    G, P of ``j_function`` at ``temperature`` by :func:`g_and_p` up to ``upper``
    (docs/index.md, "Conventions"). Shape (len(times), d, d).
    Ohmic at T = 0 it agrees with the closed form of G and P to 3e-14 (30 steps of 0.2,
    spin and three levels)."""
    energies = np.asarray(energies, dtype=float)
    s = np.asarray(couplings, dtype=float)
    de = np.subtract.outer(energies, energies)
    ds2 = np.subtract.outer(s, s) ** 2
    dsq = np.subtract.outer(s**2, s**2)
    states = []
    for t in times:
        g, p = g_and_p(j_function, temperature, float(t), upper)
        states.append(rho0 * np.exp(-1j * de * t) * np.exp(-ds2 * g + 1j * dsq * p))
    return np.array(states)


def independent_boson_problem(key: str):
    """``INDEPENDENT_BOSON_MODELS[key]`` with everything a test needs:
    (system, bath, rho0, parameters, end_time, exact, closed), parameters full memory
    with epsrel 1e-10, exact and closed the exact states with and without the bath at
    t_k = k dt, k = 0..steps (shape (steps + 1, d, d))."""
    model = INDEPENDENT_BOSON_MODELS[key]
    dt, steps, wc = model["dt"], model["steps"], model["cutoff"]
    energies, s, temperature = model["energies"], model["couplings"], model["temperature"]
    system, bath, rho0 = independent_boson(key)
    parameters = nm.TempoParameters(dt=dt, epsrel=1e-10)  # full memory
    times = dt * np.arange(steps + 1)
    upper = (60.0 if model["cutoff_type"] == "exponential" else 10.0) * wc
    j_function = spectral_density(model["alpha"], model["zeta"], wc, model["cutoff_type"])
    exact = independent_boson_exact(rho0, energies, s, j_function, temperature, times, upper)
    closed = independent_boson_exact(rho0, energies, s, lambda w: 0.0, temperature, times, upper)
    return system, bath, rho0, parameters, steps * dt, exact, closed


def assert_coherences_match(states, exact, closed, bound):
    """Modulus and phase of every off-diagonal element of ``states`` agree with ``exact``
    (both (n, d, d)) to ``bound``, and so do all elements; ``closed`` (the states without
    the bath) must differ visibly from ``exact``, so that the agreement is not trivial."""
    d = exact.shape[1]
    off = ~np.eye(d, dtype=bool)
    numeric, expected = states[:, off], exact[:, off]
    # the bath changes the coherences visibly, so agreement is not trivial
    assert np.max(np.abs(expected - closed[:, off])) > 1e-2
    np.testing.assert_allclose(np.abs(numeric), np.abs(expected), rtol=0, atol=bound)
    phase_error = np.angle(numeric[1:] / expected[1:])
    np.testing.assert_allclose(phase_error * np.abs(expected[1:]), 0.0, atol=bound)
    np.testing.assert_allclose(states, exact, rtol=0, atol=bound)


def independent_boson_correlation(rho0, energies, couplings, phi, operators, sides, times):
    """Exact n-time correlation of the independent-boson model (Gaussian bath, S diagonal);
    a complex number.

    ``operators`` O_1..O_n at ``times`` tau_1 <= ... <= tau_n (from the initial time),
    O_1..O_{n-1} applied from ``sides[j]`` ('left' or 'right'), O_n read out as
    Tr[O_n rho]; ``phi(u)`` = Phi(u) = G(u) - i P(u) of the bath.

    Between operator times tau_0 = 0 <= tau_1 <= ... <= tau_n the Liouville
    index is constant, (a_j, b_j) on interval I_j = [tau_{j-1}, tau_j]; an
    operator from the left changes a (weight O[a', a]), from the right b
    (weight O[b, b']); the final trace weights O_n[b_n, a_n]. Each path gets
    the system phase prod_j exp(-i (E_{a_j} - E_{b_j}) |I_j|) and the exact
    Feynman-Vernon factor

        exp(-sum_{l <= j} (s_{a_j} - s_{b_j}) [Q_jl s_{a_l} - conj(Q_jl) s_{b_l}]),

    Q_jl = int_{I_j} dt int_{I_l, t' < t} dt' C(t - t'). With
    Phi(u) = int_0^u dt int_0^t dt' C(t - t') = G(u) - i P(u) (G, P of
    :func:`g_and_p`): Q_jj = Phi(|I_j|) and, for l < j,
    Q_jl = Phi(tau_j - tau_{l-1}) + Phi(tau_{j-1} - tau_l) - Phi(tau_j - tau_l)
    - Phi(tau_{j-1} - tau_{l-1}). For one interval this is the coherence
    factor exp(-(s_a - s_b)^2 G + i (s_a^2 - s_b^2) P) of :func:`independent_boson_exact`; for
    several it is the product of such phase and cumulant factors over the
    interval pairs.
    """
    d = len(energies)
    tau = [0.0] + list(times)
    n = len(operators)
    q = np.zeros((n, n), dtype=complex)
    for j in range(1, n + 1):
        q[j - 1, j - 1] = phi(tau[j] - tau[j - 1])
        for l_ in range(1, j):
            q[j - 1, l_ - 1] = (
                phi(tau[j] - tau[l_ - 1])
                + phi(tau[j - 1] - tau[l_])
                - phi(tau[j] - tau[l_])
                - phi(tau[j - 1] - tau[l_ - 1])
            )
    total = 0.0j
    for path in itertools.product(range(d * d), repeat=n):
        a = [p // d for p in path]
        b = [p % d for p in path]
        weight = rho0[a[0], b[0]] * operators[-1][b[-1], a[-1]]
        for j in range(n - 1):
            op = operators[j]
            if sides[j] == "left":
                weight *= op[a[j + 1], a[j]] if b[j + 1] == b[j] else 0.0
            else:
                weight *= op[b[j], b[j + 1]] if a[j + 1] == a[j] else 0.0
        if weight == 0.0:
            continue
        exponent = 0.0j
        for j in range(n):
            exponent -= 1j * (energies[a[j]] - energies[b[j]]) * (tau[j + 1] - tau[j])
            x = couplings[a[j]] - couplings[b[j]]
            for l_ in range(j + 1):
                exponent -= x * (q[j, l_] * couplings[a[l_]] - np.conj(q[j, l_]) * couplings[b[l_]])
        total += weight * np.exp(exponent)
    return total


# --------------------------------------------------------------------------
# Lindblad-only spin (zero-coupling bath): exact
# --------------------------------------------------------------------------


def lindblad_problem():
    """Spin H_S = 0.5 omega sz (omega 1.3) decaying by sigma_minus at rate gamma 0.7, with a
    zero-coupling bath (alpha 0) on S = 0.5 sz; (omega, gamma, system, bath, rho0), rho0
    the superposition (0.8, 0.6 e^{0.5i}). Exact: :func:`lindblad_exact`."""
    omega, gamma = 1.3, 0.7
    system = nm.System(0.5 * omega * SZ, gammas=[gamma], lindblad_operators=[SIGMA_MINUS])
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.0, 1.0, 4.0))
    rho0 = pure_state(0.8, 0.6 * np.exp(0.5j))
    return omega, gamma, system, bath, rho0


def lindblad_exact(omega, gamma, rho0, times):
    """Exact dynamics of :func:`lindblad_problem` at ``times`` (from the initial time):
    excited population rho_00 e^{-gamma t} and coherence rho_01 e^{-gamma t/2 - i omega t},
    two arrays of shape (len(times),)."""
    excited = rho0[0, 0] * np.exp(-gamma * times)
    coherence = rho0[0, 1] * np.exp(-0.5 * gamma * times - 1j * omega * times)
    return excited, coherence


# --------------------------------------------------------------------------
# mean-field models: emitters sharing one classical cavity field
# --------------------------------------------------------------------------

SIGMA_PLUS = SIGMA_MINUS.conj().T  # |1> (sz=-1) -> |0> (sz=+1)
#: |0><2| of a three-level emitter: the field drives the transition 2 -> 0
THREE_LEVEL_RAISE = np.zeros((3, 3), dtype=complex)
THREE_LEVEL_RAISE[0, 2] = 1.0


class LaserSpin:
    """A driven, pumped two-level emitter of a laser/Dicke model (spin basis, index 0 up):

        H(t, a) = 0.5 omega (1 + modulation sin(1.5 t)) sz + coupling (a s+ + a^* s-),

    pumped by s+ at the rate pump (1 + 0.4 cos t) and decaying by s- at the rate
    ``decay``. It couples to the field eom through Tr[s- rho] (:func:`cavity_eom`).
    ``system()`` is the library's TimeDependentSystemWithField, ``liouvillian(t, a)``
    the generator (4, 4) written here with :func:`liouvillian`."""

    dimension = 2
    emission = SIGMA_MINUS

    def __init__(self, omega=1.0, coupling=0.5, modulation=0.3, pump=0.5, decay=0.2):
        self.omega, self.coupling, self.modulation = omega, coupling, modulation
        self.pump, self.decay = pump, decay

    def hamiltonian(self, t, field):
        detuning = 0.5 * self.omega * (1.0 + self.modulation * math.sin(1.5 * t))
        return detuning * SZ + self.coupling * (field * SIGMA_PLUS + np.conj(field) * SIGMA_MINUS)

    def pump_rate(self, t):
        return self.pump * (1.0 + 0.4 * math.cos(t))

    def system(self):
        return nm.TimeDependentSystemWithField(
            self.hamiltonian,
            gammas=[self.pump_rate, lambda t: self.decay],
            lindblad_operators=[lambda t: SIGMA_PLUS, lambda t: SIGMA_MINUS],
        )

    def field_free_system(self, field=0.0):
        """The same emitter with the field frozen at ``field``: a TimeDependentSystem."""
        return nm.TimeDependentSystem(
            lambda t: self.hamiltonian(t, field),
            gammas=[self.pump_rate, lambda t: self.decay],
            lindblad_operators=[lambda t: SIGMA_PLUS, lambda t: SIGMA_MINUS],
        )

    def liouvillian(self, t, field):
        return liouvillian(self.hamiltonian(t, field), self.pump_rate(t), SIGMA_PLUS) + (
            liouvillian(np.zeros((2, 2), dtype=complex), self.decay, SIGMA_MINUS)
        )


class ThreeLevelEmitter:
    """A three-level emitter: H(t, a) = diag(0.4, 0.1, -0.5) + 0.2 (|0><1| + |1><2| + h.c.)
    + coupling (a |0><2| + a^* |2><0|), decay |2><0| at the rate ``decay``; it couples
    to the field eom through Tr[|2><0| rho] = rho_02. Methods as :class:`LaserSpin`."""

    dimension = 3
    emission = THREE_LEVEL_RAISE.conj().T

    def __init__(self, coupling=0.4, decay=0.1):
        self.coupling, self.decay = coupling, decay

    def hamiltonian(self, t, field):
        hopping = 0.2 * (np.eye(3, k=1) + np.eye(3, k=-1))
        return (
            np.diag([0.4, 0.1, -0.5]).astype(complex)
            + hopping
            + self.coupling * (field * THREE_LEVEL_RAISE + np.conj(field) * self.emission)
        )

    def system(self):
        return nm.TimeDependentSystemWithField(
            self.hamiltonian,
            gammas=[lambda t: self.decay],
            lindblad_operators=[lambda t: self.emission],
        )

    def field_free_system(self, field=0.0):
        return nm.TimeDependentSystem(
            lambda t: self.hamiltonian(t, field),
            gammas=[lambda t: self.decay],
            lindblad_operators=[lambda t: self.emission],
        )

    def liouvillian(self, t, field):
        return liouvillian(self.hamiltonian(t, field), self.decay, self.emission)


def cavity_eom(emitters, frequency=0.8, loss=0.2, factor=1.0, drive=None):
    """The field eom da/dt = -(i frequency + loss) a - i factor sum_j g_j Tr[O_j rho_j] of
    a lossy cavity mode driven by ``emitters`` (each with ``coupling`` g_j and
    ``emission`` operator O_j, in the order of the states); ``factor`` N stands for N
    copies of each emitter; ``drive`` (a callable t -> complex) adds a coherent drive
    -i drive(t) of the cavity. A callable (t, states, a) -> complex."""

    def eom(t, states, field):
        total = sum(
            emitter.coupling * np.trace(emitter.emission @ state)
            for emitter, state in zip(emitters, states)
        )
        external = 0.0 if drive is None else drive(t)
        return complex(-(1j * frequency + loss) * field - 1j * (factor * total + external))

    return eom


def mean_field_ode(liouvillians, field_eom, initial_states, initial_field, times, rtol=1e-11):
    """The mean-field equations without baths, integrated by ``solve_ivp`` (DOP853):
    d vec(rho_j)/dt = L_j(t, a) vec(rho_j) for each system, da/dt = field_eom(t, states, a).

    ``liouvillians``: callables (t, a) -> (d_j^2, d_j^2); ``initial_states`` the (d_j, d_j)
    states at times[0]. Returns (list of arrays (len(times), d_j, d_j), fields
    (len(times),))."""
    dims = [state.shape[0] for state in initial_states]
    bounds = np.cumsum([0] + [d * d for d in dims])

    def unpack(y):
        states = [y[bounds[j] : bounds[j + 1]].reshape(d, d) for j, d in enumerate(dims)]
        return states, y[-1]

    def rhs(t, y):
        states, field = unpack(y)
        parts = [
            generator(t, field) @ state.reshape(-1)
            for generator, state in zip(liouvillians, states)
        ]
        return np.concatenate(parts + [[field_eom(t, states, field)]])

    y0 = np.concatenate([s.reshape(-1) for s in initial_states] + [[initial_field]]).astype(complex)
    solution = scipy.integrate.solve_ivp(
        rhs,
        (times[0], times[-1]),
        y0,
        t_eval=times,
        method="DOP853",
        rtol=rtol,
        atol=1e-13,
    )
    assert solution.success, solution.message
    columns = solution.y.T
    states = [columns[:, bounds[j] : bounds[j + 1]].reshape(-1, d, d) for j, d in enumerate(dims)]
    return states, columns[:, -1]
