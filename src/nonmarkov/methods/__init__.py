"""Algorithms: TEMPO, PT-TEMPO and its constructions, dynamics and correlations
from process tensors."""
