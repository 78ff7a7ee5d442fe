"""The JAX engines (requires JAX): the window engine (kernels ``zipup``, ``planner``,
executor ``window``), the chain and batched chain engines (compiled scans in ``chain``),
the TEBD engine, and their support (``padding``, ``compiler``, ``placement``)."""
