"""Test-suite configuration: backend selection, backend markers, tolerances.

Command-line options
--------------------
``--backend numpy|jax``
    Numerical backend for the whole session (default: ``NONMARKOV_BACKEND``,
    else ``numpy``). It is activated in ``pytest_configure``, before any test
    module is collected, and the previous backend is restored at the end.
``--precision double|single``
    Precision for the session (default: ``NONMARKOV_PRECISION``, else ``double``).

Markers
-------
``@pytest.mark.skip_backend("jax", reason="...")``
    Skip the test when the named backend is active.
``@pytest.mark.xfail_backend("jax", reason="...")``
    Expect the test to fail when the named backend is active (``strict=True``
    may be passed through as a keyword).

Fixtures
--------
``backend_name``  the active backend, ``'numpy'`` or ``'jax'``.
``tol``           a :class:`Tolerances` for the active precision.

Every test runs with the session backend: a test that switches backend or
precision gets the session state back afterwards (autouse fixture), so one
test cannot change what the next one runs on.

On JAX, a window runs its steps with the NumPy kernels on the host or with the
compiled zip-up step, as the planner decides from the steps left and measured
times (``nonmarkov.engines.jax.planner``). The suite makes every choice that
depends on measured time deterministic (``EngineOptions(deterministic=True)``,
autouse fixture: modelled times, compilations waited for), so that runs repeat
bit for bit; tests of the compiled steps ask for them with ``compiled='on'``.

BLAS runs with one thread for the whole session (autouse fixture), as the
library's hot loops run it: the tests' small matrices gain nothing from more, and
a shared machine loses much to spinning threads.

Both backends run the same window sweep (``'zip_up'`` by default), so the
NumPy references that the JAX tests compare with need no special options.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy
import pytest

from nonmarkov import backends
from nonmarkov import config as nm_config
from nonmarkov import options as nm_options
from nonmarkov.backends import numerical_backend as _nb

_SESSION = {"previous_state": None, "state": None}


def _default(variable: str, fallback: str) -> str:
    raw = os.environ.get(variable, "").strip().lower()
    return raw or fallback


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nonmarkov")
    group.addoption(
        "--backend",
        action="store",
        default=_default("NONMARKOV_BACKEND", "numpy"),
        choices=list(nm_config.VALID_BACKENDS),
        help="numerical backend for the session (default: $NONMARKOV_BACKEND or numpy)",
    )
    group.addoption(
        "--precision",
        action="store",
        default=_default("NONMARKOV_PRECISION", "double"),
        choices=list(nm_config.VALID_PRECISIONS),
        help="precision for the session (default: $NONMARKOV_PRECISION or double)",
    )


def pytest_configure(config: pytest.Config) -> None:
    name = config.getoption("--backend")
    precision = config.getoption("--precision")
    _SESSION["previous_state"] = _nb.get_state()
    try:
        backends.set_backend(name, precision)
    except ImportError as error:
        raise pytest.UsageError(str(error)) from error
    _SESSION["state"] = _nb.get_state()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION["previous_state"] is not None:
        _nb.set_state(_SESSION["previous_state"])
        _SESSION["previous_state"] = None


def pytest_report_header(config: pytest.Config) -> str:
    return f"nonmarkov backend: {backends.get_backend()}, precision: {backends.get_precision()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    active = config.getoption("--backend")
    for item in items:
        for marker in item.iter_markers(name="skip_backend"):
            name, reason = _marker_arguments(marker, item)
            if name == active:
                item.add_marker(pytest.mark.skip(reason=f"skipped on {name}: {reason}"))
        for marker in item.iter_markers(name="xfail_backend"):
            name, reason = _marker_arguments(marker, item)
            if name == active:
                strict = bool(marker.kwargs.get("strict", False))
                item.add_marker(
                    pytest.mark.xfail(reason=f"expected to fail on {name}: {reason}", strict=strict)
                )


def _marker_arguments(marker: pytest.Mark, item: pytest.Item) -> tuple[str, str]:
    """(backend name, reason) of a skip_backend/xfail_backend marker."""
    args = list(marker.args)
    name = args[0] if args else marker.kwargs.get("name")
    reason = args[1] if len(args) > 1 else marker.kwargs.get("reason", "no reason given")
    if name not in nm_config.VALID_BACKENDS:
        raise pytest.UsageError(
            f"{item.nodeid}: @{marker.name} needs a backend name, one of "
            f"{list(nm_config.VALID_BACKENDS)}; got {name!r}"
        )
    return name, reason


@pytest.fixture(autouse=True)
def _restore_session_backend():
    """Give every test the session backend, and take it back after the test."""
    state = _SESSION["state"]
    if state is not None and _nb.get_state() is not state:
        _nb.set_state(state)
    yield
    if state is not None and _nb.get_state() is not state:
        _nb.set_state(state)


@pytest.fixture(autouse=True, scope="session")
def _deterministic_engines():
    """Engine options with deterministic scheduling for the whole session (see above).
    Session scope, so that module-scoped fixtures computed before a test see it too."""
    with nm_options.use_options(deterministic=True):
        yield


@pytest.fixture(autouse=True, scope="session")
def _one_blas_thread():
    """BLAS with one thread for the whole session, as in the library's hot loops.

    The tests' own linear algebra (reference matrices, norms, exact solutions) is
    small; with a multi-threaded OpenBLAS it waits on its spinning threads, which on
    a shared two-core machine made the suite several times slower in wall and CPU
    time. Results do not depend on it (tests/test_threads.py sets its own limits)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture
def backend_name() -> str:
    """Name of the active backend, ``'numpy'`` or ``'jax'``."""
    return backends.get_backend()


@dataclass(frozen=True)
class Tolerances:
    """Relative tolerances for one precision.

    Attributes
    ----------
    precision : ``'double'`` or ``'single'``.
    exact : identities that hold to rounding (operator algebra, a matrix and
        its reconstruction): 1e-12 in double, 1e-5 in single precision.
    agree : the same quantity computed two ways, or on two backends (NumPy vs
        JAX, two quadrature routes): 1e-10 in double, 1e-4 in single.
    physics : a converged numerical method against an exact physical result
        (closed-form correlation functions, exact solvable dynamics): 1e-6 in
        double, 1e-3 in single. Tests of methods with a discretisation error
        (time step, truncation) should state their own, larger tolerance.

    ``tol.agree`` etc. are floats; ``tol["agree"]`` works too. Use
    ``tol.assert_close(actual, desired, kind="agree")`` to compare arrays with
    ``rtol = tol.<kind>`` and an absolute floor ``rtol * max(1, max|desired|)``,
    so that entries that are exactly zero compare sensibly.
    """

    precision: str
    exact: float
    agree: float
    physics: float

    def __getitem__(self, kind: str) -> float:
        if kind not in ("exact", "agree", "physics"):
            raise KeyError(f"unknown tolerance {kind!r}; use 'exact', 'agree' or 'physics'")
        return getattr(self, kind)

    def assert_close(self, actual, desired, kind: str = "agree", err_msg: str = "") -> None:
        """``numpy.testing.assert_allclose`` with this kind of tolerance."""
        rtol = self[kind]
        actual = numpy.asarray(actual)
        desired = numpy.asarray(desired)
        scale = max(1.0, float(numpy.max(numpy.abs(desired)))) if desired.size else 1.0
        numpy.testing.assert_allclose(
            actual, desired, rtol=rtol, atol=rtol * scale, err_msg=err_msg
        )


TOLERANCES = {
    "double": Tolerances("double", exact=1e-12, agree=1e-10, physics=1e-6),
    "single": Tolerances("single", exact=1e-5, agree=1e-4, physics=1e-3),
}


@pytest.fixture
def tol() -> Tolerances:
    """Tolerances for the active precision (see :class:`Tolerances`)."""
    return TOLERANCES[backends.get_precision()]
