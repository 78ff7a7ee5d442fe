"""The compiled JAX engines (requires JAX): window kernels, site-by-site steps, the chain scan."""
