"""Files of the library's objects; process tensors in HDF5 (docs/process_tensor_files.md)."""

from .process_tensor_file import FORMAT_NAME as FORMAT_NAME
from .process_tensor_file import FORMAT_VERSION as FORMAT_VERSION
from .process_tensor_file import FileProcessTensor as FileProcessTensor
from .process_tensor_file import ProcessTensorFileError as ProcessTensorFileError
from .process_tensor_file import import_process_tensor as import_process_tensor
from .process_tensor_file import write_process_tensor as write_process_tensor
