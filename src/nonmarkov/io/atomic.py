"""File helpers: write to a temporary name and rename only when complete."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def atomic_path(filename: str, temporary: str | None = None) -> Iterator[str]:
    """Yield a temporary path next to ``filename``; rename it there on success.

    On any exception the temporary file is removed, so ``filename`` is either
    the old file or the complete new one, never a half-written file.
    ``temporary``: an existing temporary file to continue (a resumed write)
    instead of a new one (``.tmp-<random><name>`` next to ``filename``).
    """
    if temporary is None:
        directory = os.path.dirname(os.path.abspath(filename))
        handle, temporary = tempfile.mkstemp(
            prefix=".tmp-", suffix=os.path.basename(filename), dir=directory
        )
        os.close(handle)
    try:
        yield temporary
        os.chmod(temporary, 0o666 & ~_current_umask())  # mkstemp makes it owner-only
        os.replace(temporary, filename)
    except GeneratorExit:
        # abandoned, not exited (``ExitStack.pop_all`` of a suspended write, then
        # garbage collection): the temporary file stays for the write that resumes it
        raise
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def _current_umask() -> int:
    """The process umask (from /proc on Linux, else by setting and restoring it)."""
    try:
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("Umask:"))
        return int(line.split()[1], 8)
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask
