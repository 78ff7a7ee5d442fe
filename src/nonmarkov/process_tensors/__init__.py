"""Process tensors: the protocol, in memory, uniform (repeating), and in HDF5 files."""
