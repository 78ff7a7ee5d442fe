"""Batched dynamics (``compute_dynamics_batch``): every member of a batch equals its
own ``compute_dynamics`` run to 1e-12, on either backend, for time-independent
and time-dependent systems mixed, one or two process tensors, controls, and
record_all both ways; chunks, files, the result's API and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nonmarkov as nm
from models import spin_boson
from nonmarkov import backends
from nonmarkov.io.batched_results import BatchedDynamics
from nonmarkov.methods.batched_dynamics import compute_dynamics_batch

SX = nm.operators.sigma("x")
SZ = nm.operators.sigma("z")
STEPS = 10
DT = 0.1
TOLERANCE = 1e-12


@pytest.fixture(scope="module")
def two_process_tensors():
    """Two short process tensors of different baths and bonds (built with NumPy)."""
    parameters = nm.TempoParameters(dt=DT, epsrel=1e-9, dkmax=3)
    baths = [spin_boson()[1], nm.Bath(0.5 * SX, nm.PowerLawSD(0.1, 1.0, 3.0))]
    with backends.use_backend("numpy", "double"):
        return [
            nm.PtTempo(bath, 0.0, STEPS * DT, parameters).get_process_tensor(progress_type="silent")
            for bath in baths
        ]


def members():
    """Systems (two time-independent, one time-dependent) and their initial states."""
    systems = [
        nm.System(0.5 * SX),
        nm.TimeDependentSystem(lambda t: 0.5 * SX + 0.2 * math.cos(3.0 * t) * SZ),
        nm.System(0.5 * SX + 0.3 * SZ, gammas=[0.1], lindblad_operators=[nm.operators.sigma("-")]),
    ]
    states = [nm.operators.spin_dm(s) for s in ("up", "x+", "down")]
    return systems, states


def controls():
    flip = nm.Control(2)
    flip.add_single(3, nm.operators.left_super(SX) @ nm.operators.right_super(SX))
    dephase = nm.Control(2)
    dephase.add_single(5, nm.operators.left_super(SZ) @ nm.operators.right_super(SZ), post=True)
    return [flip, None, dephase]


def assert_members_equal(batch, systems, states, process_tensor, control=None, **keywords):
    """Member m of ``batch`` against compute_dynamics of member m."""
    assert isinstance(batch, BatchedDynamics) and len(batch) == len(systems)
    for m, member in enumerate(batch):
        reference = nm.compute_dynamics(
            systems[m],
            states[m],
            process_tensor=process_tensor,
            control=None if control is None else control[m],
            progress_type="silent",
            **keywords,
        )
        assert np.array_equal(member.times, reference.times)
        assert np.max(np.abs(member.states - reference.states)) < TOLERANCE, m
        assert np.array_equal(batch.states[m], member.states)


@pytest.mark.parametrize("record_all", [True, False])
@pytest.mark.parametrize("baths", [1, 2])
def test_each_member_equals_its_own_run(two_process_tensors, record_all, baths):
    systems, states = members()
    pts = two_process_tensors[:baths] if baths == 2 else two_process_tensors[0]
    batch = compute_dynamics_batch(
        systems, states, process_tensor=pts, record_all=record_all, progress_type="silent"
    )
    assert batch.states.shape == (3, STEPS + 1 if record_all else 2, 2, 2)
    assert_members_equal(batch, systems, states, pts, record_all=record_all)


@pytest.mark.parametrize("record_all", [True, False])
def test_members_with_their_own_controls(two_process_tensors, record_all):
    systems, states = members()
    batch = compute_dynamics_batch(
        systems,
        states,
        process_tensor=two_process_tensors,
        control=controls(),
        record_all=record_all,
        progress_type="silent",
    )
    assert_members_equal(
        batch, systems, states, two_process_tensors, controls(), record_all=record_all
    )
    assert [record["control"] for record in batch.metadata] == [True, False, True]


def test_one_system_over_a_batch_of_initial_states_and_a_shared_control(two_process_tensors):
    pt = two_process_tensors[0]
    system = nm.System(0.5 * SX + 0.1 * SZ)
    states = np.array([nm.operators.spin_dm(s) for s in ("up", "down", "x+", "y-")])
    flip = controls()[0]
    batch = compute_dynamics_batch(system, states, process_tensor=pt, control=flip)
    assert_members_equal(batch, [system] * 4, states, pt, [flip] * 4)
    # one state for many systems (a detuning scan)
    systems = [nm.System(0.5 * SX + e * SZ) for e in (0.0, 0.2, 0.4)]
    scan = compute_dynamics_batch(systems, states[0], process_tensor=pt, progress_type="silent")
    assert_members_equal(scan, systems, [states[0]] * 3, pt)


def test_chunks_files_and_no_bath_give_the_same_members(two_process_tensors, tmp_path):
    systems, states = members()
    pt = two_process_tensors[1]
    whole = compute_dynamics_batch(systems, states, process_tensor=pt, progress_type="silent")
    chunked = compute_dynamics_batch(
        systems, states, process_tensor=pt, batch_bytes=1, progress_type="silent"
    )
    assert np.max(np.abs(chunked.states - whole.states)) < TOLERANCE
    path = tmp_path / "pt.h5"
    pt.export(path)
    from_file = nm.import_process_tensor(path, "file")
    try:
        streamed = compute_dynamics_batch(
            systems, states, process_tensor=from_file, progress_type="silent"
        )
    finally:
        from_file.close()
    assert np.max(np.abs(streamed.states - whole.states)) < TOLERANCE
    alone = compute_dynamics_batch(systems, states, dt=DT, num_steps=4, progress_type="silent")
    assert_members_equal(alone, systems, states, None, dt=DT, num_steps=4)


def test_the_batched_result_reads_like_a_list_of_dynamics(two_process_tensors):
    systems, states = members()
    batch = compute_dynamics_batch(
        systems, states, process_tensor=two_process_tensors[0], start_time=0.5, num_steps=4
    )
    assert len(batch) == 3 and batch.times[0] == 0.5 and batch.times.shape == (5,)
    assert np.array_equal(batch[-1].states, batch.states[2])
    assert [len(d) for d in batch[1:]] == [5, 5]
    times, sz = batch.expectations(SZ, real=True)
    assert sz.shape == (3, 5) and np.array_equal(times, batch.times)
    for m, member in enumerate(batch):
        assert np.allclose(member.expectations(SZ, real=True)[1], sz[m], atol=1e-15)
        assert member.metadata["member"] == m and member.metadata["batch_size"] == 3
    assert np.allclose(batch.expectations()[1], 1.0)
    with pytest.raises(IndexError):
        batch[3]
    assert "3 members" in repr(batch)


def test_bad_input_is_refused_before_any_step(two_process_tensors):
    pt = two_process_tensors[0]
    systems, states = members()
    three = nm.System(np.diag([0.0, 1.0, 2.0]))
    bad = [
        (ValueError, "systems is an empty list", dict(systems=[])),
        (ValueError, "initial_states is an empty list", dict(initial_states=[])),
        (ValueError, "initial_states is empty", dict(initial_states=np.zeros((0, 2, 2)))),
        (ValueError, "initial_states must be given", dict(initial_states=None)),
        (
            ValueError,
            "systems\\[1\\] has dimension 3",
            dict(systems=[systems[0], three, systems[2]]),
        ),
        (ValueError, "same length.*systems: 3, initial_states: 2", dict(initial_states=states[:2])),
        (ValueError, "same length.*control: 2", dict(control=[None, None])),
        (TypeError, "control\\[1\\] must be a Control", dict(control=[None, "flip", None])),
        (TypeError, "systems\\[2\\] must be a System", dict(systems=systems[:2] + [SX])),
        (TypeError, "systems must be one or a list", dict(systems="spin")),
        (
            ValueError,
            "batch member 1: initial_state",
            dict(initial_states=[states[0], np.eye(3) / 3, SZ]),
        ),
        (ValueError, "batch_size|batch_bytes must be", dict(batch_bytes=0)),
        (TypeError, "record_all must be True or False", dict(record_all=1)),
    ]
    for error, message, changes in bad:
        arguments = dict(systems=systems, initial_states=states, process_tensor=pt)
        arguments.update(changes)
        with pytest.raises(error, match=message):
            compute_dynamics_batch(**arguments)
    with pytest.raises(ValueError, match="batch member 0: process tensor 0 has dimension 2"):
        compute_dynamics_batch(three, np.diag([1.0, 0.0, 0.0]), process_tensor=pt)


@pytest.mark.skip_backend("numpy", reason="the compiled, vmapped scan is the JAX engine's")
def test_jax_runs_a_mixed_batch_as_one_compiled_scan(two_process_tensors, monkeypatch):
    from nonmarkov.engines.jax import engine as compiled

    calls = []
    original = compiled.run_members

    def counted(*arguments, **keywords):
        calls.append(arguments[4])  # per_member
        return original(*arguments, **keywords)

    monkeypatch.setattr(compiled, "run_members", counted)
    systems, states = members()
    batch = compute_dynamics_batch(
        systems,
        states,
        process_tensor=two_process_tensors,
        control=controls(),
        options=nm.options.EngineOptions(compiled="on"),  # (the planner: host, short)
    )
    assert calls == [True]  # time-dependent members and controls: one scan, one chunk
    assert_members_equal(batch, systems, states, two_process_tensors, controls())


def test_a_family_of_parameterized_systems(two_process_tensors):
    """A ParameterizedSystem with one parameter array per member: a batch of pulses."""
    pt = two_process_tensors[0]
    family = nm.ParameterizedSystem(lambda x, z: 0.5 * x * SX + 0.5 * z * SZ)
    times = (np.arange(2 * STEPS) + 0.5) * DT / 2
    parameters = np.stack(
        [np.stack([a * np.exp(-((times - 0.5) ** 2)), 0.1 + 0 * times], axis=1) for a in (0.5, 2)]
    )  # (2, 2N, 2)
    rho0 = nm.operators.spin_dm("up")
    batch = compute_dynamics_batch(family, rho0, process_tensor=pt, parameters=parameters)
    for m in range(2):
        _, reference = nm.compute_gradient_and_dynamics(
            family, rho0, np.zeros((2, 2)), pt, parameters[m], progress_type="silent"
        )
        assert np.max(np.abs(batch[m].states - reference.states)) < TOLERANCE
    shared = compute_dynamics_batch(
        family, [rho0, nm.operators.spin_dm("down")], process_tensor=pt, parameters=parameters[1]
    )
    assert np.max(np.abs(shared[0].states - batch[1].states)) < TOLERANCE
    with pytest.raises(TypeError, match="systems\\[0\\] must be a ParameterizedSystem"):
        compute_dynamics_batch(nm.System(SX), rho0, process_tensor=pt, parameters=parameters)
    with pytest.raises(TypeError, match="needs its parameters"):
        compute_dynamics_batch(family, rho0, process_tensor=pt)
    with pytest.raises(ValueError, match="batch member 1: parameters has 4 rows"):
        compute_dynamics_batch(
            family, rho0, process_tensor=pt, parameters=[parameters[0], parameters[1][:4]]
        )


# ---------------------------------------------------------------- correlations


def test_batched_correlations_equal_each_members_own(two_process_tensors):
    """Mixed systems, controls, time_order 'full' (both chains of operators: A
    first and B first). (Two baths: the batched step of the dynamics tests.)"""
    from nonmarkov.methods.batched_correlations import compute_correlations_batch

    systems, states = members()
    arguments = (SZ, SX, [0, 4], slice(None), "full")
    pt = two_process_tensors[1]
    times, values = compute_correlations_batch(
        systems,
        pt,
        *arguments,
        states,
        control=controls(),
        progress_type="silent",
    )
    assert values.shape == (3, 2, STEPS + 1)
    for m in range(3):
        reference_times, reference = nm.compute_correlations(
            systems[m],
            pt,
            *arguments,
            states[m],
            control=controls()[m],
            progress_type="silent",
        )
        assert all(np.array_equal(t, r) for t, r in zip(times, reference_times))
        assert np.max(np.abs(values[m] - reference)) < TOLERANCE, m


@pytest.mark.parametrize("time_order", ["ordered", "anti"])
def test_batched_correlations_of_one_order_and_in_chunks(two_process_tensors, time_order):
    from nonmarkov.methods.batched_correlations import compute_correlations_batch

    systems, states = members()
    pt = two_process_tensors[0]
    arguments = (SZ, SX, [2, 6], [3, 7], time_order)
    whole = compute_correlations_batch(systems, pt, *arguments, states, progress_type="silent")[1]
    chunked = compute_correlations_batch(
        systems, pt, *arguments, states, batch_bytes=1, progress_type="silent"
    )[1]
    for m in range(3):
        reference = nm.compute_correlations(
            systems[m], pt, *arguments, states[m], progress_type="silent"
        )[1]
        assert np.array_equal(np.isnan(whole[m]), np.isnan(reference))
        assert np.nanmax(np.abs(whole[m] - reference)) < TOLERANCE
        assert np.nanmax(np.abs(chunked[m] - reference)) < TOLERANCE


def test_batched_correlations_refuse_bad_input(two_process_tensors):
    from nonmarkov.methods.batched_correlations import compute_correlations_batch

    pt = two_process_tensors[0]
    systems, states = members()
    three = nm.System(np.diag([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="systems is an empty list"):
        compute_correlations_batch([], pt, SZ, SZ, 0, 1, initial_states=states[0])
    with pytest.raises(ValueError, match="systems\\[1\\] has dimension 3"):
        compute_correlations_batch([systems[0], three], pt, SZ, SZ, 0, 1, initial_states=states[0])
    with pytest.raises(ValueError, match="same length"):
        compute_correlations_batch(systems, pt, SZ, SZ, 0, 1, initial_states=states[:2])
    with pytest.raises(ValueError, match="time_order"):
        compute_correlations_batch(systems, pt, SZ, SZ, 0, 1, "sideways", states)
    with pytest.raises(ValueError, match="operator_a"):
        compute_correlations_batch(systems, pt, np.eye(3), SZ, 0, 1, initial_states=states)
