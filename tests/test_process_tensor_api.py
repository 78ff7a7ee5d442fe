"""The process-tensor API in OQuPy's layout: get_mpo_tensor / set_mpo_tensor,
caps, initial tensor, max_step, and the OQuPy argument orders of the process-tensor
constructors, ``pt_tempo_compute`` and ``tempo_compute``.

Layout (docs/process_tensor_files.md, "OQuPy layout"): an MPO tensor
M[b, b', s_in, s_out] (past bond, future bond, input from the system, output to
the system); a state v enters on s_in, v'[s_out] = sum v[s_in] M[.., s_in, s_out];
the cap of step k closes the bond before step k with a traced future. The
physics checks contract these tensors here, with NumPy, the way OQuPy's
``compute_dynamics`` does, and compare with the library's ``compute_dynamics``.
"""

from __future__ import annotations

import inspect
import math
import os
import tempfile
import warnings

import numpy as np
import pytest
import scipy.linalg

import nonmarkov as nm
from models import HADAMARD, SX, SZ, degenerate_three_level, driven_spin_boson, pure_state
from nonmarkov.process_tensors.base import trace_weights

DT = 0.2


def trace_vector(d):
    """vec(I) / sqrt(d): closing both system legs of an MPO tensor with it traces the step."""
    return np.identity(d).reshape(-1) / math.sqrt(d)


def computed_pt(model, unique=False, end_time=1.0):
    """A process tensor of ``model`` by PT-TEMPO (dt 0.2, 5 steps), and the model."""
    system, bath, rho0 = model()
    parameters = nm.TempoParameters(dt=DT, epsrel=1e-9, dkmax=3)
    pt = nm.PtTempo(bath, 0.0, end_time, parameters, unique=unique).get_process_tensor(
        progress_type="silent"
    )
    return pt, system, rho0


def rotated_spin_boson():
    """Spin-boson model whose coupling operator is not diagonal (S = R (0.5 sz) R^dag, R a
    complex rotation): the process tensor's basis differs from the system's."""
    system = nm.System(0.5 * SX + 0.3 * SZ)
    rotation = scipy.linalg.expm(-0.35j * (SX + 0.5 * SZ))
    coupling = rotation @ (0.5 * SZ) @ rotation.conj().T
    bath = nm.Bath(coupling, nm.PowerLawSD(0.2, 1.0, 4.0, temperature=0.5))
    return system, bath, pure_state(0.8, 0.6 * np.exp(0.4j))


def dynamics(system, rho0, pt, **kwargs):
    return nm.compute_dynamics(system, rho0, process_tensor=pt, progress_type="silent", **kwargs)


def oqupy_contraction(system, rho0, pt, num_steps):
    """States at steps 1..num_steps from the OQuPy-layout tensors alone: half a system
    step, the transformed MPO tensor (state on the input leg), half a step, then the
    state vector closed with the cap of the next step. Plain NumPy."""
    d = system.dimension
    propagators = system.get_propagators(pt.dt)
    state = np.asarray(rho0, dtype=complex).reshape(1, d * d)  # [bond, s]
    states = []
    for step in range(num_steps):
        first, second = propagators(step)
        state = state @ first.T
        state = np.einsum("bs,bcst->ct", state, pt.get_mpo_tensor(step))
        state = state @ second.T
        states.append((pt.get_cap_tensor(step + 1) @ state).reshape(d, d))
    return np.asarray(states)


def copy_through_oqupy_layout(pt, rank=4, target=None):
    """A SimpleProcessTensor (or ``target``) filled only by set_mpo_tensor with the
    untransformed OQuPy-layout tensors of ``pt``."""
    if target is None:
        target = nm.SimpleProcessTensor(
            pt.hilbert_space_dimension, pt.dt, pt.transform_in, pt.transform_out
        )
    for step in range(len(pt)):
        tensor = pt.get_mpo_tensor(step, transformed=False)
        if rank == 3:
            tensor = np.einsum("bcaa->bca", tensor)
        target.set_mpo_tensor(step, tensor)
    return target


# --------------------------------------------------------------------------
# MPO tensors: layout, basis change, round trip through the setters
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, unique",
    [(driven_spin_boson, False), (rotated_spin_boson, False), (degenerate_three_level, True)],
)
def test_mpo_tensors_transformed_and_untransformed(model, unique, tol):
    pt, _, _ = computed_pt(model, unique)
    d2 = pt.hilbert_space_dimension**2
    bonds = pt.get_bond_dimensions()
    index = np.arange(d2)
    for step in range(len(pt)):
        tensor, classes = pt.get_step_tensor(step)
        plain = pt.get_mpo_tensor(step, transformed=False)
        assert plain.shape == (bonds[step], bonds[step + 1], d2, d2)
        np.testing.assert_array_equal(plain[:, :, index, index], tensor[:, :, classes])
        off_diagonal = plain.copy()
        off_diagonal[:, :, index, index] = 0.0
        assert not np.any(off_diagonal)
        # transformed: the basis change on each system leg, in the state's direction
        transformed = pt.get_mpo_tensor(step)
        expected = np.einsum("as,bcat,ut->bcsu", pt.transform_in, plain, pt.transform_out)
        tol.assert_close(transformed, expected, kind="exact")
        # as a superoperator on column vectors: transform_out diag(T) transform_in
        for b in range(bonds[step]):
            for c in range(bonds[step + 1]):
                superoperator = pt.transform_out @ np.diag(tensor[b, c, classes]) @ pt.transform_in
                tol.assert_close(transformed[b, c].T, superoperator, kind="exact")


def test_mpo_tensor_of_identity_transforms_is_untransformed():
    pt = nm.SimpleProcessTensor(2, 0.1)
    pt.set(0, np.arange(4.0).reshape(1, 1, 4) + 1.0j)
    np.testing.assert_array_equal(pt.get_mpo_tensor(0), pt.get_mpo_tensor(0, transformed=False))
    np.testing.assert_array_equal(np.diag(pt.get_mpo_tensor(0)[0, 0]), [1j, 1 + 1j, 2 + 1j, 3 + 1j])


@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize(
    "model, unique",
    [(driven_spin_boson, False), (rotated_spin_boson, False), (degenerate_three_level, True)],
)
def test_process_tensor_rebuilt_with_set_mpo_tensor_gives_the_same_dynamics(
    model, unique, rank, tol
):
    """A copy made tensor by tensor with get_mpo_tensor / set_mpo_tensor (the copy has
    one class per Liouville index) has the same dynamics as the original."""
    pt, system, rho0 = computed_pt(model, unique)
    copy = copy_through_oqupy_layout(pt, rank)
    assert len(copy) == len(pt) and copy.max_step == pt.max_step == 5
    np.testing.assert_array_equal(copy.classes, np.arange(pt.hilbert_space_dimension**2))
    original = dynamics(system, rho0, pt)
    rebuilt = dynamics(system, rho0, copy)
    tol.assert_close(rebuilt.states, original.states, kind="exact")
    for step in range(len(pt)):
        tol.assert_close(copy.get_mpo_tensor(step), pt.get_mpo_tensor(step), kind="exact")


def test_oqupy_contraction_of_the_layout_reproduces_compute_dynamics(tol):
    """Contracting the transformed MPO tensors and caps the OQuPy way gives the states
    of compute_dynamics: the leg order, the direction of the basis change and the
    caps mean what the layout says."""
    for model, unique in ((rotated_spin_boson, False), (degenerate_three_level, True)):
        pt, system, rho0 = computed_pt(model, unique)
        expected = dynamics(system, rho0, pt).states[1:]
        tol.assert_close(oqupy_contraction(system, rho0, pt, len(pt)), expected, kind="agree")


def test_hand_made_dephasing_process_tensor_in_a_rotated_basis(tol):
    """A bond-1 process tensor set in OQuPy's layout that damps the coherences of
    the PT's basis (V = Hadamard) by f per step: with H_S = 0 the state after k
    steps is V D^k(V^dag rho V) V^dag, D^k scaling the off-diagonal by f^k."""
    f = 0.8 * np.exp(0.3j)
    weights = np.array([1.0, f, f, 1.0])  # Liouville index a d + b, off-diagonal a != b
    v = HADAMARD
    to_pt = np.kron(v.conj().T, v.T)  # vec(rho) -> vec(V^dag rho V)
    from_pt = np.kron(v, v.conj())
    pt = nm.SimpleProcessTensor(2, 0.1, to_pt, from_pt, "dephasing", "hand made")
    for step in range(6):
        pt.set_mpo_tensor(step, np.diag(weights).reshape(1, 1, 4, 4))
    rho0 = pure_state(0.6, 0.8j)
    result = dynamics(nm.System(np.zeros((2, 2))), rho0, pt)
    for k, state in enumerate(result.states):
        in_pt = v.conj().T @ rho0 @ v
        in_pt = in_pt * np.array([[1.0, f**k], [f**k, 1.0]])
        tol.assert_close(state, v @ in_pt @ v.conj().T, kind="exact")
    # the transformed MPO tensor is that step as a superoperator, transposed
    superoperator = from_pt @ np.diag(weights) @ to_pt
    tol.assert_close(pt.get_mpo_tensor(0)[0, 0].T, superoperator, kind="exact")


def test_identity_process_tensor_built_with_set_mpo_tensor_is_no_bath(tol):
    system, _, rho0 = rotated_spin_boson()
    pt = nm.SimpleProcessTensor(2, DT)
    for step in range(4):
        pt.set_mpo_tensor(step, np.identity(4).reshape(1, 1, 4, 4))
    alone = nm.compute_dynamics(system, rho0, dt=DT, num_steps=4, progress_type="silent")
    tol.assert_close(dynamics(system, rho0, pt).states, alone.states, kind="exact")
    assert all(np.array_equal(pt.get_cap_tensor(k), [1.0]) for k in range(5))


def test_file_process_tensor_written_with_set_mpo_tensor(tmp_path, tol):
    pt, system, rho0 = computed_pt(degenerate_three_level, unique=True)
    filename = str(tmp_path / "oqupy_layout.hdf5")
    with nm.FileProcessTensor(
        "write", filename, 3, pt.dt, pt.transform_in, pt.transform_out, "copy", "set_mpo_tensor"
    ) as out:
        copy_through_oqupy_layout(pt, target=out)
    on_file = nm.FileProcessTensor("read", filename)
    assert (on_file.name, on_file.description) == ("copy", "set_mpo_tensor")
    tol.assert_close(
        dynamics(system, rho0, on_file).states, dynamics(system, rho0, pt).states, kind="exact"
    )
    on_file.close()


def test_file_and_memory_give_the_same_layout(tmp_path, tol):
    pt, _, _ = computed_pt(rotated_spin_boson)
    filename = str(tmp_path / "pt.hdf5")
    pt.export(filename)
    on_file = nm.import_process_tensor(filename)
    loaded = nm.import_process_tensor(filename, "simple")
    assert on_file.max_step == loaded.max_step == pt.max_step == len(pt)
    for other in (on_file, loaded):
        for step in range(len(pt)):
            for transformed in (True, False):
                np.testing.assert_array_equal(
                    other.get_mpo_tensor(step, transformed), pt.get_mpo_tensor(step, transformed)
                )
        for step in range(len(pt) + 1):
            tol.assert_close(other.get_cap_tensor(step), pt.get_cap_tensor(step), kind="exact")
    on_file.close()


# --------------------------------------------------------------------------
# caps
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, unique",
    [(driven_spin_boson, False), (rotated_spin_boson, False), (degenerate_three_level, True)],
)
def test_caps_are_the_traced_future(model, unique, tol):
    """cap_k closes the bond before step k: every later transformed MPO tensor with
    vec(I)/sqrt(d) on both system legs (OQuPy's definition), then [1]; the whole
    process tensor traces to 1 (the bath preserves the trace)."""
    pt, _, _ = computed_pt(model, unique)
    d = pt.hilbert_space_dimension
    trace = trace_vector(d)
    bonds = pt.get_bond_dimensions()
    cap = np.ones(1)
    expected = [cap]
    for step in reversed(range(len(pt))):
        cap = np.einsum("bcst,s,t,c->b", pt.get_mpo_tensor(step), trace, trace, cap)
        expected.insert(0, cap)
    for step in range(len(pt) + 1):
        got = pt.get_cap_tensor(step)
        assert got.shape == (bonds[step],)
        tol.assert_close(got, expected[step], kind="exact")
    np.testing.assert_array_equal(pt.get_cap_tensor(len(pt)), [1.0])
    tol.assert_close(pt.get_cap_tensor(0), [1.0], kind="agree")
    assert pt.get_cap_tensor(len(pt) + 1) is None and pt.get_cap_tensor(-1) is None
    # the same with the class layout's trace weights
    weights = trace_weights(pt.classes, d)
    for step in range(len(pt)):
        tensor = pt.get_step_tensor(step)[0]
        closed = np.einsum("bcm,m,c->b", tensor, weights, pt.get_cap_tensor(step + 1))
        tol.assert_close(closed, pt.get_cap_tensor(step), kind="exact")


def test_compute_caps_and_caps_follow_the_tensors(tol):
    pt, _, _ = computed_pt(rotated_spin_boson)
    copy = copy_through_oqupy_layout(pt)
    before = [copy.get_cap_tensor(k) for k in range(len(copy) + 1)]
    copy.compute_caps()
    for k in range(len(copy) + 1):
        np.testing.assert_array_equal(copy.get_cap_tensor(k), before[k])
    # a changed tensor changes the caps before it (no stale caps)
    copy.set_mpo_tensor(3, 2.0 * pt.get_mpo_tensor(3, transformed=False))
    for k in range(len(copy) + 1):
        factor = 2.0 if k <= 3 else 1.0
        tol.assert_close(copy.get_cap_tensor(k), factor * before[k], kind="exact")


def test_set_cap_tensor_closes_the_dynamics(tol):
    """A cap set with set_cap_tensor(k) is what the state after k steps is closed with:
    twice the traced cap doubles the state at step k and leaves the others."""
    pt, system, rho0 = computed_pt(rotated_spin_boson)
    copy = copy_through_oqupy_layout(pt)
    reference = dynamics(system, rho0, pt).states
    copy.set_cap_tensor(3, 2.0 * copy.get_cap_tensor(3))
    states = dynamics(system, rho0, copy).states
    factors = np.array([1.0, 1.0, 1.0, 2.0, 1.0, 1.0])
    tol.assert_close(states, factors[:, None, None] * reference, kind="exact")
    tol.assert_close(oqupy_contraction(system, rho0, copy, len(copy)), states[1:], kind="agree")
    copy.set_cap_tensor(3, None)  # back to the traced cap
    tol.assert_close(dynamics(system, rho0, copy).states, reference, kind="exact")
    copy.set_cap_tensor(5, [3.0])
    copy.compute_caps()  # discards the caps set
    tol.assert_close(dynamics(system, rho0, copy).states, reference, kind="exact")


def test_set_cap_tensor_checks_its_input():
    pt, _, _ = computed_pt(driven_spin_boson)
    bonds = pt.get_bond_dimensions()
    with pytest.raises(ValueError, match=rf"shape \({bonds[2]},\)"):
        pt.set_cap_tensor(2, np.ones(bonds[2] + 1))
    with pytest.raises(IndexError, match="outside"):
        pt.set_cap_tensor(len(pt) + 1, [1.0])
    with pytest.raises(TypeError, match="integer"):
        pt.set_cap_tensor(1.0, np.ones(bonds[1]))
    with pytest.raises(ValueError, match="finite"):
        pt.set_cap_tensor(1, np.full(bonds[1], np.nan))


def test_uniform_process_tensor_in_the_oqupy_layout(tol):
    """Hand-made uniform PT: any step serves; cap_k is get_cap(k - 1), cap_0 closes
    the first step with its cap; setting is refused."""
    rng = np.random.default_rng(7)
    start = [rng.normal(size=(1, 2, 4)) + 1j * rng.normal(size=(1, 2, 4))]
    tensor = rng.normal(size=(2, 2, 4)) + 1j * rng.normal(size=(2, 2, 4))
    end = rng.normal(size=2) + 0.5j
    uniform = nm.UniformProcessTensor(2, 0.1, start, tensor, end)
    assert uniform.max_step == math.inf
    expanded = uniform.get_mpo_tensor(40, transformed=False)
    np.testing.assert_array_equal(np.einsum("bcaa->bca", expanded), tensor)
    np.testing.assert_array_equal(uniform.get_mpo_tensor(0), uniform.get_mpo_tensor(0, False))
    for k in (1, 2, 30):
        np.testing.assert_array_equal(uniform.get_cap_tensor(k), uniform.get_cap(k - 1))
    trace = trace_vector(2)
    cap_0 = np.einsum("bcst,s,t,c->b", uniform.get_mpo_tensor(0), trace, trace, uniform.get_cap(0))
    tol.assert_close(uniform.get_cap_tensor(0), cap_0, kind="exact")
    assert uniform.get_cap_tensor(-1) is None
    uniform.compute_caps()  # nothing to compute
    with pytest.raises(TypeError, match="does not allow"):
        uniform.set_mpo_tensor(0, expanded)
    with pytest.raises(TypeError, match="does not allow"):
        uniform.set_cap_tensor(1, end)


def test_trivial_process_tensor_in_the_oqupy_layout():
    trivial = nm.TrivialProcessTensor(2)
    assert trivial.max_step == math.inf
    assert trivial.get_mpo_tensor(3) is None
    np.testing.assert_array_equal(trivial.get_cap_tensor(7), [1.0])
    assert trivial.get_initial_tensor() is None
    trivial.compute_caps()
    with pytest.raises(TypeError, match="does not allow"):
        trivial.set_mpo_tensor(0, np.ones((1, 1, 4)))
    with pytest.raises(TypeError, match="does not allow"):
        trivial.set_cap_tensor(0, [1.0])


# --------------------------------------------------------------------------
# what the class layout cannot hold; the initial tensor
# --------------------------------------------------------------------------


def test_set_mpo_tensor_refuses_what_the_class_layout_cannot_hold(tmp_path):
    pt = nm.SimpleProcessTensor(2, 0.1, classes=[0, 1, 1, 0])
    diagonal = np.array([1.0, 0.5, 0.5, 1.0])
    pt.set_mpo_tensor(0, np.diag(diagonal).reshape(1, 1, 4, 4))
    np.testing.assert_array_equal(pt.get_step_tensor(0)[0], [[[1.0, 0.5]]])
    not_diagonal = np.diag(diagonal).reshape(1, 1, 4, 4).copy()
    not_diagonal[0, 0, 0, 1] = 0.1
    with pytest.raises(ValueError, match="not diagonal"):
        pt.set_mpo_tensor(1, not_diagonal)
    with pytest.raises(ValueError, match="one class"):
        pt.set_mpo_tensor(1, np.array([1.0, 0.5, 0.4, 1.0]).reshape(1, 1, 4))
    with pytest.raises(ValueError, match="shape"):
        pt.set_mpo_tensor(1, np.ones((1, 1, 2)))  # the class layout's (b, b', m): use set
    with pytest.raises(ValueError, match="shape"):
        pt.set_mpo_tensor(1, np.ones((1, 1, 4, 3)))
    with pytest.raises(ValueError, match="finite"):
        pt.set_mpo_tensor(1, np.full((1, 1, 4), np.inf))
    with pytest.raises(TypeError, match="array of numbers"):
        pt.set_mpo_tensor(1, "tensor")
    with pytest.raises(ValueError, match="beyond"):
        pt.set_mpo_tensor(3, np.ones((1, 1, 4)))
    assert len(pt) == 1
    # a file open for reading refuses new tensors
    filename = str(tmp_path / "read_only.hdf5")
    pt.export(filename)
    with nm.FileProcessTensor("read", filename) as on_file:
        with pytest.raises(ValueError, match="open for reading"):
            on_file.set_mpo_tensor(1, np.ones((1, 1, 4)))


def test_transformed_tensor_is_refused_where_it_is_not_diagonal():
    """The transformed tensor of a PT with a basis change is not diagonal in the
    system legs: set_mpo_tensor explains to give the untransformed one."""
    pt, _, _ = computed_pt(rotated_spin_boson)
    target = nm.SimpleProcessTensor(2, pt.dt)
    with pytest.raises(ValueError, match="transformed=False"):
        target.set_mpo_tensor(0, pt.get_mpo_tensor(0))


def test_initial_tensor_is_none_and_only_none_is_set():
    pt = nm.SimpleProcessTensor(2, 0.1)
    assert pt.get_initial_tensor() is None
    pt.set_initial_tensor(None)
    pt.set_initial_tensor()
    with pytest.raises(NotImplementedError, match="correlated initial"):
        pt.set_initial_tensor(np.identity(4))
    assert pt.get_initial_tensor() is None


# --------------------------------------------------------------------------
# constructors and functions in OQuPy's argument order
# --------------------------------------------------------------------------


def parameter_names(function):
    return list(inspect.signature(function).parameters)


def test_signatures_follow_oqupy():
    assert parameter_names(nm.SimpleProcessTensor)[:6] == [
        "hilbert_space_dimension",
        "dt",
        "transform_in",
        "transform_out",
        "name",
        "description",
    ]
    assert parameter_names(nm.FileProcessTensor)[:8] == [
        "mode",
        "filename",
        "hilbert_space_dimension",
        "dt",
        "transform_in",
        "transform_out",
        "name",
        "description",
    ]
    assert parameter_names(nm.pt_tempo_compute)[:12] == [
        "bath",
        "start_time",
        "end_time",
        "parameters",
        "unique",
        "tolerance",
        "process_tensor_file",
        "overwrite",
        "backend_config",
        "progress_type",
        "name",
        "description",
    ]
    assert parameter_names(nm.tempo_compute)[:12] == [
        "system",
        "bath",
        "initial_state",
        "start_time",
        "end_time",
        "parameters",
        "tolerance",
        "unique",
        "backend_config",
        "progress_type",
        "name",
        "description",
    ]
    for function, extra in ((nm.pt_tempo_compute, "method"), (nm.tempo_compute, "options")):
        kind = inspect.signature(function).parameters[extra].kind
        assert kind is inspect.Parameter.KEYWORD_ONLY


def test_simple_process_tensor_argument_orders():
    to_pt, from_pt = np.kron(HADAMARD, HADAMARD), np.kron(HADAMARD, HADAMARD)
    oqupy_order = nm.SimpleProcessTensor(2, 0.1, to_pt, from_pt, "pt", "text")
    assert (oqupy_order.name, oqupy_order.description) == ("pt", "text")
    np.testing.assert_array_equal(oqupy_order.classes, np.arange(4))
    np.testing.assert_array_equal(oqupy_order.transform_in, to_pt)
    keywords = nm.SimpleProcessTensor(
        description="text", classes=[0, 1, 1, 0], name="pt", dt=0.1, hilbert_space_dimension=2
    )
    assert (keywords.name, keywords.description) == ("pt", "text")
    np.testing.assert_array_equal(keywords.classes, [0, 1, 1, 0])
    no_grid = nm.SimpleProcessTensor(2)
    assert no_grid.dt is None and no_grid.max_step == 0
    with pytest.raises(TypeError):  # classes and metadata are keywords only
        nm.SimpleProcessTensor(2, 0.1, None, None, "pt", "text", [0, 1, 1, 0])


def test_file_process_tensor_argument_orders(tmp_path, monkeypatch):
    first = str(tmp_path / "first.hdf5")
    with nm.FileProcessTensor("write", first, 2, 0.1, None, None, "oqupy", "order") as out:
        out.set_mpo_tensor(0, np.ones((1, 1, 4)))
    with nm.FileProcessTensor(first) as read:  # a filename alone: read
        assert (read.mode, read.name, read.description, len(read)) == ("read", "oqupy", "order", 1)
    for opened in (
        nm.FileProcessTensor("read", first),
        nm.FileProcessTensor(first, "read"),
        nm.FileProcessTensor(filename=first, mode="read"),
        nm.FileProcessTensor(mode="read", filename=first),
        nm.FileProcessTensor(filename=first),
    ):
        assert opened.mode == "read" and opened.filename == first and len(opened) == 1
        opened.close()
    second = str(tmp_path / "second.hdf5")
    earlier = nm.FileProcessTensor(
        second,
        "write",
        2,
        0.1,
        None,
        None,
        "earlier",
        "order",
        classes=[0, 1, 1, 0],
        metadata={"k": 2},
    )
    earlier.set(0, np.ones((1, 1, 2)))
    earlier.close()
    with nm.FileProcessTensor("read", second) as read:
        np.testing.assert_array_equal(read.classes, [0, 1, 1, 0])
        assert (read.name, read.description, read.metadata) == ("earlier", "order", {"k": 2})
    keywords = nm.FileProcessTensor(
        dt=0.1, hilbert_space_dimension=2, filename=second, mode="overwrite", name="kw"
    )
    keywords.set_mpo_tensor(0, np.identity(4).reshape(1, 1, 4, 4))
    keywords.close()
    with nm.FileProcessTensor("read", second) as read:
        assert read.name == "kw"
    automatic = nm.FileProcessTensor("write", None, 2, 0.1)  # OQuPy: a temporary file
    assert os.path.dirname(automatic.filename) == tempfile.gettempdir()
    assert os.path.basename(automatic.filename).startswith("pt_")
    automatic.set_mpo_tensor(0, np.ones((1, 1, 4)))
    automatic.close()
    assert os.path.exists(automatic.filename)
    automatic.remove()
    assert not os.path.exists(automatic.filename)
    # a file named like a mode: by keyword or with a directory
    monkeypatch.chdir(tmp_path)
    with nm.FileProcessTensor("write", "./read", 2, 0.1) as out:
        out.set(0, np.ones((1, 1, 4)))
    with nm.FileProcessTensor(filename="read") as read:
        assert len(read) == 1
    with pytest.raises(TypeError, match="needs a filename"):
        nm.FileProcessTensor("read")
    with pytest.raises(TypeError, match="mode and a filename"):
        nm.FileProcessTensor()
    with pytest.raises(ValueError, match="mode must be one of"):
        nm.FileProcessTensor(first, "append")


def test_pt_tempo_compute_positional_order_and_backend_config():
    _, bath, _ = driven_spin_boson()
    parameters = nm.TempoParameters(dt=DT, epsrel=1e-9, dkmax=3)
    keywords = nm.pt_tempo_compute(bath, 0.0, 0.6, parameters, progress_type="silent")
    positional = nm.pt_tempo_compute(
        bath, 0.0, 0.6, parameters, True, None, None, False, None, "silent", "pt", "text"
    )
    assert (positional.name, positional.description) == ("pt", "text")
    assert positional.metadata["unique"] is True
    for step in range(len(keywords)):
        np.testing.assert_array_equal(
            positional.get_mpo_tensor(step), keywords.get_mpo_tensor(step)
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nm.pt_tempo_compute(bath, 0.0, 0.6, parameters, backend_config={}, progress_type="silent")
    with pytest.warns(UserWarning, match="backend_config .* is ignored"):
        nm.pt_tempo_compute(
            bath, 0.0, 0.6, parameters, backend_config={"svd": "x"}, progress_type="silent"
        )
    with pytest.raises(TypeError, match="backend_config must be None or a dict"):
        nm.pt_tempo_compute(bath, 0.0, 0.6, parameters, backend_config="numpy")
    with pytest.raises(TypeError):
        nm.pt_tempo_compute(
            bath, 0.0, 0.6, parameters, False, None, None, False, None, "silent", "n", "d", "x"
        )


def test_tempo_compute_positional_order_and_backend_config():
    system, bath, rho0 = driven_spin_boson()
    parameters = nm.TempoParameters(dt=DT, epsrel=1e-9, dkmax=3)
    keywords = nm.tempo_compute(system, bath, rho0, 0.0, 0.6, parameters, progress_type="silent")
    positional = nm.tempo_compute(
        system, bath, rho0, 0.0, 0.6, parameters, None, False, None, "silent", "tempo", "text"
    )
    np.testing.assert_array_equal(positional.states, keywords.states)
    with pytest.warns(UserWarning, match="is ignored"):
        nm.tempo_compute(
            system,
            bath,
            rho0,
            0.0,
            0.6,
            parameters,
            backend_config={"a": 1},
            progress_type="silent",
        )
    with pytest.raises(TypeError, match="backend_config must be None or a dict"):
        nm.tempo_compute(system, bath, rho0, 0.0, 0.6, parameters, backend_config=3)


def test_a_process_tensor_without_a_time_grid_runs_on_the_given_dt():
    """As in OQuPy: compute_dynamics(dt=...) with a process tensor that has no dt. An
    identity process tensor then gives the dynamics without a bath."""
    system = nm.System(0.5 * np.array([[0.0, 1.0], [1.0, 0.0]]))
    rho0 = np.diag([1.0, 0.0]).astype(complex)
    pt = nm.SimpleProcessTensor(2)
    for step in range(5):
        pt.set_mpo_tensor(step, np.ones((1, 1, 4)))
    with_pt = nm.compute_dynamics(system, rho0, dt=0.1, process_tensor=pt)
    alone = nm.compute_dynamics(system, rho0, dt=0.1, num_steps=5)
    np.testing.assert_allclose(with_pt.states, alone.states, atol=1e-12)
    with pytest.raises(ValueError, match="no time step"):
        nm.compute_dynamics(system, rho0, process_tensor=pt)
