"""nonmarkov: non-Markovian open quantum systems with process-tensor methods.

Public API, compatible in names and argument names with OQuPy 0.5, so that
``import nonmarkov as oqupy`` runs an existing script. The package is layered
(docs/ARCHITECTURE.md): ``model`` -> ``influence`` -> ``methods`` -> ``engines``
-> results; the modules ``operators``, ``system``, ``bath``, ``correlations``,
``bath_correlations``, ``bath_dynamics``, ``control``, ``tempo``, ``pt_tempo``, ``process_tensor``,
``dynamics``, ``system_dynamics``, ``helpers`` and ``version`` are the module
paths scripts import, re-exporting the real code.
"""

from . import backends as backends
from . import base_api as base_api
from . import bath as bath
from . import bath_correlations as bath_correlations
from . import bath_dynamics as bath_dynamics
from . import control as control
from . import correlations as correlations
from . import dynamics as dynamics
from . import gradient as gradient
from . import helpers as helpers
from . import operators as operators
from . import options as options
from . import process_tensor as process_tensor
from . import pt_tebd as pt_tebd
from . import pt_tempo as pt_tempo
from . import system as system
from . import system_dynamics as system_dynamics
from . import tempo as tempo
from . import util as util
from . import version as version
from ._version import __version__ as __version__
from .io.batched_results import BatchedDynamics as BatchedDynamics
from .io.results import Dynamics as Dynamics
from .io.results import MeanFieldDynamics as MeanFieldDynamics
from .io.results import import_dynamics as import_dynamics
from .io.results import import_mean_field_dynamics as import_mean_field_dynamics
from .methods.autodiff import differentiable_dynamics as differentiable_dynamics
from .methods.batched_correlations import compute_correlations_batch as compute_correlations_batch
from .methods.batched_dynamics import compute_dynamics_batch as compute_dynamics_batch
from .methods.bath_dynamics import TwoTimeBathCorrelations as TwoTimeBathCorrelations
from .methods.convergence import ConvergenceError as ConvergenceError
from .methods.convergence import converge as converge
from .methods.dynamics import compute_dynamics as compute_dynamics
from .methods.gibbs import GibbsTempo as GibbsTempo
from .methods.gibbs import gibbs_tempo_compute as gibbs_tempo_compute
from .methods.gradient import compute_gradient_and_dynamics as compute_gradient_and_dynamics
from .methods.gradient import state_gradient as state_gradient
from .methods.mean_field import MeanFieldTempo as MeanFieldTempo
from .methods.mean_field import compute_dynamics_with_field as compute_dynamics_with_field
from .methods.pt_construction import pt_tempo_compute as pt_tempo_compute
from .methods.pt_divide import pt_divide_and_conquer_compute as pt_divide_and_conquer_compute
from .methods.pt_repeated import pt_repeated_block_compute as pt_repeated_block_compute
from .methods.pt_tebd import AugmentedMPS as AugmentedMPS
from .methods.pt_tebd import PtTebd as PtTebd
from .methods.pt_tebd import PtTebdParameters as PtTebdParameters
from .methods.pt_tempo import PtTempo as PtTempo
from .methods.system_correlations import compute_correlations as compute_correlations
from .methods.system_correlations import compute_correlations_nt as compute_correlations_nt
from .methods.tempo import Tempo as Tempo
from .methods.tempo import tempo_compute as tempo_compute
from .methods.uniform import compute_steady_state as compute_steady_state
from .methods.uniform import compute_uniform_dynamics as compute_uniform_dynamics
from .methods.uniform import pt_uniform_compute as pt_uniform_compute
from .model.bath import Bath as Bath
from .model.control import Control as Control
from .model.correlations import CustomCorrelations as CustomCorrelations
from .model.correlations import CustomSD as CustomSD
from .model.correlations import PowerLawSD as PowerLawSD
from .model.parameterized import ParameterizedSystem as ParameterizedSystem
from .model.parameters import GibbsParameters as GibbsParameters
from .model.parameters import TempoParameters as TempoParameters
from .model.parameters import guess_tempo_parameters as guess_tempo_parameters
from .model.spectral_densities import DrudeLorentzSD as DrudeLorentzSD
from .model.spectral_densities import TabulatedSD as TabulatedSD
from .model.spectral_densities import UnderdampedSD as UnderdampedSD
from .model.system import MeanFieldSystem as MeanFieldSystem
from .model.system import System as System
from .model.system import TimeDependentSystem as TimeDependentSystem
from .model.system import TimeDependentSystemWithField as TimeDependentSystemWithField
from .model.system_chain import ChainControl as ChainControl
from .model.system_chain import SystemChain as SystemChain
from .options import EngineOptions as EngineOptions
from .options import set_default_options as set_default_options
from .process_tensors.base import SimpleProcessTensor as SimpleProcessTensor
from .process_tensors.base import TrivialProcessTensor as TrivialProcessTensor
from .process_tensors.file import FileProcessTensor as FileProcessTensor
from .process_tensors.file import convert_process_tensor as convert_process_tensor
from .process_tensors.file import import_process_tensor as import_process_tensor
from .process_tensors.file import leftover_files as leftover_files
from .process_tensors.uniform import UniformProcessTensor as UniformProcessTensor
from .sweeps import SweepResults as SweepResults
from .sweeps import cached_process_tensor as cached_process_tensor
from .sweeps import import_sweep as import_sweep
from .sweeps import sweep as sweep

__all__ = [
    "AugmentedMPS",
    "BatchedDynamics",
    "Bath",
    "ChainControl",
    "Control",
    "ConvergenceError",
    "CustomCorrelations",
    "CustomSD",
    "DrudeLorentzSD",
    "Dynamics",
    "EngineOptions",
    "FileProcessTensor",
    "GibbsParameters",
    "GibbsTempo",
    "MeanFieldDynamics",
    "MeanFieldSystem",
    "MeanFieldTempo",
    "ParameterizedSystem",
    "PowerLawSD",
    "PtTebd",
    "PtTebdParameters",
    "PtTempo",
    "SimpleProcessTensor",
    "SweepResults",
    "System",
    "SystemChain",
    "TabulatedSD",
    "Tempo",
    "TempoParameters",
    "TimeDependentSystem",
    "TimeDependentSystemWithField",
    "TrivialProcessTensor",
    "TwoTimeBathCorrelations",
    "UnderdampedSD",
    "UniformProcessTensor",
    "__version__",
    "backends",
    "base_api",
    "bath",
    "bath_correlations",
    "bath_dynamics",
    "cached_process_tensor",
    "compute_correlations",
    "compute_correlations_batch",
    "compute_correlations_nt",
    "compute_dynamics",
    "compute_dynamics_batch",
    "compute_dynamics_with_field",
    "compute_gradient_and_dynamics",
    "compute_steady_state",
    "compute_uniform_dynamics",
    "control",
    "converge",
    "convert_process_tensor",
    "correlations",
    "differentiable_dynamics",
    "dynamics",
    "gibbs_tempo_compute",
    "gradient",
    "guess_tempo_parameters",
    "helpers",
    "import_dynamics",
    "import_mean_field_dynamics",
    "import_process_tensor",
    "import_sweep",
    "leftover_files",
    "operators",
    "options",
    "process_tensor",
    "pt_divide_and_conquer_compute",
    "pt_repeated_block_compute",
    "pt_tebd",
    "pt_tempo",
    "pt_tempo_compute",
    "pt_uniform_compute",
    "set_default_options",
    "state_gradient",
    "sweep",
    "system",
    "system_dynamics",
    "tempo",
    "tempo_compute",
    "util",
    "version",
]
