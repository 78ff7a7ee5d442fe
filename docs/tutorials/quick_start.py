"""Quick start: a driven spin coupled to an Ohmic bath, by TEMPO.

H = (Omega / 2) sigma_x + (sigma_z / 2) sum_k (g_k b_k + g_k^* b_k^dag) + H_B,
with J(w) = 2 alpha w exp(-w / wc) at temperature T, the spin initially up.
Run it with ``python docs/tutorials/quick_start.py``; it prints <sigma_z>(t)
and writes ``quick_start.png`` in the current directory.
"""

import matplotlib.pyplot as plt

import nonmarkov as nm

# the model: system, bath, initial state
system = nm.System(0.5 * nm.operators.sigma("x"))
spectral_density = nm.PowerLawSD(
    alpha=0.1, zeta=1, cutoff=5.0, cutoff_type="exponential", temperature=0.2
)
bath = nm.Bath(0.5 * nm.operators.sigma("z"), spectral_density)
initial_state = nm.operators.spin_dm("up")

# the numerical parameters: time step, memory cut, SVD truncation
parameters = nm.TempoParameters(dt=0.1, tcut=1.5, epsrel=1e-6)

dynamics = nm.tempo_compute(
    system,
    bath,
    initial_state,
    start_time=0.0,
    end_time=5.0,
    parameters=parameters,
    progress_type="silent",
)
times, sigma_z = dynamics.expectations(nm.operators.sigma("z"), real=True)

# the same spin without the bath, for comparison
closed = nm.compute_dynamics(system, initial_state, dt=0.1, num_steps=50, progress_type="silent")
_, sigma_z_closed = closed.expectations(nm.operators.sigma("z"), real=True)

print(f"{len(dynamics)} states of dimension {dynamics.states.shape[1]}")
for t, z, z0 in list(zip(times, sigma_z, sigma_z_closed))[::10]:
    print(f"t = {t:4.1f}   <sigma_z> = {z:+.4f}   (no bath: {z0:+.4f})")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(times, sigma_z, label="with the bath (TEMPO)")
ax.plot(times, sigma_z_closed, "--", label="no bath")
ax.set_xlabel("t")
ax.set_ylabel(r"$\langle\sigma_z\rangle$")
ax.legend()
fig.tight_layout()
fig.savefig("quick_start.png", dpi=100)
