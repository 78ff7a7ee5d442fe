"""Module path ``dynamics`` of earlier versions; the code lives in
:mod:`nonmarkov.methods.dynamics` and :mod:`nonmarkov.io.results`."""

from .io.results import Dynamics as Dynamics
from .methods.dynamics import compute_dynamics as compute_dynamics
