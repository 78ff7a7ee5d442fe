"""OQuPy's module path ``version``; the version is written once, in :mod:`nonmarkov._version`."""

from ._version import __version__ as __version__
