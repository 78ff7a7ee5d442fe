"""Host start of a compiled window: steps on the host while XLA compiles.

XLA compiles the whole-step kernel of :class:`~nonmarkov.engines.jax.window.CompiledWindow`
in about a second on a CPU (more on a GPU), as long as a short TEMPO run takes
on NumPy. With ``NONMARKOV_JAX_HOST_START=on`` (the default) the kernel is
compiled in the background compiler thread of :mod:`nonmarkov.engines.jax.sitewise`
while the calling thread advances the window with the NumPy step of
:mod:`nonmarkov.kernels.window`
(:func:`~nonmarkov.backends.numerical_backend.numpy_in_this_thread`);
once the kernel is ready the window moves to the device
(:meth:`~nonmarkov.engines.jax.window.CompiledWindow.load_host_window`) and the steps
go on there. If the bond outgrows the bucket being compiled, the next bucket is
compiled instead. The host steps stop at bond :data:`HOST_START_BOND`, where a
step on the host costs more than waiting for a compilation would on an
accelerator.

Both steps are the same algorithm, so the results agree to rounding; how many
steps run on the host depends on the compile time, so two runs may differ at
that level (``off`` makes runs repeat bit for bit). Only for windows with a
memory cut (a fixed number of sites).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ... import config
from ...backends.numerical_backend import numpy_in_this_thread
from .window import CompiledWindow, bond_bucket

#: The host steps stop once a bond of the window reaches this dimension.
HOST_START_BOND = 64


def wanted(engine: CompiledWindow, num_steps: int) -> bool:
    """Whether ``engine`` should start with host steps (``num_steps`` of them at most)."""
    return config.JAX_HOST_START == "on" and num_steps > 0 and engine.memory > 0


def run_host_steps(engine: CompiledWindow, host_step: Callable[[], Sequence[Any]],
                   num_steps: int) -> tuple[int, int]:
    """Call ``host_step`` while the engine's step kernel compiles, at most ``num_steps``
    times.

    ``host_step()`` advances the caller's host window by one step (on NumPy:
    it runs inside :func:`numpy_in_this_thread`) and returns the window,
    newest first (front (1, x, k), sites (k, m, k')). Returns the number of
    steps done and the bucket to load the window with (the one compiled).
    """
    bucket = engine.bond
    pending = engine.compile_step_ahead(bucket)
    done = 0
    with numpy_in_this_thread():
        while done < num_steps and not pending.done():
            window = host_step()
            done += 1
            largest = max(site.shape[2] for site in window)
            if largest >= HOST_START_BOND:
                break
            if bond_bucket(largest) > bucket:
                pending.cancel()  # if it has not started
                bucket = engine.grown_bond(largest)
                pending = engine.compile_step_ahead(bucket)
    return done, bucket
