"""The engine interface (``nonmarkov.engines``), tested through the interface.

Every window engine available (``EagerWindowEngine`` on NumPy; ``JaxWindowEngine``
with its compiled zip-up steps and as its planner chooses, when JAX is installed) runs
windows built
from a :class:`~nonmarkov.engines.base.WindowSpec` the way TEMPO and PT-TEMPO
build them; every chain engine (also the plain one of ``tests/engines_plain_python.py``)
runs the same :class:`~nonmarkov.engines.base.ChainRun`:

- a 'trace' window: the read-outs agree across engines and with ``nm.Tempo``,
  also when the steps come in calls of any length; on the independent-boson
  model the coherence is the exact one;
- a 'finalize' window: the finalised sites and the last window chain their
  bonds, have the same shapes on every engine, and contracted into a process
  tensor give the same dynamics as ``nm.PtTempo`` (sites differ by gauges);
- the chain engines: ``run`` with record_all on and off, constant and
  time-dependent propagators, with and without controls; ``step`` by hand
  equals ``run``;
- bad specs and calls of the wrong mode are refused; the engine is chosen by
  the active backend.

The JAX cases run in a NumPy session too: they switch to the JAX backend
around the construction and use of their engines (the session backend is
restored after each test, ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy
import pytest

import nonmarkov as nm
from engines_plain_python import PlainChainEngine
from models import (
    SX,
    SZ,
    independent_boson,
    independent_boson_exact,
    spectral_density,
    spin_boson,
)
from nonmarkov import backends
from nonmarkov.backends.host import to_backend
from nonmarkov.engines import chain_engine, window_engine
from nonmarkov.engines.base import ChainRun, WindowSpec
from nonmarkov.engines.eager_chain import EagerChainEngine
from nonmarkov.engines.eager_window import EagerWindowEngine
from nonmarkov.influence import DiscretisedInfluence
from nonmarkov.kernels.chain import close_bonds
from nonmarkov.methods.dynamics import chain_controls
from nonmarkov.methods.pt_tempo import first_point, pt_window_spec
from nonmarkov.options import default_options

# --------------------------------------------------------------------------
# the engines
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Kind:
    """One engine: its name, the backend it runs on, how to make it, and whether its
    steps run compiled (None: as the planner chooses; a kernel already compiled in the
    process makes even a short run compiled)."""

    name: str
    backend: str
    make: Callable[..., Any]
    compiled: bool | None = False

    def check(self, engine: Any) -> None:
        """The engine ran its steps where this kind says (the JAX engine's statistics)."""
        stats = getattr(engine, "stats", None)
        if stats is None:
            assert not self.compiled
            return
        assert stats.compiled_steps + stats.host_steps > 0
        if self.compiled is None:
            return
        assert (stats.compiled_steps > 0) == self.compiled, stats
        # compiled steps go on on the host where a bond outgrows the compiled regime
        host_reasons = [reason for _, where, _, reason in stats.decisions if where == "host"]
        assert (stats.host_steps > 0) == (not self.compiled or bool(host_reasons)), stats
        assert all("sketch" in reason for reason in host_reasons) or not self.compiled

    def active(self) -> contextlib.AbstractContextManager:
        return backends.use_backend(self.backend, "double")


def session_options(**changes):
    """The session's engine options (deterministic scheduling) with ``changes``."""
    return nm.options.default_options().replace(deterministic=True, **changes)


@pytest.fixture(params=["host", "jax-compiled", "jax-planned"])
def window_kind(request) -> Kind:
    if request.param == "host":
        return Kind("host", "numpy", lambda spec: EagerWindowEngine(spec, session_options()))
    pytest.importorskip("jax")
    from nonmarkov.engines.jax.window import JaxWindowEngine

    compiled = request.param == "jax-compiled"
    options = session_options(compiled="on" if compiled else "auto")
    return Kind(
        request.param,
        "jax",
        lambda spec: JaxWindowEngine(spec, options, numpy.complex128),
        True if compiled else None,
    )


@pytest.fixture(params=["host", "plain", "jax-compiled", "jax-planned"])
def chain_kind(request) -> Kind:
    if request.param == "host":
        return Kind("host", "numpy", lambda: EagerChainEngine(session_options()))
    if request.param == "plain":  # the smallest engine (docs/ARCHITECTURE.md, "Adding an engine")
        return Kind("plain", "numpy", lambda: PlainChainEngine(session_options()))
    pytest.importorskip("jax")
    from nonmarkov.engines.jax.engine import JaxChainEngine

    compiled = request.param == "jax-compiled"
    options = session_options(compiled="on" if compiled else "auto")
    return Kind(request.param, "jax", lambda: JaxChainEngine(options), True if compiled else None)


# --------------------------------------------------------------------------
# windows as TEMPO and PT-TEMPO build them
# --------------------------------------------------------------------------


@dataclasses.dataclass
class TraceProblem:
    """A TEMPO window after its first step and the propagators of the next steps."""

    spec: WindowSpec
    pairs: list[tuple[Any, Any]]  # (between, second) of steps 1, 2, ...
    first_state: Any  # rho(t_1)
    dimension: int


def trace_problem(system, bath, rho0, parameters, num_steps, unique=False) -> TraceProblem:
    """As ``TempoWindow.start`` and ``TempoWindow.advance`` (time-independent system:
    the same propagator arrays at every step)."""
    influence = DiscretisedInfluence.from_parameters(bath, parameters, unique)
    to_eigen, from_eigen = influence.liouville_transforms()
    first, second = (
        to_eigen @ half @ from_eigen for half in system.get_propagators(parameters.dt)(0)
    )
    own = influence.own_factor()
    front = own[influence.classes] * (first @ (to_eigen @ rho0.reshape(-1)))
    norm = float(numpy.linalg.norm(front))
    state = from_eigen @ (second @ front)
    carrier = influence.carrier_rows[influence.classes]
    spec = WindowSpec(
        front=front / norm,
        log_scale=math.log(norm),
        projector=influence.class_projector,
        first=influence.lag_matrix_rows(1)[carrier] * own[influence.classes][:, None],
        carrier=carrier,
        lag_rows=influence.lag_matrix_rows,
        out_map=from_eigen,
        epsrel=parameters.epsrel,
        memory=parameters.dkmax,
        oldest="trace",
        trace_weight=default_options().trace_weight,  # as TEMPO's window
    )
    between = first @ second
    d = system.dimension
    return TraceProblem(spec, [(between, second)] * (num_steps - 1), state.reshape(d, d), d)


def run_trace(kind: Kind, problem: TraceProblem, calls=(0, 2, 5, 1)):
    """The read-outs as (steps, d, d) and ranks of ``kind``'s engine, the steps handed
    over in calls of the lengths ``calls`` and then the rest."""
    with kind.active():
        engine = kind.make(problem.spec)
        assert engine.memory == (problem.spec.memory or 0)
        assert isinstance(engine.steps_per_call, int) and engine.steps_per_call >= 1
        readouts, ranks = [], []
        begin = 0
        for size in list(calls) + [len(problem.pairs)]:
            vectors, bonds = engine.advance(problem.pairs[begin : begin + size])
            assert numpy.shape(vectors) == (len(bonds), problem.spec.projector.shape[0])
            assert len(bonds) == min(size, len(problem.pairs) - begin)
            begin += len(bonds)
            readouts.extend(numpy.asarray(vectors))
            ranks.extend(bonds)
    d = problem.dimension
    return numpy.asarray(readouts).reshape(-1, d, d), ranks, engine


SPIN_BOSON = nm.TempoParameters(dt=0.1, epsrel=1e-8, dkmax=4)


def test_a_trace_window_reads_out_tempos_states_on_every_engine(window_kind):
    """Calls of 0, 2, 5, 1 and 11 steps (a host start spans the first two); the same
    read-outs and bonds as the host engine in one call and as ``nm.Tempo`` (NumPy)."""
    system, bath, rho0 = spin_boson()
    problem = trace_problem(system, bath, rho0, SPIN_BOSON, 20)
    states, ranks, engine = run_trace(window_kind, problem)
    window_kind.check(engine)
    expected, expected_ranks, _ = run_trace(
        Kind("host", "numpy", EagerWindowEngine), problem, calls=()
    )
    with backends.use_backend("numpy", "double"):
        tempo = nm.Tempo(system, bath, SPIN_BOSON, rho0, 0.0)
        dynamics = numpy.asarray(tempo.compute(2.0, progress_type="silent").states)
    assert len(states) == len(dynamics) - 2 == 19
    numpy.testing.assert_allclose(problem.first_state, dynamics[1], rtol=0, atol=1e-12)
    numpy.testing.assert_allclose(states, expected, rtol=0, atol=1e-10)
    numpy.testing.assert_allclose(states, dynamics[2:], rtol=0, atol=1e-10)
    assert ranks == expected_ranks
    assert max(ranks) == tempo.max_bond_dimension > 1


def test_a_trace_window_gives_the_exact_independent_boson_coherence(window_kind):
    """Full memory (no host start), epsrel 1e-10, [H_S, S] = 0: exact up to truncation and
    quadrature; the bound of tests/test_tempo.py."""
    alpha, cutoff, dt, steps = 0.2, 4.0, 0.2, 6
    system, bath, rho0 = independent_boson("ohmic-T0", alpha=alpha, cutoff=cutoff)
    parameters = nm.TempoParameters(dt=dt, epsrel=1e-10)
    problem = trace_problem(system, bath, rho0, parameters, steps)
    states, _, engine = run_trace(window_kind, problem, calls=(2,))
    window_kind.check(engine)
    states = numpy.concatenate([problem.first_state[None], states])
    exact = independent_boson_exact(
        rho0,
        [0.3, -0.3],
        [0.5, -0.5],
        spectral_density(alpha, 1.0, cutoff, "exponential"),
        0.0,
        dt * numpy.arange(1, steps + 1),
        60.0 * cutoff,
    )
    closed = rho0[0, 1] * numpy.exp(-0.6j * dt * numpy.arange(1, steps + 1))
    assert numpy.max(numpy.abs(exact[:, 0, 1] - closed)) > 1e-2  # the bath shows
    numpy.testing.assert_allclose(
        numpy.abs(states[:, 0, 1]), numpy.abs(exact[:, 0, 1]), rtol=0, atol=1e-8
    )
    numpy.testing.assert_allclose(states, exact, rtol=0, atol=1e-8)


# --------------------------------------------------------------------------
# 'finalize' windows (PT-TEMPO)
# --------------------------------------------------------------------------

PT_PARAMETERS = nm.TempoParameters(dt=0.1, epsrel=1e-9, dkmax=3)
PT_STEPS = 15


def finalize_problem():
    """PT-TEMPO's window of the spin-boson bath after its first point (as ``PtTempo._run``)."""
    influence = DiscretisedInfluence.from_parameters(spin_boson()[1], PT_PARAMETERS)
    front, log_scale = first_point(influence)
    return influence, pt_window_spec(
        influence, front, log_scale, PT_PARAMETERS.epsrel, PT_PARAMETERS.dkmax
    )


def run_finalize(kind: Kind, spec: WindowSpec, calls=(0, 2, 5, 1)):
    """Finalised sites (with the log-scales before their steps) of PT_STEPS - 1 steps in
    calls of ``calls`` and the rest, and the window at the end."""
    with kind.active():
        engine = kind.make(spec)
        finalised, ranks = [], []
        done = 0
        for size in list(calls) + [PT_STEPS - 1]:
            size = min(size, PT_STEPS - 1 - done)
            sites, bonds = engine.advance_finalize(size)
            assert len(sites) == len(bonds) == size
            finalised.extend(sites)
            ranks.extend(bonds)
            done += size
        window, log_scale = engine.host_window()
    return finalised, ranks, window, log_scale, engine


def contracted(influence, finalised, window, log_scale):
    """The process tensor of the finalised sites and the last window (oldest first), the
    log-scale shared evenly; and its dynamics for H_S = 0.5 sx + 0.2 sz (NumPy)."""
    sites = [site for site, _ in finalised if site is not None] + list(reversed(window))
    to_eigen, from_eigen = influence.liouville_transforms()
    process_tensor = nm.SimpleProcessTensor(
        2, PT_PARAMETERS.dt, to_eigen, from_eigen, classes=influence.classes
    )
    share = log_scale / len(sites)
    for step, site in enumerate(sites):
        process_tensor.set(step, numpy.transpose(site, (2, 0, 1)) * math.exp(share))
    return process_tensor, pt_dynamics(process_tensor)


def pt_dynamics(process_tensor):
    with backends.use_backend("numpy", "double"):
        dynamics = nm.compute_dynamics(
            nm.System(0.5 * SX + 0.2 * SZ),
            spin_boson()[2],
            process_tensor=process_tensor,
            progress_type="silent",
        )
    return numpy.asarray(dynamics.states)


@pytest.mark.slow
def test_a_finalize_window_gives_pt_tempos_process_tensor_on_every_engine(window_kind):
    """Calls of 0, 2, 5, 1 and 6 steps, against the host engine in one call and
    ``nm.PtTempo`` (NumPy)."""
    influence, spec = finalize_problem()
    finalised, ranks, window, log_scale, engine = run_finalize(window_kind, spec)
    window_kind.check(engine)
    reference = run_finalize(Kind("host", "numpy", EagerWindowEngine), spec, calls=())
    # the bonds chain: finalised sites M[l, c, r] oldest first (r towards the older),
    # then the window oldest first, its front (1, x, k) last
    sites = [site for site, _ in finalised if site is not None]
    assert len(sites) + len(window) == PT_STEPS
    m = influence.num_classes
    assert sites[0].shape[2] == 1 and window[0].shape[:2] == (1, m)
    chain = sites + list(reversed(window))
    for older, newer in zip(chain, chain[1:]):
        assert older.ndim == newer.ndim == 3 and older.shape[1] == m
        assert older.shape[0] == newer.shape[2]
    # the same shapes, log-scales and bonds as the host engine (the sites differ by gauges)
    assert [None if site is None else site.shape for site, _ in finalised] == [
        None if site is None else site.shape for site, _ in reference[0]
    ]
    assert [site.shape for site in window] == [site.shape for site in reference[2]]
    assert ranks == reference[1]
    numpy.testing.assert_allclose(
        [log for _, log in finalised], [log for _, log in reference[0]], rtol=0, atol=1e-10
    )
    numpy.testing.assert_allclose(log_scale, reference[3], rtol=0, atol=1e-10)
    process_tensor, states = contracted(influence, finalised, window, log_scale)
    _, expected = contracted(influence, reference[0], reference[2], reference[3])
    with backends.use_backend("numpy", "double"):
        pt_tempo = nm.PtTempo(spin_boson()[1], 0.0, PT_STEPS * PT_PARAMETERS.dt, PT_PARAMETERS)
        built = pt_tempo.get_process_tensor(progress_type="silent")
    numpy.testing.assert_array_equal(
        process_tensor.get_bond_dimensions(), built.get_bond_dimensions()
    )
    numpy.testing.assert_allclose(states, expected, rtol=0, atol=1e-10)
    numpy.testing.assert_allclose(states, pt_dynamics(built), rtol=0, atol=1e-10)


def test_the_jax_window_moves_between_host_and_compiled_steps():
    """A window handed over mid-run through ``host_window``/``load_window``: host
    steps, then compiled ones from the loaded window, then host steps again from the
    compiled window; the finalised sites and the window at the end are those of the
    host engine (to rounding, up to gauges: through the dynamics of the process tensor)."""
    pytest.importorskip("jax")
    from nonmarkov.engines.jax.window import JaxWindowEngine

    # small bonds (the compiled regime) and no truncation decision near its threshold
    parameters = nm.TempoParameters(dt=PT_PARAMETERS.dt, epsrel=1e-6, dkmax=PT_PARAMETERS.dkmax)
    bath = spin_boson(alpha=0.1, temperature=0.5)[1]
    influence = DiscretisedInfluence.from_parameters(bath, parameters)
    front, log_scale = first_point(influence)
    spec = pt_window_spec(influence, front, log_scale, parameters.epsrel, parameters.dkmax)
    reference = run_finalize(Kind("host", "numpy", EagerWindowEngine), spec, calls=())
    finalised = []
    with backends.use_backend("jax", "double"):
        host = EagerWindowEngine(spec, session_options())
        with backends.use_backend("numpy", "double"):
            finalised += host.advance_finalize(4)[0]
            window, log_scale = host.host_window()
        engine = JaxWindowEngine(spec, session_options(compiled="on"), numpy.complex128)
        engine.load_window(window, log_scale, steps=4)
        finalised += engine.advance_finalize(5)[0]
        assert engine.stats.compiled_steps == 5 and engine.stats.host_steps == 0
        window, log_scale = engine.host_window()
        planned = JaxWindowEngine(spec, session_options(compiled="off"), numpy.complex128)
        planned.load_window(window, log_scale, steps=9)
        finalised += planned.advance_finalize(PT_STEPS - 10)[0]
        assert planned.stats.host_steps == PT_STEPS - 10
        window, log_scale = planned.host_window()
    assert [s is None for s, _ in finalised] == [s is None for s, _ in reference[0]]
    assert [site.shape for site in window] == [site.shape for site in reference[2]]
    _, states = contracted(influence, finalised, window, log_scale)
    _, expected = contracted(influence, reference[0], reference[2], reference[3])
    numpy.testing.assert_allclose(states, expected, rtol=0, atol=1e-10)


# --------------------------------------------------------------------------
# chain engines
# --------------------------------------------------------------------------

CHAIN_STEPS = 12
CHAIN_DT = 0.1


@pytest.fixture(scope="module")
def two_process_tensors():
    """Two short process tensors of different baths and bonds (built with NumPy)."""
    parameters = nm.TempoParameters(dt=CHAIN_DT, epsrel=1e-9, dkmax=3)
    baths = [spin_boson()[1], nm.Bath(0.5 * SX, nm.PowerLawSD(0.1, 1.0, 3.0))]
    with backends.use_backend("numpy", "double"):
        return [
            nm.PtTempo(bath, 0.0, CHAIN_STEPS * CHAIN_DT, parameters).get_process_tensor(
                progress_type="silent"
            )
            for bath in baths
        ]


def chain_case(constant: bool, controlled: bool):
    """(system, control or None) of a chain test."""
    if constant:
        system = nm.System(0.5 * SX + 0.2 * SZ)
    else:
        system = nm.TimeDependentSystem(lambda t: 0.5 * SX + 0.2 * math.cos(3.0 * t) * SZ)
    control = None
    if controlled:
        control = nm.Control(2)
        control.add_single(3, nm.operators.left_super(SX) @ nm.operators.right_super(SX))
        control.add_single(6, nm.operators.left_super(SZ) @ nm.operators.right_super(SZ), post=True)
    return system, control


def chain_run(system, control, process_tensors, record_all, counted):
    initial_control, controls = chain_controls(control, CHAIN_DT, 0.0)
    initial = spin_boson()[2].reshape(-1)
    return ChainRun(
        initial=initial if initial_control is None else initial_control @ initial,
        num_steps=CHAIN_STEPS,
        propagators=system.get_propagators(CHAIN_DT, 0.0),
        constant_propagators=isinstance(system, nm.System),
        controls=controls,
        process_tensors=process_tensors,
        record_all=record_all,
        on_step=counted.append,
    )


@pytest.mark.parametrize("controlled", [False, True], ids=["free", "controls"])
@pytest.mark.parametrize("constant", [True, False], ids=["constant", "time-dependent"])
@pytest.mark.parametrize("record_all", [True, False], ids=["all", "last"])
@pytest.mark.slow
def test_chain_engines_run_the_same_chain(
    chain_kind, two_process_tensors, record_all, constant, controlled, monkeypatch
):
    """Against ``compute_dynamics`` on NumPy; on JAX with ``compiled='on'``, every chain
    (constant or time-dependent propagators, controls folded in) is the compiled scan, a
    batch of one; as planned, these short chains run on the host
    unless their scan is compiled already, a decision the engine records with its
    reason."""
    system, control = chain_case(constant, controlled)
    scans = []
    if chain_kind.backend == "jax":
        from nonmarkov.engines.jax import engine as jax_engine

        scan = jax_engine.run_members
        monkeypatch.setattr(jax_engine, "run_members", lambda *args: scans.append(1) or scan(*args))
    with backends.use_backend("numpy", "double"):
        expected = numpy.asarray(
            nm.compute_dynamics(
                system,
                spin_boson()[2],
                process_tensor=two_process_tensors,
                control=control,
                record_all=record_all,
                progress_type="silent",
            ).states
        )[1:]
    counted = []
    with chain_kind.active():
        engine = chain_kind.make()
        readouts = engine.run(chain_run(system, control, two_process_tensors, record_all, counted))
    assert isinstance(readouts, numpy.ndarray)
    assert readouts.shape == ((CHAIN_STEPS if record_all else 1), 4)
    assert sum(counted) == CHAIN_STEPS
    if chain_kind.compiled is not None:  # (as planned: a scan compiled before pays at once)
        assert len(scans) == chain_kind.compiled
    if chain_kind.backend == "jax":
        (entry, where, reason), *_ = engine.decisions
        assert entry == "run" and where == ("compiled" if scans else "host") and reason
    numpy.testing.assert_allclose(readouts.reshape(-1, 2, 2), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "constant, controlled",
    [(True, False), (False, True)],
    ids=["constant-free", "time-dependent-controls"],
)
@pytest.mark.slow
def test_chain_steps_by_hand_equal_the_run(chain_kind, two_process_tensors, constant, controlled):
    system, control = chain_case(constant, controlled)
    run = chain_run(system, control, two_process_tensors, True, [])
    with chain_kind.active():
        engine = chain_kind.make()
        expected = engine.run(run)
        prepared = engine.prepare(two_process_tensors, CHAIN_STEPS, True)
        state = to_backend(numpy.asarray(run.initial).reshape(1, 1, 4))
        readouts = []
        for step in range(CHAIN_STEPS):
            before, after = (None, None) if control is None else run.controls(step)
            first, second = run.propagators(step)
            state = engine.step(state, step, first, second, prepared, before, after)
            vector = close_bonds(state, [pt.cap(step) for pt in prepared])
            readouts.append(numpy.asarray(vector).reshape(-1))
    numpy.testing.assert_allclose(numpy.asarray(readouts), expected, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------
# refusals and the choice of engine
# --------------------------------------------------------------------------


def test_a_bad_spec_is_refused():
    _, spec = finalize_problem()
    with pytest.raises(ValueError, match="oldest"):
        dataclasses.replace(spec, oldest="x")
    with pytest.raises(ValueError, match="oldest"):
        WindowSpec(
            **{
                **{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)},
                "oldest": "keep",
            }
        )


def test_the_active_backend_chooses_the_engines():
    _, spec = finalize_problem()
    with backends.use_backend("numpy", "double"):
        assert isinstance(window_engine(spec), EagerWindowEngine)
        assert type(chain_engine()) is EagerChainEngine
    with pytest.raises(TypeError, match="options"):
        window_engine(spec, {"compiled": "on"})
    pytest.importorskip("jax")
    from nonmarkov.engines.jax.engine import JaxChainEngine
    from nonmarkov.engines.jax.window import JaxWindowEngine

    with backends.use_backend("jax", "double"):
        assert isinstance(window_engine(spec, session_options()), JaxWindowEngine)
        assert isinstance(chain_engine(), JaxChainEngine)
