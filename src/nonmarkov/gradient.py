"""OQuPy's module path ``gradient``; the code lives in :mod:`nonmarkov.methods.gradient`.

``_chain_rule`` is OQuPy's private name of :func:`chain_rule`, kept because scripts
and tests written for OQuPy call it.
"""

from .methods.gradient import chain_rule as chain_rule
from .methods.gradient import compute_gradient_and_dynamics as compute_gradient_and_dynamics
from .methods.gradient import state_gradient as state_gradient

_chain_rule = chain_rule
