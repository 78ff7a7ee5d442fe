"""nonmarkov: non-Markovian open quantum systems with process-tensor methods.

Public API, compatible in names and argument names with OQuPy 0.5, so that
``import nonmarkov as oqupy`` runs an existing script.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from . import backends as backends
from . import helpers as helpers
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
from .control import Control as Control
from .dynamics import compute_dynamics as compute_dynamics
from .io import FileProcessTensor as FileProcessTensor
from .io import import_process_tensor as import_process_tensor
from .parameters import TempoParameters as TempoParameters
from .parameters import guess_tempo_parameters as guess_tempo_parameters
from .process_tensor import SimpleProcessTensor as SimpleProcessTensor
from .process_tensor import TrivialProcessTensor as TrivialProcessTensor
from .pt_divide import pt_divide_and_conquer_compute as pt_divide_and_conquer_compute
from .pt_repeated import pt_repeated_block_compute as pt_repeated_block_compute
from .pt_tempo import PtTempo as PtTempo
from .pt_tempo import pt_tempo_compute as pt_tempo_compute
from .results import Dynamics as Dynamics
from .results import import_dynamics as import_dynamics
from .system_correlations import compute_correlations as compute_correlations
from .system_correlations import compute_correlations_nt as compute_correlations_nt
from .tempo import Tempo as Tempo
from .tempo import tempo_compute as tempo_compute
from .uniform_pt import UniformProcessTensor as UniformProcessTensor
from .uniform_pt import compute_steady_state as compute_steady_state
from .uniform_pt import compute_uniform_dynamics as compute_uniform_dynamics
from .uniform_pt import pt_uniform_compute as pt_uniform_compute
