"""Mean-field TEMPO: spins that talk to each other only through a cavity field.

N identical two-level emitters, each with its own phonon bath, sit in a lossy
cavity. In the mean-field picture the cavity is a classical amplitude a(t)
driven by the emitters' total polarisation, and each emitter sees a(t) as a
coherent drive. An incoherent pump inverts the emitters; above threshold a
small seed field grows into a lasing field. One process tensor (the bath of one
emitter) serves every coupling strength, so the scan over g reuses it.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

import nonmarkov as nm

op = nm.operators
sz, sp, sm = op.sigma("z"), op.sigma("+"), op.sigma("-")
n_emitters, kappa, pump, loss = 20.0, 0.2, 0.3, 0.02  # cavity decay, pump and emitter decay
dt, num_steps = 0.1, 300

bath = nm.Bath(0.5 * sz, nm.PowerLawSD(alpha=0.1, zeta=1, cutoff=3.0, temperature=0.3))
start = time.perf_counter()
process_tensor = nm.pt_tempo_compute(
    bath, 0.0, dt * num_steps, nm.TempoParameters(dt=dt, tcut=1.5, epsrel=1e-5)
)
print(f"process tensor of one emitter's bath: {time.perf_counter() - start:.1f} s")


def run(g):
    """Field and <sigma_z> of an emitter for the light-matter coupling g."""

    def hamiltonian(t, a):  # one emitter driven by the field, resonant with the cavity
        return g * (a * sp + np.conj(a) * sm)

    def field_eom(t, states, a):  # da/dt: cavity loss + the emitters' polarisation
        return -kappa * a - 1j * g * n_emitters * np.trace(sm @ states[0])

    emitter = nm.TimeDependentSystemWithField(
        hamiltonian,
        gammas=[lambda t: pump, lambda t: loss],
        lindblad_operators=[lambda t: sp, lambda t: sm],
    )
    return nm.compute_dynamics_with_field(
        nm.MeanFieldSystem([emitter], field_eom),
        initial_field=0.05,
        process_tensor_list=[process_tensor],
        initial_state_list=[op.spin_dm("down")],
        subdiv_limit=None,
    )


fig, (ax_field, ax_spin) = plt.subplots(1, 2, figsize=(9, 3.5))
for g in (0.05, 0.15, 0.25):
    start = time.perf_counter()
    dynamics = run(g)
    elapsed = time.perf_counter() - start
    times, fields = dynamics.field_expectations()
    t, sz_t = dynamics.system_dynamics[0].expectations(sz, real=True)
    trace = dynamics.system_dynamics[0].states[-1].trace().real  # 1 up to the PT's truncation
    print(
        f"g = {g:.2f}: |a(T)| = {abs(fields[-1]):.4f}, <sigma_z>(T) = {sz_t[-1]:+.4f}, "
        f"Tr rho(T) = {trace:.4f}, <sigma_z>/Tr = {sz_t[-1] / trace:+.4f}  ({elapsed:.2f} s)"
    )
    ax_field.plot(times, np.abs(fields), label=f"g = {g}")
    ax_spin.plot(t, sz_t, label=f"g = {g}")

# Below threshold the field dies and the pump and the loss alone set <sigma_z> = (P - L) / (P + L).
print(f"pump/loss balance without a field: <sigma_z> = {(pump - loss) / (pump + loss):+.4f}")
ax_field.set_xlabel("t")
ax_field.set_ylabel("|a(t)|")
ax_field.legend()
ax_spin.set_xlabel("t")
ax_spin.set_ylabel(r"$\langle\sigma_z\rangle$ of one emitter")
fig.tight_layout()
fig.savefig("mean_field.png", dpi=100)
plt.show()
