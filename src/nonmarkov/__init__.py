"""nonmarkov: non-Markovian open quantum systems with process-tensor methods.

Public API, compatible in names and argument names with OQuPy 0.5, so that
``import nonmarkov as oqupy`` runs an existing script.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from . import backends as backends
from . import operators as operators
from .bath import Bath as Bath
from .correlations import CustomCorrelations as CustomCorrelations
from .correlations import CustomSD as CustomSD
from .correlations import PowerLawSD as PowerLawSD
from .system import System as System
from .system import TimeDependentSystem as TimeDependentSystem

try:
    __version__ = _version("nonmarkov")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.1.0"
