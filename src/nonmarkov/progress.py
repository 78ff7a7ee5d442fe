"""Progress reporting for long loops (a ``tqdm`` bar, a line at start and end, or
nothing), and the library's logger.

``progress_type`` is ``'bar'``, ``'simple'`` or ``'silent'`` wherever an
algorithm takes it; None means the default, set by the environment variable
``NONMARKOV_PROGRESS`` (same values, read once at import; default ``'bar'``).

What is not progress (where a file was written, a build resumed from its
checkpoint) goes to the ``logging`` logger ``"nonmarkov"`` (:data:`logger`),
at level INFO; the library never prints. Show it with, e.g.,
``logging.basicConfig(level=logging.INFO)`` (the command line: ``-v``).
"""

from __future__ import annotations

import logging
import operator
import sys
import time
from collections import deque
from typing import Any

from . import config, validation

PROGRESS_TYPES = config.VALID_PROGRESS_TYPES

#: the library's logger (``logging.getLogger("nonmarkov")``)
logger = logging.getLogger("nonmarkov")


def check_progress_type(progress_type: str | None) -> str:
    """Validate ``progress_type``; None means the configured default."""
    if progress_type is None:
        return config.PROGRESS_TYPE
    return validation.choice(progress_type, PROGRESS_TYPES, "progress_type")


def remaining_time_text(remaining_steps: int, seconds_per_step: float | None, growing: bool) -> str:
    """The time left as a progress bar shows it: ``'ETA 1m05s'`` from the recent
    ``seconds_per_step``; with a bond dimension still ``growing`` the steps ahead will
    be slower, so the estimate is a lower bound, ``'ETA >= 1m05s (bond growing)'``;
    ``'ETA --'`` without a rate yet."""
    if seconds_per_step is None:
        return "ETA --"
    seconds = int(round(max(remaining_steps, 0) * seconds_per_step))
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        text = f"{hours}h{minutes:02d}m"
    else:
        text = f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
    return f"ETA >= {text} (bond growing)" if growing else f"ETA {text}"


class Progress:
    """Context manager wrapping a loop of ``total`` iterations.

    ``progress_type``: ``'bar'`` (a tqdm bar on stderr), ``'simple'`` (a
    line at start and end) or ``'silent'``.

    The bar's time left comes from the recent steps, not the average since the
    start: the steps of a tensor-network build get slower while the bond dimension
    (``set_postfix(bond=...)``) grows, so while it has grown within the recent
    steps the estimate is shown as a lower bound (:func:`remaining_time_text`).
    """

    #: steps over which the recent rate is measured (and the bond must stay put)
    RECENT_STEPS = 8
    #: seconds between two updates of the estimate
    REFRESH_S = 0.25

    def __init__(self, total: int, progress_type: str | None = None, title: str = ""):
        self.progress_type = check_progress_type(progress_type)
        self.total = total
        self.title = title
        self._bar: Any = None
        self._done = 0
        self._recent: deque[tuple[int, float]] = deque(maxlen=self.RECENT_STEPS + 1)
        self._values: dict[str, Any] = {}
        self._bond: Any = None
        self._bond_grew_at = 0
        self._shown_at = 0.0

    def __enter__(self) -> Progress:
        if self.progress_type == "bar":
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=self.total,
                desc=self.title,
                leave=True,
                file=sys.stderr,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
            )
            self._recent.append((0, time.monotonic()))
        elif self.progress_type == "simple":
            sys.stderr.write(f"{self.title}: {self.total} steps ...\n")
        return self

    def update(self, count: int = 1) -> None:
        """Advance by ``count`` iterations."""
        if self._bar is None:
            return
        self._done += count
        now = time.monotonic()
        self._recent.append((self._done, now))
        if now - self._shown_at >= self.REFRESH_S or self._done >= self.total:
            self._shown_at = now
            self._bar.set_postfix_str(self._postfix(), refresh=False)
        self._bar.update(count)

    def set_postfix(self, **values: Any) -> None:
        """Show extra values (e.g. the bond dimension, ``bond=``) next to the bar."""
        if self._bar is None:
            return
        bond = values.get("bond")
        if bond is not None:
            try:
                if self._bond is not None and bond > self._bond:
                    self._bond_grew_at = self._done
            except TypeError:
                pass
            self._bond = bond
        self._values = dict(values)
        self._bar.set_postfix_str(self._postfix(), refresh=False)

    def _postfix(self) -> str:
        """The values set (``bond=36``) and the time left (none once done)."""
        (first, started), (last, now) = self._recent[0], self._recent[-1]
        rate = (now - started) / (last - first) if last > first else None
        growing = self._bond is not None and self._done - self._bond_grew_at < self.RECENT_STEPS
        if self._done < 2:
            rate = None
        parts = [f"{key}={value}" for key, value in self._values.items()]
        if self._done < self.total:
            parts.append(remaining_time_text(self.total - self._done, rate, growing))
        return ", ".join(parts)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.progress_type == "simple" and exc[0] is None:
            sys.stderr.write(f"{self.title}: done\n")


class BaseProgress:
    """Interface of the progress displays of module path ``util`` (``ProgressBar``,
    ``ProgressSimple``, ``ProgressSilent``): a context manager with ``update(step)``.
    The interface itself implements none of them (NotImplementedError)."""

    def __enter__(self) -> BaseProgress:
        raise NotImplementedError(f"{type(self).__name__} is an interface: use ProgressBar")

    def __exit__(self, *exc: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} is an interface: use ProgressBar")

    def update(self, step: int | None = None) -> None:
        """Report that ``step`` steps are done (None: one more)."""
        raise NotImplementedError(f"{type(self).__name__} is an interface: use ProgressBar")


class _CountedProgress(BaseProgress):
    """A :class:`Progress` of ``max_value`` steps, updated by absolute step counts."""

    _progress_type = "bar"

    def __init__(self, max_value: int, title: str | None = None):
        try:
            total = operator.index(max_value)
        except TypeError:
            total = -1
        if isinstance(max_value, bool) or total < 0:
            raise ValueError(f"max_value must be a whole number >= 0; got {max_value!r}")
        self._progress = Progress(total, self._progress_type, title or "")
        self._done = 0

    def __enter__(self) -> _CountedProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)

    def update(self, step: int | None = None) -> None:
        """Report that ``step`` steps are done (None: one more)."""
        target = self._done + 1 if step is None else int(step)
        if target > self._done:
            self._progress.update(target - self._done)
            self._done = target


class ProgressBar(_CountedProgress):
    """A tqdm bar of ``max_value`` steps (a context manager; ``update(step)``)."""


class ProgressSimple(_CountedProgress):
    """A line at the start and at the end of ``max_value`` steps."""

    _progress_type = "simple"


class ProgressSilent(_CountedProgress):
    """No display."""

    _progress_type = "silent"


def get_progress(progress_type: str | None = None) -> type[BaseProgress]:
    """The progress class of ``progress_type`` ('bar', 'simple', 'silent'; None: the
    default of ``NONMARKOV_PROGRESS``)."""
    kind = check_progress_type(progress_type)
    return {"bar": ProgressBar, "simple": ProgressSimple, "silent": ProgressSilent}[kind]
