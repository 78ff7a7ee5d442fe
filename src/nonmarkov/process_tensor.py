"""OQuPy's module path ``process_tensor``; the code lives in :mod:`nonmarkov.process_tensors`."""

from .process_tensors.base import BaseProcessTensor as BaseProcessTensor
from .process_tensors.base import SimpleProcessTensor as SimpleProcessTensor
from .process_tensors.base import TrivialProcessTensor as TrivialProcessTensor
from .process_tensors.file import FileProcessTensor as FileProcessTensor
from .process_tensors.file import import_process_tensor as import_process_tensor
