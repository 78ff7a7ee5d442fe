"""Equilibrium at strong coupling, and what the bath takes up.

A biased spin, H_S = (Omega/2) sigma_x + (eps/2) sigma_z, coupled through
sigma_z / 2 to an Ohmic bath at temperature T. At weak coupling it relaxes to
the Gibbs state exp(-H_S/T)/Z of its own Hamiltonian; at finite coupling the
state it relaxes to is the mean-force Gibbs state Tr_B exp(-H/T)/Z, which Gibbs
TEMPO computes in imaginary time. Then, from one real-time process tensor, the
relaxation from spin up and the change of occupation of a few bath modes.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from scipy.linalg import expm

import nonmarkov as nm

op = nm.operators
sx, sz = op.sigma("x"), op.sigma("z")
omega, bias, temperature, cutoff = 1.0, 0.4, 0.5, 5.0
hamiltonian = 0.5 * omega * sx + 0.5 * bias * sz
system = nm.System(hamiltonian)

weak = expm(-hamiltonian / temperature)
weak /= np.trace(weak)


def expect(operator, rho):
    return np.trace(operator @ rho).real


alphas = [0.005, 0.05, 0.1, 0.2, 0.3]
gibbs_states = []
start = time.perf_counter()
for alpha in alphas:
    bath = nm.Bath(0.5 * sz, nm.PowerLawSD(alpha, 1, cutoff, temperature=temperature))
    gibbs_states.append(
        nm.gibbs_tempo_compute(system, bath, nm.GibbsParameters(n_steps=20, epsrel=1e-10))
    )
print(f"Gibbs TEMPO, {len(alphas)} couplings: {time.perf_counter() - start:.1f} s")
print(f"weak-coupling Gibbs state: <sx> = {expect(sx, weak):+.4f}, <sz> = {expect(sz, weak):+.4f}")
for alpha, rho in zip(alphas, gibbs_states):
    print(
        f"alpha = {alpha:5.3f}: <sx> = {expect(sx, rho):+.4f}, <sz> = {expect(sz, rho):+.4f}, "
        f"max|rho - rho_weak| / alpha = {np.abs(rho - weak).max() / alpha:.3f}"
    )

# Real time: one process tensor, the system correlations once, then any modes.
alpha = 0.1
bath = nm.Bath(0.5 * sz, nm.PowerLawSD(alpha, 1, cutoff, temperature=temperature))
start = time.perf_counter()
process_tensor = nm.pt_tempo_compute(
    bath, 0.0, 40.0, nm.TempoParameters(dt=0.2, tcut=2.0, epsrel=1e-5)
)
bath_correlations = nm.TwoTimeBathCorrelations(system, bath, process_tensor, op.spin_dm("up"))
frequencies, dw = [0.5, 1.0, 1.5, 3.0], 0.1
occupations = [bath_correlations.occupation(w, dw, change_only=True) for w in frequencies]
print(f"PT and {len(frequencies)} mode occupations: {time.perf_counter() - start:.1f} s")
dynamics = nm.compute_dynamics(system, op.spin_dm("up"), process_tensor=process_tensor)
print(
    f"real time, alpha = {alpha}: <sx>(t = {dynamics.times[-1]:.0f}) = "
    f"{expect(sx, dynamics.states[-1]):+.4f} (mean-force Gibbs {expect(sx, gibbs_states[2]):+.4f})"
)
for w, (times, dn) in zip(frequencies, occupations):
    print(f"mode w = {w:3.1f} (band dw = {dw}): Delta n(t = {times[-1]:.0f}) = {dn[-1]:+.2e}")

fig, (ax_state, ax_bath) = plt.subplots(1, 2, figsize=(9, 3.5))
ax_state.plot(alphas, [expect(sx, rho) for rho in gibbs_states], "o-", label=r"$\sigma_x$")
ax_state.plot(alphas, [expect(sz, rho) for rho in gibbs_states], "s-", label=r"$\sigma_z$")
for s, style in ((sx, "C0"), (sz, "C1")):
    ax_state.axhline(expect(s, weak), color=style, ls="--", lw=0.8)
ax_state.set_xlabel(r"coupling $\alpha$")
ax_state.set_ylabel("mean-force Gibbs expectation")
ax_state.set_title(r"dashed: $e^{-H_S/T}/Z$")
ax_state.legend()
for w, (times, dn) in zip(frequencies, occupations):
    ax_bath.plot(times, dn, label=rf"$\omega = {w}$")
ax_bath.set_xlabel("t")
ax_bath.set_ylabel(r"$\Delta n(\omega, t)$")
ax_bath.legend()
fig.tight_layout()
fig.savefig("equilibrium.png", dpi=100)
plt.show()
