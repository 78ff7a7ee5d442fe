"""The window engine's contract per mode, checked where an engine is chosen.

A window engine declares the ``spec.oldest`` modes it runs and whether it can resume
(``WindowCapabilities``); ``nonmarkov.engines`` refuses, before any work and naming the
engine, a request those do not cover: a process tensor (``'finalize'``) from an engine
that only traces, a resumed build from one that cannot load a window, an engine that
declares nothing. The engines here are the library's own steps behind other
declarations, put in place with ``use_engines``: what they do run is exact.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import nonmarkov as nm
from models import assert_coherences_match, independent_boson_problem
from nonmarkov.engines import (
    finalize_window_engine,
    trace_window_engine,
    use_engines,
)
from nonmarkov.engines.base import WindowCapabilities, WindowSpec
from nonmarkov.engines.eager_window import EagerWindowEngine
from nonmarkov.options import EngineOptions

SILENT = "silent"


class DelegatingWindow:
    """The eager window engine's steps behind the capabilities of the class."""

    capabilities = WindowCapabilities()

    def __init__(self, spec, options):
        self._inner = EagerWindowEngine(spec, options)
        self.steps_per_call = self._inner.steps_per_call
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self._inner, name)


class TraceOnlyWindow(DelegatingWindow):
    """Declares the trace mode (TEMPO) only, and no resume."""

    capabilities = WindowCapabilities(modes=("trace",), resume=False, trace_weight=True)


class FlatWindow(DelegatingWindow):
    """Declares no weighted class basis (``trace_weight`` 1 only)."""


class NoResumeWindow(DelegatingWindow):
    """Runs both modes but cannot load a window (no resumed builds)."""

    capabilities = WindowCapabilities(resume=False)


class StoppingWindow(DelegatingWindow):
    """Stops a PT-TEMPO build with an error at its fourth call (an interrupted build)."""

    def advance_finalize(self, num_steps):
        self.calls += 1
        if self.calls == 4:
            raise RuntimeError("stopped")
        return self._inner.advance_finalize(num_steps)


class UndeclaredWindow:
    """A window engine without a ``capabilities`` attribute."""

    def __init__(self, spec, options):
        self._inner = EagerWindowEngine(spec, options)


def tiny_spec(oldest: str) -> WindowSpec:
    """A one-class window of one point (nothing is run on it)."""
    return WindowSpec(
        front=np.ones(1),
        log_scale=0.0,
        projector=np.ones((1, 1)),
        first=np.ones((1, 1)),
        carrier=np.zeros(1, dtype=int),
        lag_rows=lambda lag: np.ones((1, 1)),
        out_map=np.eye(1),
        epsrel=1e-7,
        memory=None,
        oldest=oldest,
    )


def test_a_trace_only_engine_runs_tempo_exactly_and_is_refused_a_process_tensor():
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem("ohmic-T0")
    with use_engines(window=TraceOnlyWindow):
        dynamics = nm.tempo_compute(
            system, bath, rho0, 0.0, end_time, parameters, progress_type=SILENT
        )
        # full memory, epsrel 1e-10, [H_S, S] = 0: exact up to truncation (~1e-14)
        assert_coherences_match(dynamics.states, exact, closed, bound=1e-8)
        with pytest.raises(ValueError, match=r"TraceOnlyWindow.*oldest='finalize'"):
            nm.pt_tempo_compute(bath, 0.0, end_time, parameters, progress_type=SILENT)


def test_an_engine_without_the_weighted_basis_runs_tempo_with_the_flat_norm_only():
    """TEMPO's default trace_weight (10) is refused, naming the way out, before any
    step; with trace_weight=1 the same engine runs it exactly."""
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem("ohmic-T0")
    with use_engines(window=FlatWindow):
        with pytest.raises(ValueError, match=r"FlatWindow.*trace_weight other than 1"):
            nm.tempo_compute(system, bath, rho0, 0.0, end_time, parameters, progress_type=SILENT)
        dynamics = nm.tempo_compute(
            system,
            bath,
            rho0,
            0.0,
            end_time,
            parameters,
            progress_type=SILENT,
            options=EngineOptions(trace_weight=1),
        )
    assert_coherences_match(dynamics.states, exact, closed, bound=1e-8)


def test_an_engine_that_cannot_load_a_window_is_refused_a_resumed_build(tmp_path):
    system, bath, rho0, parameters, end_time, exact, closed = independent_boson_problem("ohmic-T1")
    filename = str(tmp_path / "pt.hdf5")
    build = {"process_tensor_file": filename, "checkpoint_interval": 0.0}
    with use_engines(window=StoppingWindow), pytest.raises(RuntimeError, match="stopped"):
        nm.PtTempo(bath, 0.0, 2 * end_time, parameters, **build).get_process_tensor(SILENT)
    assert os.path.exists(filename + ".checkpoint.npz") and not os.path.exists(filename)
    with use_engines(window=NoResumeWindow), pytest.raises(ValueError) as refusal:
        nm.PtTempo(bath, 0.0, 2 * end_time, parameters, resume=True, **build).get_process_tensor(
            SILENT
        )
    assert "NoResumeWindow" in str(refusal.value) and "resume" in str(refusal.value)
    assert not os.path.exists(filename)
    # the checkpoint stays: the backend's own engine, which can resume, finishes the
    # build, and the process tensor's dynamics are the model's exact ones
    pt = nm.PtTempo(bath, 0.0, 2 * end_time, parameters, resume=True, **build)
    process_tensor = pt.get_process_tensor(SILENT)
    dynamics = nm.compute_dynamics(
        system, rho0, process_tensor=process_tensor, progress_type=SILENT
    )
    count = len(exact)
    assert_coherences_match(dynamics.states[:count], exact, closed, bound=1e-8)


def test_an_engine_without_capabilities_is_a_type_error():
    with use_engines(window=UndeclaredWindow), pytest.raises(TypeError, match="UndeclaredWindow"):
        trace_window_engine(tiny_spec("trace"))


def test_each_mode_chooser_refuses_a_spec_of_the_other_mode():
    with pytest.raises(ValueError, match="trace window needs spec.oldest='trace'"):
        trace_window_engine(tiny_spec("finalize"))
    with pytest.raises(ValueError, match="finalize window needs spec.oldest='finalize'"):
        finalize_window_engine(tiny_spec("trace"))
