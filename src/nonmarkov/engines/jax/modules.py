"""JAX, imported on first use: the one lazy import of the JAX engine modules, so
that they import (and the library with them) where JAX is not installed, until a
kernel is traced."""

from __future__ import annotations

from typing import Any


def jax_modules() -> tuple[Any, Any, Any]:
    """``(jax, jax.numpy, jax.lax)``, imported at the first call."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    return jax, jnp, lax
