"""OQuPy's module path ``control``; the code lives in :mod:`nonmarkov.model.control`."""

from .model.control import Control as Control
from .model.system_chain import ChainControl as ChainControl
