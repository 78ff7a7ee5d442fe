"""The model: operators, systems, spectral densities and correlations, baths,
controls, parameters."""
