"""PT-TEBD: a spin chain with a non-Markovian bath on one end.

Five spins 1/2 in an XX chain, H = sum_k (J/2)(sx_k sx_{k+1} + sy_k sy_{k+1}) / 2
+ sum_k (h/2) sz_k. The spin on the left end starts up, the others down, and
the single excitation hops along the chain. The last site is coupled to an
Ohmic bath through its sigma_x; that bath is one process tensor, built once
with PT-TEMPO and attached to the chain's matrix product state as an extra leg.
We compare the magnetisation per site with the same chain without the bath.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

import nonmarkov as nm

op = nm.operators
sx, sy, sz = op.sigma("x"), op.sigma("y"), op.sigma("z")
n_sites, coupling, field = 5, 1.0, 0.5
dt, num_steps = 0.1, 80

chain = nm.SystemChain(hilbert_space_dimensions=[2] * n_sites)
for site in range(n_sites):
    chain.add_site_hamiltonian(site=site, hamiltonian=0.5 * field * sz)
for site in range(n_sites - 1):  # the pair (site, site + 1)
    for s in (sx, sy):
        chain.add_nn_hamiltonian(site=site, hamiltonian_l=0.5 * coupling * s, hamiltonian_r=0.5 * s)

bath = nm.Bath(0.5 * sx, nm.PowerLawSD(alpha=0.1, zeta=1, cutoff=4.0, temperature=0.5))
start = time.perf_counter()
process_tensor = nm.pt_tempo_compute(
    bath, 0.0, dt * num_steps, nm.TempoParameters(dt=dt, tcut=1.0, epsrel=1e-5)
)
print(f"process tensor for the last site: {time.perf_counter() - start:.1f} s")

initial_state = nm.AugmentedMPS([op.spin_dm("up")] + [op.spin_dm("down")] * (n_sites - 1))
magnetisation = {}
for label, last_site in (("closed chain", None), ("bath on the last site", process_tensor)):
    tebd = nm.PtTebd(
        initial_augmented_mps=initial_state,
        system_chain=chain,
        process_tensors=[None] * (n_sites - 1) + [last_site],
        parameters=nm.PtTebdParameters(dt=dt, order=2, epsrel=1e-6),
        dynamics_sites=list(range(n_sites)),
    )
    start = time.perf_counter()
    results = tebd.compute(num_steps)
    norm = results["norm"].real  # states are returned unnormalised
    times = results["time"]
    magnetisation[label] = np.array(
        [results["dynamics"][k].expectations(sz, real=True)[1] / norm for k in range(n_sites)]
    )
    print(
        f"{label}: {time.perf_counter() - start:.1f} s, largest chain bond "
        f"{results['bond_dimensions'].max()}, total <sz> at t = {times[-1]:.0f}: "
        f"{magnetisation[label][:, -1].sum():+.4f}"
    )

# The closed XX chain conserves the total magnetisation (here 2 - n_sites = -3).
print(f"closed chain, total <sz> drift: {np.ptp(magnetisation['closed chain'].sum(0)):.1e}")

fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
for ax, (label, m) in zip(axes, magnetisation.items()):
    for k in range(n_sites):
        ax.plot(times, m[k], label=f"site {k}")
    ax.set_title(label)
    ax.set_xlabel("t")
axes[0].set_ylabel(r"$\langle\sigma_z\rangle$")
axes[1].legend(fontsize=8)
fig.tight_layout()
fig.savefig("pt_tebd.png", dpi=100)
plt.show()
