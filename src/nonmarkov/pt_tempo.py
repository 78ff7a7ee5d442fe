"""OQuPy's module path ``pt_tempo``; the code lives in :mod:`nonmarkov.methods`."""

from .methods.pt_construction import pt_tempo_compute as pt_tempo_compute
from .methods.pt_tempo import PtTempo as PtTempo
from .model.parameters import TempoParameters as TempoParameters
from .model.parameters import guess_tempo_parameters as guess_tempo_parameters
