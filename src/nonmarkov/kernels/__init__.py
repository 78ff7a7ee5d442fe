"""Pure array functions (tensor-network kernels) against the backend proxy:
no physics, no configuration."""
