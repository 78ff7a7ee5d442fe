"""Module path ``dynamics`` of earlier versions; the code lives in
:mod:`nonmarkov.methods.dynamics` and :mod:`nonmarkov.io.results`."""

from .io.results import BaseDynamics as BaseDynamics
from .io.results import Dynamics as Dynamics
from .io.results import MeanFieldDynamics as MeanFieldDynamics
from .io.results import import_mean_field_dynamics as import_mean_field_dynamics
from .methods.dynamics import compute_dynamics as compute_dynamics
