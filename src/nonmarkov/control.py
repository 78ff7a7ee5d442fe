"""OQuPy's module path ``control``; the code lives in :mod:`nonmarkov.model.control`."""

from .model.chain import ChainControl as ChainControl
from .model.control import Control as Control
