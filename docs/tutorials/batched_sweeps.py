"""Many systems on one process tensor, and a parameter sweep with a results file.

Part 1: a spin in an Ohmic bath, driven at Rabi frequency Omega and detuned by
delta. The process tensor does not depend on delta, so a scan of 200 detunings
is one ``compute_dynamics_batch`` call on one PT: every time step contracts all
members at once. We time it against a loop of ``compute_dynamics``.

Part 2: the same physics as a ``nonmarkov.sweep`` over a small grid of
couplings and detunings. Each point builds (or reads back) the PT of its
coupling through ``cached_process_tensor``; the results go to one HDF5 file,
read back with ``import_sweep``.
"""

import functools
import os
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np

import nonmarkov as nm

op = nm.operators
sx, sz = op.sigma("x"), op.sigma("z")
dt, end_time = 0.1, 5.0


def bath(alpha):
    return nm.Bath(0.5 * sz, nm.PowerLawSD(alpha, 1, 5.0, temperature=0.2))


def build_pt(alpha):
    parameters = nm.TempoParameters(dt=dt, tcut=1.5, epsrel=1e-5)
    return nm.pt_tempo_compute(bath(alpha), 0.0, end_time, parameters)


def driven_spin(detuning, rabi=1.0):
    return nm.System(0.5 * rabi * sx + 0.5 * detuning * sz)


# Part 1: one PT, 200 detunings.
process_tensor = build_pt(0.1)
detunings = np.linspace(-3.0, 3.0, 200)
systems = [driven_spin(delta) for delta in detunings]
up = op.spin_dm("up")

start = time.perf_counter()
batch = nm.compute_dynamics_batch(systems, up, process_tensor=process_tensor)
batch_time = time.perf_counter() - start
times, sz_batch = batch.expectations(sz, real=True)  # (T,), (200, T)

start = time.perf_counter()
loop = [nm.compute_dynamics(s, up, process_tensor=process_tensor) for s in systems[::10]]
loop_time = (time.perf_counter() - start) / len(loop)
print(
    f"batch of {len(systems)}: {1e3 * batch_time / len(systems):.2f} ms per member; "
    f"loop of compute_dynamics: {1e3 * loop_time:.1f} ms per member "
    f"({loop_time * len(systems) / batch_time:.0f}x)"
)
deviation = max(
    np.abs(batch[10 * k].states - dynamics.states).max() for k, dynamics in enumerate(loop)
)
print(f"batch members against compute_dynamics: max deviation {deviation:.1e}")


# Part 2: a 2 x 2 sweep. The point function takes the grid's names as keywords.
def point(alpha, detuning, cache):
    pt = nm.cached_process_tensor(
        os.path.join(cache, f"pt-alpha{alpha}.h5"), functools.partial(build_pt, alpha)
    )
    dynamics = nm.compute_dynamics(driven_spin(detuning), up, process_tensor=pt)
    t, sz_t = dynamics.expectations(sz, real=True)
    return {"times": t, "sz": sz_t}


grid = {"alpha": [0.05, 0.15], "detuning": [0.0, 1.5]}
with tempfile.TemporaryDirectory() as directory:
    results_file = os.path.join(directory, "sweep.h5")
    start = time.perf_counter()
    nm.sweep(
        functools.partial(point, cache=directory),
        grid,
        executor="serial",  # in this process; None: a process pool
        results_file=results_file,
    )
    print(f"sweep of 4 points (2 PT builds): {time.perf_counter() - start:.1f} s")
    results = nm.import_sweep(results_file)  # as a later session would read it
results.raise_failures()
for params, status, seconds in zip(results.points, results.status, results.seconds):
    print(f"{params}: {status}, {seconds:.2f} s, <sz>(T) = {results.get(**params)['sz'][-1]:+.4f}")

fig, (ax_map, ax_sweep) = plt.subplots(1, 2, figsize=(10, 3.5))
mesh = ax_map.pcolormesh(times, detunings, sz_batch, shading="auto", cmap="RdBu_r")
fig.colorbar(mesh, ax=ax_map, label=r"$\langle\sigma_z\rangle$")
ax_map.set_xlabel("t")
ax_map.set_ylabel(r"detuning $\delta$")
ax_map.set_title(r"batch, $\alpha = 0.1$")
for params in results.points:
    values = results.get(**params)
    ax_sweep.plot(
        values["times"],
        values["sz"],
        label=rf"$\alpha$ = {params['alpha']}, $\delta$ = {params['detuning']}",
    )
ax_sweep.set_xlabel("t")
ax_sweep.set_ylabel(r"$\langle\sigma_z\rangle$")
ax_sweep.set_title("sweep, read back from the file")
ax_sweep.legend(fontsize=8)
fig.tight_layout()
fig.savefig("batched_sweeps.png", dpi=100)
plt.show()
