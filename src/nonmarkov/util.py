"""Module path ``util`` of earlier versions: its progress displays; the code lives
in :mod:`nonmarkov.progress`."""

from .progress import BaseProgress as BaseProgress
from .progress import ProgressBar as ProgressBar
from .progress import ProgressSilent as ProgressSilent
from .progress import ProgressSimple as ProgressSimple
from .progress import get_progress as get_progress
