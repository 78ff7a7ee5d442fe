"""Tests of when a ``Control`` acts (OQuPy 0.5 timing) and of ``add_continuous``.

The rule under test, for steps k = 0..N: apply pre(k) (``post=False``),
record rho(t_k), apply post(k) (``post=True``), propagate to t_{k+1}; so pre(0)
acts on the initial state before it is recorded, pre(N) on the final state and
post(N) never. Operators of a correlation at t_k act on the recorded rho(t_k).

- Without a bath: the recorded states against :func:`oqupy_loop`, that loop
  written here with ``scipy.linalg.expm`` of a Liouvillian (row-major vec,
  vec(A rho B) = (A kron B^T) vec(rho)): a system without dynamics (the flip of
  sigma_z, exact list) and one with H = 0.5 sigma_x and a decay.
- With a weak real bath (a process tensor): identities that hold exactly for
  any process tensor (pre(0) is a change of the initial state, post(N) does
  nothing, pre(N) only changes the last state, pre(k) and post(k) differ only
  at t_k), and a zero-coupling bath against the hand loop.
- Floats and ints, start_time, several controls at one slot (their order).
- Correlations with a control, against ``compute_dynamics`` and against
  correlations with the control written as operators.
- ``add_continuous`` against the same controls added one by one; bad output.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import nonmarkov as nm
from models import SIGMA_MINUS, SX, SY, SZ, liouvillian, pure_state

SILENT = {"progress_type": "silent"}
DT = 0.2
STEPS = 5
HAMILTONIAN = 0.5 * SX
GAMMA = 0.4
RHO0 = pure_state(0.8, 0.6 * np.exp(0.5j))


def unitary_super(unitary):
    """vec(U rho U^dag) = (U kron conj(U)) vec(rho), row-major."""
    return np.kron(unitary, unitary.conj())


def rotation(angle, axis):
    """exp(-i angle axis / 2)."""
    return scipy.linalg.expm(-0.5j * angle * axis)


FLIP = unitary_super(SX)
KICK_A = unitary_super(rotation(0.9, SY))
KICK_B = unitary_super(rotation(0.7, SZ) @ rotation(0.4, SX))
assert np.max(np.abs(KICK_A @ KICK_B - KICK_B @ KICK_A)) > 0.1  # the order matters
# a non-unitary one: partial dephasing
DEPHASE = 0.7 * np.eye(4) + 0.3 * unitary_super(SZ)


def lindblad_system():
    return nm.System(HAMILTONIAN, gammas=[GAMMA], lindblad_operators=[SIGMA_MINUS])


def lindblad_step(dt=DT):
    return scipy.linalg.expm(liouvillian(HAMILTONIAN, GAMMA, SIGMA_MINUS) * dt)


def oqupy_loop(rho0, num_steps, step_super, pre=None, post=None, inserts=None):
    """The recorded states (N + 1, d, d) of OQuPy's loop, written out here.

    For k = 0..N: vec <- pre[k] vec; (k == N: stop); vec <- inserts[k] vec
    (operators of a correlation act on the state recorded at t_k); record;
    vec <- post[k] vec; vec <- step_super vec. Then the final state is
    recorded (with the inserts at N). ``pre``/``post``/``inserts``: dicts step ->
    (d^2, d^2).
    """
    pre, post, inserts = pre or {}, post or {}, inserts or {}
    d = rho0.shape[0]
    vec = rho0.reshape(-1).astype(complex)
    states = []
    for k in range(num_steps + 1):
        if k in pre:
            vec = pre[k] @ vec
        if k in inserts:
            vec = inserts[k] @ vec
        states.append(vec.reshape(d, d))
        if k == num_steps:
            break
        if k in post:
            vec = post[k] @ vec
        vec = step_super @ vec
    return np.array(states)


def control_of(pre=None, post=None, as_time=False, start_time=0.0):
    """A Control with ``pre``/``post`` dicts step -> superoperator (or a list of them)."""
    control = nm.Control(2)
    for is_post, slots in ((False, pre or {}), (True, post or {})):
        for k, operators in slots.items():
            for operator in operators if isinstance(operators, list) else [operators]:
                time = start_time + k * DT if as_time else k
                control.add_single(time, operator, post=is_post)
    return control


def dynamics(system, control=None, rho0=RHO0, **kwargs):
    arguments = {"dt": DT, "num_steps": STEPS, **kwargs}
    if "process_tensor" in kwargs:
        arguments.pop("dt")
        arguments.pop("num_steps")
    return nm.compute_dynamics(system, rho0, control=control, **arguments, **SILENT)


@pytest.fixture(scope="module")
def bath_pt():
    """A small process tensor of a weak real bath (not diagonal in H_S), 5 steps of 0.2."""
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.1, 1.0, 4.0))
    parameters = nm.TempoParameters(dt=DT, epsrel=1e-9, dkmax=3)
    return nm.pt_tempo_compute(bath, 0.0, STEPS * DT, parameters, **SILENT)


@pytest.fixture(scope="module")
def zero_coupling_pt():
    bath = nm.Bath(0.5 * SX + 0.2 * SZ, nm.PowerLawSD(0.0, 1.0, 4.0))
    parameters = nm.TempoParameters(dt=DT, epsrel=1e-10, dkmax=2)
    return nm.pt_tempo_compute(bath, 0.0, STEPS * DT, parameters, **SILENT)


# --------------------------------------------------------------------------
# without a bath: against the loop written out
# --------------------------------------------------------------------------


@pytest.mark.parametrize("as_time", [False, True], ids=["step", "time"])
def test_flip_without_dynamics_is_recorded_as_in_oqupy(as_time):
    """The issue's case: a pre-control at step 2 is in the state recorded at t_2."""
    system = nm.System(np.zeros((2, 2)))
    up = np.diag([1.0, 0.0])
    for post, expected in ((False, [1, 1, -1, -1, -1]), (True, [1, 1, 1, -1, -1])):
        control = control_of(**{"post" if post else "pre": {2: FLIP}}, as_time=as_time)
        result = dynamics(system, control, rho0=up, num_steps=4)
        np.testing.assert_allclose(result.times, DT * np.arange(5), atol=1e-14)
        np.testing.assert_allclose(result.expectations(SZ, real=True)[1], expected, atol=1e-14)


@pytest.mark.parametrize(
    "pre, post",
    [
        ({2: KICK_A}, {}),
        ({}, {2: KICK_A}),
        ({0: KICK_A}, {}),
        ({STEPS: KICK_A}, {}),
        ({}, {STEPS: KICK_A}),
        ({0: KICK_B, 3: DEPHASE}, {0: KICK_A, 2: KICK_B, 4: DEPHASE}),
        ({1: KICK_A, 2: KICK_B}, {1: KICK_B, 2: KICK_A}),
    ],
    ids=["pre-2", "post-2", "pre-0", "pre-N", "post-N", "mixed", "both-at-one-step"],
)
@pytest.mark.parametrize("as_time", [False, True], ids=["step", "time"])
def test_controls_with_dynamics_match_the_loop(pre, post, as_time):
    expected = oqupy_loop(RHO0, STEPS, lindblad_step(), pre, post)
    result = dynamics(lindblad_system(), control_of(pre, post, as_time))
    np.testing.assert_allclose(result.states, expected, rtol=0, atol=1e-12)
    plain = oqupy_loop(RHO0, STEPS, lindblad_step())
    if pre or set(post) - {STEPS}:
        assert np.max(np.abs(plain - expected)) > 1e-2  # the control did something
    else:
        np.testing.assert_allclose(result.states, plain, rtol=0, atol=1e-12)


def test_start_time_places_time_stamped_controls():
    start = 0.5
    control = control_of({3: KICK_A}, {1: KICK_B}, as_time=True, start_time=start)
    result = dynamics(lindblad_system(), control, start_time=start)
    expected = oqupy_loop(RHO0, STEPS, lindblad_step(), {3: KICK_A}, {1: KICK_B})
    np.testing.assert_allclose(result.times, start + DT * np.arange(STEPS + 1), atol=1e-12)
    np.testing.assert_allclose(result.states, expected, rtol=0, atol=1e-12)


def test_time_stamped_controls_go_to_the_nearest_step():
    control = nm.Control(2)
    control.add_single(2 * DT + 0.3 * DT, KICK_A)  # nearest step 2
    control.add_single(4 * DT - 0.4 * DT, KICK_B, post=True)  # nearest step 4
    control.add_single(-3.0, FLIP)  # before the grid: never applied
    control.add_single(99.0, FLIP)  # after it: never applied
    result = dynamics(lindblad_system(), control)
    expected = oqupy_loop(RHO0, STEPS, lindblad_step(), {2: KICK_A}, {4: KICK_B})
    np.testing.assert_allclose(result.states, expected, rtol=0, atol=1e-12)


def test_record_all_false_keeps_pre_zero_and_pre_n():
    control = control_of({0: KICK_A, STEPS: KICK_B}, {2: DEPHASE})
    last = dynamics(lindblad_system(), control, record_all=False)
    expected = oqupy_loop(RHO0, STEPS, lindblad_step(), {0: KICK_A, STEPS: KICK_B}, {2: DEPHASE})
    np.testing.assert_allclose(last.times, [0.0, STEPS * DT], atol=1e-12)
    np.testing.assert_allclose(last.states, expected[[0, -1]], rtol=0, atol=1e-12)


def test_no_steps_records_the_initial_state_after_pre_zero():
    control = control_of({0: KICK_A}, {0: KICK_B})
    result = dynamics(lindblad_system(), control, num_steps=0)
    np.testing.assert_allclose(result.times, [0.0], atol=1e-14)
    np.testing.assert_allclose(
        result.states, [(KICK_A @ RHO0.reshape(-1)).reshape(2, 2)], rtol=0, atol=1e-14
    )


# --------------------------------------------------------------------------
# several controls at one slot: the documented order
# --------------------------------------------------------------------------


@pytest.mark.parametrize("post", [False, True], ids=["pre", "post"])
def test_controls_at_one_slot_act_in_the_order_added(post):
    """A then B at one slot is B @ A (B acts after A), for steps and for equal times."""
    for time in (2, 2 * DT):
        control = nm.Control(2)
        control.add_single(time, KICK_A, post=post)
        control.add_single(time, KICK_B, post=post)
        slot = {2: KICK_B @ KICK_A}
        expected = oqupy_loop(
            RHO0, STEPS, lindblad_step(), *((slot, {}) if not post else ({}, slot))
        )
        result = dynamics(lindblad_system(), control)
        np.testing.assert_allclose(result.states, expected, rtol=0, atol=1e-12)


def test_time_stamped_controls_at_one_slot_act_by_time():
    control = nm.Control(2)
    control.add_single(2 * DT + 0.2 * DT, KICK_A)  # later time, added first
    control.add_single(2 * DT - 0.2 * DT, KICK_B)  # earlier time: acts first
    pre, _ = control.get_controls(2, DT)
    np.testing.assert_allclose(pre, KICK_A @ KICK_B, atol=1e-14)


def test_steps_are_nearest_the_recorded_state():
    """pre(k): time-stamped, then step controls; post(k): step, then time-stamped."""
    control = nm.Control(2)
    control.add_single(2, KICK_A)
    control.add_single(2 * DT, KICK_B)
    control.add_single(3, KICK_A, post=True)
    control.add_single(3 * DT, KICK_B, post=True)
    np.testing.assert_allclose(control.get_controls(2, DT)[0], KICK_A @ KICK_B, atol=1e-14)
    np.testing.assert_allclose(control.get_controls(3, DT)[1], KICK_B @ KICK_A, atol=1e-14)
    result = dynamics(lindblad_system(), control)
    expected = oqupy_loop(RHO0, STEPS, lindblad_step(), {2: KICK_A @ KICK_B}, {3: KICK_B @ KICK_A})
    np.testing.assert_allclose(result.states, expected, rtol=0, atol=1e-12)


def test_get_controls_and_keyword_names():
    control = nm.Control(2)
    control.add_single(time=1, control_operation=KICK_A, post=True)
    control.add_single(1, KICK_B)
    pre, post = control.get_controls(1)
    np.testing.assert_allclose(pre, KICK_B, atol=0)
    np.testing.assert_allclose(post, KICK_A, atol=0)
    assert control.get_controls(0) == (None, None)
    control.add_single(0.2, KICK_A)
    with pytest.raises(ValueError, match="dt"):
        control.get_controls(1)


# --------------------------------------------------------------------------
# with a process tensor
# --------------------------------------------------------------------------


def test_zero_coupling_process_tensor_matches_the_loop(zero_coupling_pt):
    pre, post = {0: KICK_B, 2: KICK_A, STEPS: DEPHASE}, {1: KICK_A, 2: DEPHASE, STEPS: FLIP}
    result = dynamics(lindblad_system(), control_of(pre, post), process_tensor=zero_coupling_pt)
    expected = oqupy_loop(RHO0, STEPS, lindblad_step(), pre, post)
    np.testing.assert_allclose(result.states, expected, rtol=0, atol=1e-10)


def test_pre_zero_is_a_change_of_the_initial_state(bath_pt):
    system = lindblad_system()
    result = dynamics(system, control_of({0: KICK_A}), process_tensor=bath_pt)
    moved = (KICK_A @ RHO0.reshape(-1)).reshape(2, 2)
    reference = dynamics(system, rho0=moved, process_tensor=bath_pt)
    np.testing.assert_allclose(result.states, reference.states, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.states[0], moved, rtol=0, atol=1e-14)


def test_controls_at_the_last_step(bath_pt):
    """post(N) changes nothing; pre(N) only the last recorded state."""
    system = lindblad_system()
    plain = dynamics(system, process_tensor=bath_pt).states
    post_n = dynamics(system, control_of(post={STEPS: KICK_A}), process_tensor=bath_pt).states
    np.testing.assert_allclose(post_n, plain, rtol=0, atol=1e-13)
    pre_n = dynamics(system, control_of({STEPS: KICK_A}), process_tensor=bath_pt).states
    np.testing.assert_allclose(pre_n[:-1], plain[:-1], rtol=0, atol=1e-13)
    np.testing.assert_allclose(
        pre_n[-1], (KICK_A @ plain[-1].reshape(-1)).reshape(2, 2), rtol=0, atol=1e-12
    )


def test_pre_and_post_at_one_step_differ_only_in_its_record(bath_pt):
    system, k = lindblad_system(), 2
    plain = dynamics(system, process_tensor=bath_pt).states
    pre = dynamics(system, control_of({k: KICK_A}), process_tensor=bath_pt).states
    post = dynamics(system, control_of(post={k: KICK_A}), process_tensor=bath_pt).states
    others = [j for j in range(STEPS + 1) if j != k]
    np.testing.assert_allclose(pre[others], post[others], rtol=0, atol=1e-12)
    np.testing.assert_allclose(post[: k + 1], plain[: k + 1], rtol=0, atol=1e-13)
    np.testing.assert_allclose(
        pre[k], (KICK_A @ plain[k].reshape(-1)).reshape(2, 2), rtol=0, atol=1e-12
    )
    assert np.max(np.abs(pre[k + 1 :] - plain[k + 1 :])) > 1e-2


# --------------------------------------------------------------------------
# correlations with a control
# --------------------------------------------------------------------------


def mixed_control():
    return control_of({0: KICK_B, 2: KICK_A, 4: DEPHASE}, {1: KICK_A, 2: KICK_B})


@pytest.mark.parametrize("with_bath", [False, True], ids=["no-bath", "bath"])
def test_one_time_correlations_are_the_expectations_of_the_dynamics(with_bath, bath_pt):
    system = lindblad_system()
    kwargs = {"process_tensor": bath_pt} if with_bath else {}
    expected = dynamics(system, mixed_control(), **kwargs).expectations(SZ)[1]
    pt = bath_pt if with_bath else None
    grid = {} if with_bath else {"dt": DT, "num_steps": STEPS}
    times, values = nm.compute_correlations_nt(
        system,
        pt,
        [SZ],
        [slice(None)],
        ["left"],
        initial_state=RHO0,
        control=mixed_control(),
        **grid,
        **SILENT,
    )
    np.testing.assert_allclose(times[0], DT * np.arange(STEPS + 1), atol=1e-12)
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-12)
    # <B(t) 1(0)> too
    _, two_time = nm.compute_correlations(
        system,
        pt,
        np.eye(2),
        SZ,
        0,
        slice(None),
        initial_state=RHO0,
        control=mixed_control(),
        **grid,
        **SILENT,
    )
    np.testing.assert_allclose(two_time[0], expected, rtol=0, atol=1e-12)


def test_two_time_correlations_without_bath_match_the_loop():
    """<B(t_b) A(t_a)>: A acts on the state recorded at t_a (after pre, before post)."""
    a_op, b_op = SZ + 0.4 * SY, SX + 0.3j * SZ
    pre, post = {0: KICK_B, 2: KICK_A, 4: DEPHASE}, {1: KICK_A, 2: KICK_B}
    _, values = nm.compute_correlations(
        lindblad_system(),
        None,
        a_op,
        b_op,
        slice(None),
        slice(None),
        initial_state=RHO0,
        dt=DT,
        num_steps=STEPS,
        control=control_of(pre, post),
        **SILENT,
    )
    for ka in range(STEPS + 1):
        states = oqupy_loop(
            RHO0, STEPS, lindblad_step(), pre, post, inserts={ka: nm.operators.left_super(a_op)}
        )
        for kb in range(STEPS + 1):
            if kb < ka:
                assert np.isnan(values[ka, kb])
                continue
            expected = np.trace(b_op @ states[kb])  # A is in the states from t_a on
            assert values[ka, kb] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("post", [False, True], ids=["pre", "post"])
def test_correlation_control_equals_the_control_written_as_operators(post, bath_pt):
    """With a real bath: a unitary control at t_a is U . U^dag next to A at t_a,
    before it (pre) or after it (post), as operators of an n-time correlation."""
    system, ka = lindblad_system(), 2
    a_op, b_op = SZ + 0.4 * SY, SX + 0.3j * SZ
    unitary = rotation(0.9, SY)
    control = nm.Control(2)
    control.add_single(ka, unitary_super(unitary), post=post)
    # B at t_a itself sees a pre-control of t_a but not a post-control
    times_b = slice(ka + 1 if post else ka, None)
    _, values = nm.compute_correlations(
        system, bath_pt, a_op, b_op, ka, times_b, initial_state=RHO0, control=control, **SILENT
    )
    kick = [unitary, unitary.conj().T]
    operators = ([a_op] + kick if post else kick + [a_op]) + [b_op]
    sides = (["left", "left", "right"] if post else ["left", "right", "left"]) + ["left"]
    _, reference = nm.compute_correlations_nt(
        system,
        bath_pt,
        operators,
        [ka, ka, ka, times_b],
        sides,
        initial_state=RHO0,
        **SILENT,
    )
    np.testing.assert_allclose(values[0], reference.reshape(-1), rtol=0, atol=1e-12)
    _, plain = nm.compute_correlations(
        system, bath_pt, a_op, b_op, ka, times_b, initial_state=RHO0, **SILENT
    )
    assert np.max(np.abs(plain - values)) > 1e-2


# --------------------------------------------------------------------------
# add_continuous
# --------------------------------------------------------------------------


def drive(t):
    """A time-dependent kick (d^2, d^2)."""
    return unitary_super(rotation(0.3 + 0.5 * t, SX) @ rotation(0.2 * t, SZ))


@pytest.mark.parametrize("post", [False, True], ids=["pre", "post"])
@pytest.mark.parametrize("start_time", [0.0, 0.3])
def test_continuous_control_equals_single_controls_at_every_step(post, start_time, bath_pt):
    system = lindblad_system()
    continuous = nm.Control(2)
    continuous.add_continuous(drive, post=post)
    continuous.add_single(2, KICK_A, post=post)
    singles = nm.Control(2)
    for k in range(STEPS + 1):
        # at one slot the continuous control is the farthest from the recorded state
        if post and k == 2:
            singles.add_single(k, KICK_A, post=True)
        singles.add_single(k, drive(start_time + k * DT), post=post)
        if not post and k == 2:
            singles.add_single(k, KICK_A)
    for kwargs in ({"dt": DT, "num_steps": STEPS}, {"process_tensor": bath_pt}):
        if "process_tensor" in kwargs and start_time != 0.0:
            continue
        result = dynamics(system, continuous, start_time=start_time, **kwargs)
        reference = dynamics(system, singles, start_time=start_time, **kwargs)
        np.testing.assert_allclose(result.states, reference.states, rtol=0, atol=1e-12)
    slot = {k: drive(start_time + k * DT) for k in range(STEPS + 1)}
    slot[2] = (slot[2] @ KICK_A) if post else (KICK_A @ slot[2])
    expected = oqupy_loop(RHO0, STEPS, lindblad_step(), *((slot, {}) if not post else ({}, slot)))
    result = dynamics(system, continuous, start_time=start_time)
    np.testing.assert_allclose(result.states, expected, rtol=0, atol=1e-12)


def test_continuous_post_is_not_evaluated_at_the_last_step():
    times = []

    def recorded(t):
        times.append(t)
        return np.eye(4)

    control = nm.Control(2)
    control.add_continuous(recorded, post=True)
    dynamics(lindblad_system(), control)
    np.testing.assert_allclose(times, DT * np.arange(STEPS), atol=1e-12)


@pytest.mark.parametrize(
    "output, match",
    [
        (np.eye(2), r"shape \(2, 2\); expected \(4, 4\)"),
        (np.full((4, 4), np.nan), "NaN or infinite"),
        ("kick", "array of numbers"),
    ],
    ids=["shape", "nan", "not-numbers"],
)
@pytest.mark.parametrize("post", [False, True], ids=["pre", "post"])
def test_continuous_control_with_bad_output_is_refused(output, match, post):
    def bad_kick(t):
        return np.eye(4) if t < 0.5 else output

    control = nm.Control(2)
    control.add_continuous(bad_kick, post=post)
    with pytest.raises(ValueError, match=match) as error:
        dynamics(lindblad_system(), control)
    message = str(error.value)
    assert "bad_kick" in message and "t=0.6" in message


def test_add_continuous_needs_a_function():
    with pytest.raises(TypeError, match="control_fct"):
        nm.Control(2).add_continuous(np.eye(4))
