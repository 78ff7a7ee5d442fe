"""Sweeps: a user function over a parameter grid on any executor (a process pool,
a Dask cluster), with one results file, per-point failures and resumption
(docs/sweeps.md).

- :mod:`.grid`: the points of a grid, checked, and the key of each point;
- :mod:`.store`: the point files and the results file (HDF5, atomic);
- :mod:`.results`: :class:`SweepResults` and :func:`import_sweep`;
- :mod:`.runner`: :func:`sweep`;
- :mod:`.cache`: :func:`cached_process_tensor`, process tensors kept in files.
"""

from __future__ import annotations

from .cache import cached_process_tensor as cached_process_tensor
from .runner import sweep as sweep
from .store import SweepFileError as SweepFileError
from .sweep_results import SweepFailure as SweepFailure
from .sweep_results import SweepResults as SweepResults
from .sweep_results import import_sweep as import_sweep

__all__ = [
    "SweepFailure",
    "SweepFileError",
    "SweepResults",
    "cached_process_tensor",
    "import_sweep",
    "sweep",
]
