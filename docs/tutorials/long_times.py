"""Long times and the steady state with a uniform process tensor.

For a stationary bath with a memory cut, one process-tensor step repeats at
every time: ``pt_uniform_compute`` builds it for about 2K window steps
(K = dkmax), whatever the number of steps it is used for. The dynamics then
runs in constant memory, and ``compute_steady_state`` gives the state reached
after infinite time without running there. The truncation of the process
tensor (``epsrel``) loses a little of the trace at every step; over 2000 steps
that adds up to a few 1e-3, so expectation values are divided by Tr rho(t).
"""

import time

import matplotlib.pyplot as plt

import nonmarkov as nm

sx, sz = nm.operators.sigma("x"), nm.operators.sigma("z")
system = nm.System(0.5 * sx + 0.25 * sz)
bath = nm.Bath(
    0.5 * sz,
    nm.PowerLawSD(alpha=0.1, zeta=1, cutoff=5.0, cutoff_type="exponential", temperature=0.5),
)
parameters = nm.TempoParameters(dt=0.1, dkmax=15, epsrel=1e-6)

start = time.perf_counter()
uniform_pt = nm.pt_uniform_compute(bath, parameters, progress_type="silent")
print(f"uniform process tensor in {time.perf_counter() - start:.1f} s")

num_steps = 2000  # t = 200: far longer than the bath's memory (K dt = 1.5)
start = time.perf_counter()
dynamics = nm.compute_uniform_dynamics(
    system, nm.operators.spin_dm("up"), num_steps, uniform_pt, progress_type="silent"
)
print(f"{num_steps} steps of dynamics in {time.perf_counter() - start:.1f} s")

steady = nm.compute_steady_state(system, uniform_pt)
times, z = dynamics.expectations(sz, real=True)
_, trace = dynamics.expectations(real=True)  # no operator: Tr rho(t)
z_steady = float((sz @ steady).trace().real)
# the truncation (epsrel) loses a little trace per step; divide it out
print(f"Tr rho at t = {times[-1]:.0f}: {trace[-1]:.6f}")
print(f"<sigma_z> / Tr rho at t = {times[-1]:.0f}: {z[-1] / trace[-1]:+.6f}")
print(f"<sigma_z> in the steady state:     {z_steady:+.6f}")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(times, z / trace, label="dynamics")
ax.axhline(z_steady, color="k", linestyle=":", label="steady state")
ax.set_xscale("log")
ax.set_xlabel("t")
ax.set_ylabel(r"$\langle\sigma_z\rangle$")
ax.legend()
fig.tight_layout()
fig.savefig("long_times.png", dpi=100)
