"""OQuPy's module path ``pt_tebd``; the code lives in :mod:`nonmarkov.methods.pt_tebd`."""

from .methods.pt_tebd import AugmentedMPS as AugmentedMPS
from .methods.pt_tebd import PtTebd as PtTebd
from .methods.pt_tebd import PtTebdParameters as PtTebdParameters
from .model.system_chain import ChainControl as ChainControl
from .model.system_chain import SystemChain as SystemChain
