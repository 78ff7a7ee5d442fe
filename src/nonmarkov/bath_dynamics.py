"""OQuPy's module path ``bath_dynamics``; the code lives in
:mod:`nonmarkov.methods.bath_dynamics`."""

from .methods.bath_dynamics import TwoTimeBathCorrelations as TwoTimeBathCorrelations
