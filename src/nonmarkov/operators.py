"""OQuPy's module path ``operators``; the code lives in :mod:`nonmarkov.model.operators`."""

from .model.operators import SIGMA as SIGMA
from .model.operators import SPIN_DM as SPIN_DM
from .model.operators import acommutator as acommutator
from .model.operators import commutator as commutator
from .model.operators import create as create
from .model.operators import cross_acommutator as cross_acommutator
from .model.operators import cross_commutator as cross_commutator
from .model.operators import cross_left_right_super as cross_left_right_super
from .model.operators import destroy as destroy
from .model.operators import identity as identity
from .model.operators import left_right_super as left_right_super
from .model.operators import left_super as left_super
from .model.operators import lindblad_dissipator as lindblad_dissipator
from .model.operators import preparation as preparation
from .model.operators import right_super as right_super
from .model.operators import sigma as sigma
from .model.operators import spin_dm as spin_dm
from .model.operators import unitary_super as unitary_super
from .model.operators import unvectorise as unvectorise
from .model.operators import vectorise as vectorise
