"""OQuPy's module path ``tempo``; the code lives in :mod:`nonmarkov.methods.tempo`
and :mod:`nonmarkov.model.parameters`."""

from .methods.gibbs import GibbsTempo as GibbsTempo
from .methods.gibbs import gibbs_tempo_compute as gibbs_tempo_compute
from .methods.mean_field import MeanFieldTempo as MeanFieldTempo
from .methods.tempo import Tempo as Tempo
from .methods.tempo import tempo_compute as tempo_compute
from .model.parameters import GUESS_WARNING_MSG as GUESS_WARNING_MSG
from .model.parameters import GibbsParameters as GibbsParameters
from .model.parameters import TempoParameters as TempoParameters
from .model.parameters import guess_tempo_parameters as guess_tempo_parameters
