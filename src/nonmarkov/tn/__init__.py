"""Tensor-network kernels: pure functions of arrays, no physics.

- :mod:`.truncation`: SVD truncation with the ``epsrel`` convention,
- :mod:`.window`: the memory-window MPS of TEMPO and PT-TEMPO,
- :mod:`.chain`: contraction of a process-tensor MPO with system propagators.
"""
