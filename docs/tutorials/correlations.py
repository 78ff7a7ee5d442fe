"""Two-time correlations and a spectrum from one process tensor.

``compute_correlations`` gives <B(t_b) A(t_a)> of the system for every pair
of requested times, on the process tensor of the bath. Here a two-level
emitter (transition frequency 1, radiative decay 0.4) couples through its
upper level to a super-Ohmic phonon bath; we compute g1(t) = <sigma_+(t)
sigma_-(0)> from the upper level and its Fourier transform, the line shape.
"""

import matplotlib.pyplot as plt
import numpy as np
import scipy.integrate

import nonmarkov as nm

sigma_plus, sigma_minus = nm.operators.sigma("+"), nm.operators.sigma("-")
sz = nm.operators.sigma("z")
upper = np.diag([1.0, 0.0])  # |up><up|: only the upper level displaces the phonons

system = nm.System(0.5 * sz, gammas=[0.4], lindblad_operators=[sigma_minus])
spectral_density = nm.PowerLawSD(
    alpha=0.1, zeta=3, cutoff=2.0, cutoff_type="gaussian", temperature=0.1
)
bath = nm.Bath(upper, spectral_density)
dt, num_steps = 0.2, 100
parameters = nm.TempoParameters(dt=dt, tcut=2.0, epsrel=1e-6)
process_tensor = nm.pt_tempo_compute(bath, 0.0, dt * num_steps, parameters, progress_type="silent")

times, correlations = nm.compute_correlations(
    system,
    process_tensor,
    sigma_minus,  # A at t_a = 0
    sigma_plus,  # B at t_b = 0, dt, ..., 20
    times_a=0.0,
    times_b=slice(0, num_steps + 1),
    initial_state=nm.operators.spin_dm("up"),
    progress_type="silent",
)
g1 = correlations[0]
t = times[1]
print(f"{len(t)} times; |g1(0)| = {abs(g1[0]):.4f}, |g1({t[-1]:.0f})| = {abs(g1[-1]):.4f}")

# the line shape S(w) = Re int_0^inf g1(t) e^{-i w t} dt (trapezoid rule; g1 has decayed)
omegas = np.linspace(-1.0, 3.0, 801)
spectrum = np.real(np.trapezoid(g1 * np.exp(-1j * np.outer(omegas, t)), t, axis=1))
peak = omegas[np.argmax(spectrum)]
# reorganisation energy lambda = int J(w) / w dw: the shift of the zero-phonon line
reorganisation, _ = scipy.integrate.quad(lambda w: spectral_density.spectral_density(w) / w, 0, 20)
print(f"zero-phonon line at w = {peak:.3f}; 1 - lambda = {1 - reorganisation:.3f}")
below = spectrum[omegas < peak - 0.5].sum()
above = spectrum[omegas > peak + 0.5].sum()
print(f"weight of the wings, above / below the line: {above / below:.2f}")

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
left.plot(t, g1.real, label="Re")
left.plot(t, g1.imag, label="Im")
left.set_xlabel("t")
left.set_ylabel(r"$\langle\sigma_+(t)\sigma_-(0)\rangle$")
left.legend()
right.semilogy(omegas, np.clip(spectrum, 1e-3, None))
right.axvline(1.0, color="k", linestyle=":", label="bare transition")
right.set_xlabel(r"$\omega$")
right.set_ylabel(r"$S(\omega)$")
right.legend()
fig.tight_layout()
fig.savefig("correlations.png", dpi=100)
