"""Plotting helpers."""

from __future__ import annotations

from typing import Any

import numpy as default_np

from .model.correlations import BaseCorrelations
from .model.parameters import TempoParameters


def plot_correlations_with_parameters(
    correlations: BaseCorrelations, parameters: TempoParameters, ax: Any = None
) -> Any:
    """Plot Re and Im of C(tau) with the time grid and memory cut of ``parameters``.

    Shows whether dt resolves the correlation function and whether the
    memory cut tcut = dkmax * dt covers its decay. Returns the matplotlib
    axes (a new figure if ``ax`` is None).
    """
    if not isinstance(correlations, BaseCorrelations):
        raise TypeError(
            f"correlations must be a correlations object; got {type(correlations).__name__}"
        )
    if not isinstance(parameters, TempoParameters):
        raise TypeError(f"parameters must be TempoParameters; got {type(parameters).__name__}")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots()
    dt = parameters.dt
    memory = parameters.tcut if parameters.tcut is not None else 20 * dt
    end = 1.5 * memory
    fine = default_np.linspace(0.0, end, 400)
    grid = default_np.arange(0.0, end + 0.5 * dt, dt)
    fine_values = default_np.asarray(correlations.correlation(fine))
    grid_values = default_np.asarray(correlations.correlation(grid))
    ax.plot(fine, fine_values.real, color="C0", label="Re C(t)")
    ax.plot(fine, fine_values.imag, color="C1", label="Im C(t)")
    ax.plot(grid, grid_values.real, "o", color="C0", markersize=3)
    ax.plot(grid, grid_values.imag, "o", color="C1", markersize=3)
    if parameters.tcut is not None:
        ax.axvline(parameters.tcut, color="k", linestyle="--", label="tcut")
    ax.set_xlabel("t")
    ax.set_ylabel("C(t)")
    ax.legend()
    return ax
