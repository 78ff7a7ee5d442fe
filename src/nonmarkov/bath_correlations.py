"""OQuPy's module path ``bath_correlations``; the code lives in
:mod:`nonmarkov.model.correlations` (also at the module path ``correlations``)."""

from .model.correlations import BaseCorrelations as BaseCorrelations
from .model.correlations import CustomCorrelations as CustomCorrelations
from .model.correlations import CustomSD as CustomSD
from .model.correlations import PowerLawSD as PowerLawSD
