"""OQuPy's module path ``bath``; the code lives in :mod:`nonmarkov.model.bath`."""

from .model.bath import Bath as Bath
