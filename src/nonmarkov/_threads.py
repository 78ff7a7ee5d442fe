"""BLAS thread limit for the hot loops.

TEMPO-family loops do many small matrix factorisations; on them a
multi-threaded BLAS spends more time synchronising than computing (and on a
busy machine far more). The loops therefore run with ``NONMARKOV_BLAS_THREADS``
BLAS threads (default 1; ``0`` leaves the BLAS setting untouched).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def _configured_threads() -> int:
    raw = os.environ.get("NONMARKOV_BLAS_THREADS", "1").strip()
    try:
        value = int(raw)
    except ValueError as error:
        raise ValueError(
            f"NONMARKOV_BLAS_THREADS must be a non-negative integer; got {raw!r}"
        ) from error
    if value < 0:
        raise ValueError(f"NONMARKOV_BLAS_THREADS must be a non-negative integer; got {value}")
    return value


@contextlib.contextmanager
def hot_loop_threads() -> Iterator[None]:
    """Limit BLAS threads inside a ``with`` block (see module docstring)."""
    threads = _configured_threads()
    if threads == 0:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads, user_api="blas"):
        yield
