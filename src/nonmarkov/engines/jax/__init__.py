"""The JAX engines (requires JAX): the window engine (kernels ``zipup``, ``planner``,
executor ``window``), the chain engine (``engine``; compiled scans in ``chain``, vmapped
over the members of a batch in ``batched``), the TEBD engine, and their support
(``padding``, ``compiler``, ``placement``, ``modules``)."""
