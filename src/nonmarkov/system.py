"""OQuPy's module path ``system``; the code lives in :mod:`nonmarkov.model.system`."""

from .model.parameterized import ParameterizedSystem as ParameterizedSystem
from .model.system import BaseSystem as BaseSystem
from .model.system import MeanFieldSystem as MeanFieldSystem
from .model.system import System as System
from .model.system import TimeDependentSystem as TimeDependentSystem
from .model.system import TimeDependentSystemWithField as TimeDependentSystemWithField
from .model.system_chain import SystemChain as SystemChain
