"""OQuPy's module path ``system_dynamics``; the code lives in :mod:`nonmarkov.methods`.

``Indices`` is the type of a time given by step indices in ``ops_times`` of
:func:`compute_correlations_nt`: a step (int), a slice of steps, or a list of
them.
"""

from .methods.dynamics import compute_dynamics as compute_dynamics
from .methods.mean_field import compute_dynamics_with_field as compute_dynamics_with_field
from .methods.system_correlations import compute_correlations as compute_correlations
from .methods.system_correlations import compute_correlations_nt as compute_correlations_nt

Indices = int | slice | list[int | slice]
