"""Tests of process-tensor files: ``FileProcessTensor``, ``export``, ``import_process_tensor``,
PT-TEMPO streaming to a file, crash safety and the errors on bad files.

Physics checks: a process tensor read back from a file (on demand or loaded)
has the same tensors and gives the same dynamics as the one in memory; the
streamed PT-TEMPO process tensor equals the in-memory one and agrees with
TEMPO; reading out before the end of a file PT (the caps of the streaming
contraction) gives the prefix of the full dynamics.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import h5py
import numpy as np
import pytest

import nonmarkov as nm
from models import driven_spin_boson
from nonmarkov.process_tensors.file import FORMAT_VERSION, ProcessTensorFileError

PARAMETERS = {"dt": 0.1, "epsrel": 1e-8, "dkmax": 3}
NUM_STEPS = 12


def small_parameters():
    return nm.TempoParameters(**PARAMETERS, name="file tests")


SILENT_RUN = {"progress_type": "silent"}


def silent(dynamics_function, *args, **kwargs):
    return dynamics_function(*args, progress_type="silent", **kwargs)


@pytest.fixture(scope="module")
def model():
    return driven_spin_boson(alpha=0.2, temperature=0.5)


@pytest.fixture(scope="module")
def memory_pt(model):
    """A 12-step spin-boson PT (dt 0.1, dkmax 3) in memory."""
    _, bath, _ = model
    return nm.PtTempo(
        bath,
        0.0,
        NUM_STEPS * PARAMETERS["dt"],
        small_parameters(),
        name="spin-boson",
        description="a small PT",
    ).get_process_tensor(progress_type="silent")


@pytest.fixture(scope="module")
def memory_dynamics(model, memory_pt):
    system, _, rho0 = model
    return silent(nm.compute_dynamics, system, rho0, process_tensor=memory_pt)


@pytest.fixture(scope="module")
def pt_file(memory_pt, tmp_path_factory):
    """The in-memory PT exported to a file (read-only use)."""
    filename = str(tmp_path_factory.mktemp("pt") / "spin_boson.hdf5")
    memory_pt.export(filename)
    return filename


def assert_same_tensors(actual, expected):
    assert len(actual) == len(expected)
    assert actual.dt == expected.dt
    assert actual.dimension == expected.dimension
    np.testing.assert_array_equal(actual.get_bond_dimensions(), expected.get_bond_dimensions())
    np.testing.assert_array_equal(actual.transform_in, expected.transform_in)
    np.testing.assert_array_equal(actual.transform_out, expected.transform_out)
    for step in range(len(expected)):
        tensor, classes = actual.get_step_tensor(step)
        reference, reference_classes = expected.get_step_tensor(step)
        np.testing.assert_array_equal(tensor, reference)
        np.testing.assert_array_equal(classes, reference_classes)
        np.testing.assert_array_equal(actual.get_mpo_tensor(step), expected.get_mpo_tensor(step))


def leftovers(directory):
    return sorted(name for name in os.listdir(directory) if name.startswith(".tmp-"))


# --------------------------------------------------------------------------
# round trips and dynamics
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "simple"])
def test_round_trip_gives_identical_tensors_and_dynamics(
    model, memory_pt, memory_dynamics, pt_file, kind
):
    system, _, rho0 = model
    loaded = nm.import_process_tensor(pt_file, process_tensor_type=kind)
    expected_type = nm.FileProcessTensor if kind == "file" else nm.SimpleProcessTensor
    assert isinstance(loaded, expected_type)
    assert_same_tensors(loaded, memory_pt)
    assert loaded.name == "spin-boson" and loaded.description == "a small PT"
    assert loaded.metadata == memory_pt.metadata
    assert loaded.metadata["parameters"]["dkmax"] == 3
    assert loaded.metadata["bath"]["correlations"]["alpha"] == 0.2
    np.testing.assert_array_equal(loaded.classes, memory_pt.classes)
    dynamics = silent(nm.compute_dynamics, system, rho0, process_tensor=loaded)
    np.testing.assert_allclose(dynamics.times, memory_dynamics.times, atol=1e-14)
    np.testing.assert_allclose(dynamics.states, memory_dynamics.states, rtol=0, atol=1e-12)
    # the bath matters: the closed system differs
    closed = silent(nm.compute_dynamics, system, rho0, dt=0.1, num_steps=NUM_STEPS)
    assert np.max(np.abs(closed.states - memory_dynamics.states)) > 1e-2
    if kind == "file":
        assert loaded.filename == pt_file and loaded.mode == "read"
        assert loaded.format_version == FORMAT_VERSION
        assert loaded.library_version == nm.__version__
        loaded.close()
        assert loaded.closed
        with pytest.raises(ValueError, match="closed"):
            loaded.get_step_tensor(0)


def test_file_to_file_and_simple_to_file_to_simple(memory_pt, pt_file, tmp_path):
    """Export of a FileProcessTensor and a second export of a loaded PT change nothing."""
    with nm.import_process_tensor(pt_file) as file_pt:
        file_pt.export(str(tmp_path / "copy.hdf5"))
    reloaded = nm.import_process_tensor(str(tmp_path / "copy.hdf5"), "simple")
    reloaded.export(str(tmp_path / "again.hdf5"))
    assert_same_tensors(nm.import_process_tensor(str(tmp_path / "again.hdf5")), memory_pt)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("cache_bytes", [0, 20_000, None], ids=["reread", "partial", "cached"])
def test_reading_out_early_from_a_file_pt_gives_the_prefix(
    model, memory_dynamics, pt_file, monkeypatch, cache_bytes
):
    """The streamed caps: num_steps < len and record_all=False on a file PT, with
    every step tensor read twice, some of them, or each once."""
    if cache_bytes is not None:
        monkeypatch.setattr(
            importlib.import_module("nonmarkov.engines.eager_chain"),
            "STREAM_CACHE_BYTES",
            cache_bytes,
        )
    system, _, rho0 = model
    file_pt = nm.import_process_tensor(pt_file)
    full = silent(nm.compute_dynamics, system, rho0, process_tensor=file_pt)
    np.testing.assert_allclose(full.states, memory_dynamics.states, rtol=0, atol=1e-12)
    part = silent(nm.compute_dynamics, system, rho0, process_tensor=file_pt, num_steps=5)
    np.testing.assert_allclose(part.states, memory_dynamics.states[:6], rtol=0, atol=1e-12)
    last = silent(
        nm.compute_dynamics, system, rho0, process_tensor=file_pt, num_steps=7, record_all=False
    )
    np.testing.assert_allclose(last.times, [0.0, 0.7], atol=1e-12)
    np.testing.assert_allclose(last.states[-1], memory_dynamics.states[7], rtol=0, atol=1e-12)
    # two baths: a file PT together with an in-memory PT, as two in-memory PTs
    memory_pt = nm.import_process_tensor(pt_file, "simple")
    both = silent(nm.compute_dynamics, system, rho0, process_tensor=[file_pt, memory_pt])
    reference = silent(nm.compute_dynamics, system, rho0, process_tensor=[memory_pt, memory_pt])
    np.testing.assert_allclose(both.states, reference.states, rtol=0, atol=1e-12)
    assert np.max(np.abs(both.states - memory_dynamics.states)) > 1e-3


@pytest.mark.skip_backend("numpy", reason="the streamed compiled scan is the JAX engine's")
@pytest.mark.parametrize("record_all", [True, False], ids=["all", "last"])
def test_a_file_pt_streams_to_the_compiled_scan_in_chunks(model, pt_file, monkeypatch, record_all):
    """On JAX with compiled='on', a run on a file PT is the compiled scan fed a chunk of
    steps at a time (12 steps in chunks of 5: 5, 5 and 2 padded with identity steps),
    with a time-dependent system, a control and an in-memory PT beside it; the same as
    NumPy's streamed steps."""
    from nonmarkov import backends
    from nonmarkov.engines.jax import engine as jax_engine

    monkeypatch.setattr(jax_engine, "STREAM_STEPS", 5)
    chunks = []
    original = jax_engine.run_stream
    monkeypatch.setattr(
        jax_engine, "run_stream", lambda *args: chunks.append(args[6]) or original(*args)
    )
    _, _, rho0 = model
    driven = nm.TimeDependentSystem(lambda t: 0.5 * nm.operators.sigma("x") * np.cos(t))
    control = nm.Control(2)
    control.add_single(4, np.kron(nm.operators.sigma("x"), nm.operators.sigma("x")), post=True)
    memory_pt = nm.import_process_tensor(pt_file, "simple")
    arguments = dict(control=control, record_all=record_all)

    def run(pts):
        return silent(nm.compute_dynamics, driven, rho0, process_tensor=pts, **arguments)

    with backends.use_backend("numpy", "double"):
        expected = run([nm.import_process_tensor(pt_file), memory_pt])
    with nm.options.use_options(compiled="on"):
        streamed = run([nm.import_process_tensor(pt_file), memory_pt])
    assert chunks == [5]
    np.testing.assert_allclose(streamed.times, expected.times, rtol=0, atol=1e-12)
    np.testing.assert_allclose(streamed.states, expected.states, rtol=0, atol=1e-10)


@pytest.mark.skip_backend("numpy", reason="the compiled branch sweep is the JAX engine's")
def test_correlations_stream_a_file_pt_into_the_compiled_sweep(model, pt_file, monkeypatch):
    """On JAX with compiled='on', the branch sweep of a file PT (beside one in memory)
    gets each grid time's step tensor and cap from the file; the same as NumPy's."""
    from nonmarkov import backends
    from nonmarkov.engines.jax import branches
    from nonmarkov.engines.jax import engine as jax_engine

    kinds = []
    original = jax_engine.run_sweep
    monkeypatch.setattr(
        jax_engine, "run_sweep", lambda *args: kinds.append(type(args[5])) or original(*args)
    )
    system, _, rho0 = model
    sz, sx = nm.operators.sigma("z"), nm.operators.sigma("x")
    memory_pt = nm.import_process_tensor(pt_file, "simple")

    def correlations(pts):
        two = nm.compute_correlations(
            system, pts, sz, sx, slice(0, 6), slice(2, 12), "full", rho0, **SILENT_RUN
        )[1]
        three = nm.compute_correlations_nt(
            system,
            pts,
            [sx, sz, sx],
            [slice(0, 4), 4, slice(4, 12)],
            ["left", "right", "left"],
            rho0,
            **SILENT_RUN,
        )[1]
        return two, three

    with backends.use_backend("numpy", "double"):
        expected = correlations([nm.import_process_tensor(pt_file), memory_pt])
    with nm.options.use_options(compiled="on"):
        streamed = correlations([nm.import_process_tensor(pt_file), memory_pt])
    assert kinds == [branches.StreamedTables] * 2
    for value, reference in zip(streamed, expected):
        np.testing.assert_array_equal(np.isnan(value), np.isnan(reference))
        np.testing.assert_allclose(value, reference, rtol=0, atol=1e-10)


def test_correlations_from_a_file_pt_equal_the_in_memory_ones(model, memory_pt, pt_file):
    """compute_correlations streams a file PT step by step like compute_dynamics;
    the two-time map equals the one from the in-memory PT."""
    system, _, rho0 = model
    sz = nm.operators.sigma("z")
    sx = nm.operators.sigma("x")
    arguments = dict(
        times_a=slice(0, 6),
        times_b=slice(2, 12),
        time_order="full",
        initial_state=rho0,
        progress_type="silent",
    )
    _, from_memory = nm.compute_correlations(system, memory_pt, sz, sx, **arguments)
    _, from_file = nm.compute_correlations(
        system, nm.import_process_tensor(pt_file), sz, sx, **arguments
    )
    np.testing.assert_allclose(from_file, from_memory, rtol=0, atol=1e-12)
    assert np.all(np.isfinite(from_file))


def test_streamed_pt_tempo_equals_in_memory_and_tempo(model, memory_pt, memory_dynamics, tmp_path):
    system, bath, rho0 = model
    filename = str(tmp_path / "streamed.hdf5")
    pt_tempo = nm.PtTempo(
        bath,
        0.0,
        NUM_STEPS * 0.1,
        small_parameters(),
        process_tensor_file=filename,
        name="spin-boson",
        description="a small PT",
    )
    assert pt_tempo.process_tensor_file == filename
    streamed = pt_tempo.get_process_tensor(progress_type="silent")
    assert isinstance(streamed, nm.FileProcessTensor)
    assert streamed.filename == filename and streamed.mode == "read"
    assert pt_tempo.get_process_tensor() is streamed
    assert streamed.metadata == memory_pt.metadata
    assert streamed.metadata["created_by"] == "PtTempo"
    for step in range(len(memory_pt)):
        np.testing.assert_allclose(
            streamed.get_step_tensor(step)[0],
            memory_pt.get_step_tensor(step)[0],
            rtol=1e-12,
            atol=0,
        )
    dynamics = silent(nm.compute_dynamics, system, rho0, process_tensor=streamed)
    np.testing.assert_allclose(dynamics.states, memory_dynamics.states, rtol=0, atol=1e-12)
    # and both are the physics TEMPO computes (same influence, truncation 1e-8)
    tempo = nm.Tempo(system, bath, small_parameters(), rho0, 0.0).compute(
        NUM_STEPS * 0.1, progress_type="silent"
    )
    # measured 1.8e-8; asserted bound 1e-7
    np.testing.assert_allclose(dynamics.states, tempo.states, rtol=0, atol=1e-7)
    assert leftovers(tmp_path) == []


def test_pt_tempo_compute_automatic_file_name(model, memory_pt):
    _, bath, _ = model
    pt = nm.pt_tempo_compute(
        bath,
        0.0,
        NUM_STEPS * 0.1,
        small_parameters(),
        process_tensor_file=True,
        progress_type="silent",
    )
    try:
        assert isinstance(pt, nm.FileProcessTensor)
        assert os.path.dirname(pt.filename) == tempfile.gettempdir()
        assert os.path.basename(pt.filename).startswith("pt_")
        assert pt.filename.endswith(".hdf5") and os.path.isfile(pt.filename)
        for step in range(len(memory_pt)):
            np.testing.assert_allclose(
                pt.get_step_tensor(step)[0], memory_pt.get_step_tensor(step)[0], rtol=1e-12, atol=0
            )
    finally:
        pt.remove()
    assert not os.path.exists(pt.filename)


# --------------------------------------------------------------------------
# writing: modes, overwrite, context manager
# --------------------------------------------------------------------------


def test_file_process_tensor_write_modes(memory_pt, tmp_path):
    filename = str(tmp_path / "written.hdf5")
    classes = memory_pt.classes
    tensors = [memory_pt.get_step_tensor(step)[0] for step in range(4)]
    with nm.FileProcessTensor(
        filename,
        "write",
        2,
        0.1,
        memory_pt.transform_in,
        memory_pt.transform_out,
        classes=classes,
        name="four",
        metadata={"steps": 4},
    ) as out:
        assert not os.path.exists(filename)  # appears only when complete
        for step, tensor in enumerate(tensors):
            out.set(step, tensor)
        assert len(out) == 4
        np.testing.assert_array_equal(out.get_step_tensor(2)[0], tensors[2])  # readable
        with pytest.raises(ValueError, match="shape"):
            out.set(4, np.ones((2, 2, 3)))
        with pytest.raises(ValueError, match="beyond"):
            out.set(6, tensors[0])
        with pytest.raises(ValueError, match="left bond"):
            out.set(4, np.ones((tensors[3].shape[1] + 1, 1, out.classes.max() + 1)))
    assert out.closed
    with pytest.raises(ValueError, match="closed"):
        out.set(4, tensors[0])
    written = nm.FileProcessTensor(filename)
    assert len(written) == 4 and written.name == "four" and written.metadata == {"steps": 4}
    for step, tensor in enumerate(tensors):
        np.testing.assert_array_equal(written.get_step_tensor(step)[0], tensor)
    with pytest.raises(IndexError):
        written.get_step_tensor(4)
    with pytest.raises(ValueError, match="reading"):
        written.set(4, tensors[0])
    written.close()
    # 'write' refuses an existing file before writing anything
    with pytest.raises(FileExistsError, match="overwrite"):
        nm.FileProcessTensor(filename, "write", 2, 0.1)
    # 'overwrite' keeps the old file until the new one is complete
    replacement = nm.FileProcessTensor("overwrite", filename, 2, 0.1)  # OQuPy order
    replacement.set(0, np.ones((1, 1, 4)))
    assert len(nm.import_process_tensor(filename)) == 4
    replacement.close()
    assert len(nm.import_process_tensor(filename)) == 1
    assert leftovers(tmp_path) == []


def test_exception_in_with_block_discards_the_file(tmp_path):
    filename = str(tmp_path / "broken.hdf5")
    with pytest.raises(RuntimeError, match="interrupted"):
        with nm.FileProcessTensor(filename, "write", 2, 0.1) as out:
            out.set(0, np.ones((1, 1, 4)))
            raise RuntimeError("interrupted")
    assert not os.path.exists(filename)
    assert leftovers(tmp_path) == []


def test_pt_tempo_error_mid_run_leaves_no_file(model, monkeypatch, tmp_path):
    """An exception during the PT-TEMPO loop (e.g. KeyboardInterrupt) discards the file."""
    _, bath, _ = model
    written = []
    original_set = nm.FileProcessTensor.set

    def interrupted_set(self, step, tensor):
        if len(written) == 4:
            raise KeyboardInterrupt
        written.append(step)
        original_set(self, step, tensor)

    monkeypatch.setattr(nm.FileProcessTensor, "set", interrupted_set)
    filename = str(tmp_path / "interrupted.hdf5")
    pt_tempo = nm.PtTempo(
        bath, 0.0, NUM_STEPS * 0.1, small_parameters(), process_tensor_file=filename
    )
    with pytest.raises(KeyboardInterrupt):
        pt_tempo.compute(progress_type="silent")
    assert written == [0, 1, 2, 3]  # streamed during the loop, then interrupted
    assert not os.path.exists(filename)
    assert leftovers(tmp_path) == []


def test_export_and_pt_tempo_refuse_an_existing_file(model, memory_pt, pt_file, tmp_path):
    _, bath, _ = model
    filename = str(tmp_path / "existing.hdf5")
    with open(filename, "w") as handle:
        handle.write("precious")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        memory_pt.export(filename)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        nm.PtTempo(bath, 0.0, 1.0, small_parameters(), process_tensor_file=filename)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        nm.pt_tempo_compute(
            bath, 0.0, 1.0, small_parameters(), process_tensor_file=filename, progress_type="silent"
        )
    with open(filename) as handle:
        assert handle.read() == "precious"
    memory_pt.export(filename, overwrite=True)
    assert_same_tensors(nm.import_process_tensor(filename), memory_pt)
    assert leftovers(tmp_path) == []


def test_bad_arguments(model, memory_pt, pt_file, tmp_path):
    _, bath, _ = model
    with pytest.raises(ValueError, match="mode"):
        nm.FileProcessTensor(pt_file, "append")
    with pytest.raises(ValueError, match="read from the file"):
        nm.FileProcessTensor(pt_file, "read", hilbert_space_dimension=2)
    with pytest.raises(ValueError, match="hilbert_space_dimension"):
        nm.FileProcessTensor(str(tmp_path / "new.hdf5"), "write")
    with pytest.raises(TypeError, match="filename"):
        nm.FileProcessTensor(3)
    with pytest.raises(TypeError, match="metadata"):
        nm.FileProcessTensor(
            str(tmp_path / "new.hdf5"), "write", 2, 0.1, metadata={"f": lambda x: x}
        )
    with pytest.raises(ValueError, match="process_tensor_type"):
        nm.import_process_tensor(pt_file, "dense")
    with pytest.raises(TypeError, match="process_tensor_file"):
        nm.PtTempo(bath, 0.0, 1.0, small_parameters(), process_tensor_file=3)
    with pytest.raises(FileNotFoundError, match="directory"):
        nm.PtTempo(
            bath, 0.0, 1.0, small_parameters(), process_tensor_file=str(tmp_path / "no" / "pt.hdf5")
        )
    with pytest.raises(ValueError, match="time grid"):
        nm.TrivialProcessTensor(2).export(str(tmp_path / "trivial.hdf5"))
    assert not os.path.exists(str(tmp_path / "new.hdf5"))
    assert leftovers(tmp_path) == []


def test_wrong_dimension_is_rejected_for_a_file_pt(pt_file):
    file_pt = nm.import_process_tensor(pt_file)
    three_level = nm.System(np.diag([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="dimension"):
        silent(nm.compute_dynamics, three_level, np.eye(3) / 3.0, process_tensor=file_pt)


# --------------------------------------------------------------------------
# bad files
# --------------------------------------------------------------------------


def _modified_copy(pt_file, directory, change):
    filename = str(directory / "bad.hdf5")
    shutil.copyfile(pt_file, filename)
    with h5py.File(filename, "r+") as handle:
        change(handle)
    return filename


def _text_file(pt_file, directory):
    filename = str(directory / "bad.hdf5")
    with open(filename, "w") as handle:
        handle.write("not a process tensor\n")
    return filename


def _truncated(pt_file, directory):
    filename = str(directory / "bad.hdf5")
    with open(pt_file, "rb") as source:
        data = source.read()
    with open(filename, "wb") as target:
        target.write(data[: len(data) // 2])
    return filename


def _other_hdf5(attributes):
    def make(pt_file, directory):
        filename = str(directory / "bad.hdf5")
        with h5py.File(filename, "w") as handle:
            handle.attrs.update(attributes)
            handle.create_dataset("times", data=np.arange(3.0))
        return filename

    return make


def _set_attribute(key, value):
    def change(handle):
        handle.attrs[key] = value

    return lambda pt_file, directory: _modified_copy(pt_file, directory, change)


def _drop_tensor(pt_file, directory):
    def change(handle):
        del handle["tensors"]["00000003"]

    return _modified_copy(pt_file, directory, change)


def _wrong_tensor_shape(pt_file, directory):
    def change(handle):
        del handle["tensors"]["00000003"]
        handle["tensors"].create_dataset("00000003", data=np.ones((1, 1, 4), dtype=complex))

    return _modified_copy(pt_file, directory, change)


BAD_FILES = {
    "text-file": (_text_file, "not an HDF5 file"),
    "truncated": (_truncated, "damaged or truncated"),
    "dynamics-file": (
        _other_hdf5({"format": "nonmarkov-dynamics-1"}),
        "not a nonmarkov process-tensor file",
    ),
    "oqupy-file": (_other_hdf5({"oqupy_version": "0.5.0"}), "OQuPy"),
    "newer-version": (
        _set_attribute("format_version", np.int64(FORMAT_VERSION + 1)),
        "format version 2 .*upgrade",
    ),
    "incomplete": (_set_attribute("complete", False), "incomplete"),
    "missing-tensor": (_drop_tensor, "damaged"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_give_clear_errors(pt_file, tmp_path, case):
    make, message = BAD_FILES[case]
    filename = make(pt_file, tmp_path)
    for kind in ("file", "simple"):
        with pytest.raises(ProcessTensorFileError, match=message) as info:
            nm.import_process_tensor(filename, kind)
        assert filename in str(info.value)
        assert isinstance(info.value, ValueError)


def test_damaged_tensor_is_reported_when_read(pt_file, tmp_path):
    filename = _wrong_tensor_shape(pt_file, tmp_path)
    file_pt = nm.import_process_tensor(filename)  # the header is fine
    file_pt.get_step_tensor(2)
    with pytest.raises(ProcessTensorFileError, match="step tensor 3 has shape") as info:
        file_pt.get_step_tensor(3)
    assert filename in str(info.value)


def test_missing_file_and_directory(tmp_path):
    missing = str(tmp_path / "missing.hdf5")
    with pytest.raises(FileNotFoundError, match="missing.hdf5"):
        nm.import_process_tensor(missing)
    with pytest.raises(FileNotFoundError, match="missing.hdf5"):
        nm.FileProcessTensor(missing)
    with pytest.raises(IsADirectoryError):
        nm.import_process_tensor(str(tmp_path))


# --------------------------------------------------------------------------
# crash safety
# --------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    import nonmarkov as nm
    sz = np.diag([0.5, -0.5])
    bath = nm.Bath(sz, nm.PowerLawSD(0.2, 1.0, 4.0))
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=3)
    # no checkpoints: every step tensor goes to the file as it is made (with
    # checkpoints they wait in memory until the next one, see test_resume.py)
    pt_tempo = nm.PtTempo(bath, 0.0, 0.1 * 200000, parameters,
                          process_tensor_file=sys.argv[1], overwrite=True,
                          checkpoint_interval=None)
    pt_tempo.compute(progress_type="silent")
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.slow
def test_killed_pt_tempo_never_leaves_a_complete_looking_file(memory_pt, tmp_path):
    """SIGKILL a streaming PT-TEMPO run: the target keeps its old content (here:
    a valid PT), and the leftover temporary file does not open."""
    target = str(tmp_path / "target.hdf5")
    memory_pt.export(target)
    env = dict(os.environ, NONMARKOV_BACKEND="numpy", NONMARKOV_PRECISION="double")
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, target],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and process.poll() is None:
            temporary = leftovers(tmp_path)
            if temporary and os.path.getsize(tmp_path / temporary[0]) > 200_000:
                break  # many step tensors are written
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()[1].decode()[-2000:]
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert process.returncode == -signal.SIGKILL
    assert_same_tensors(nm.import_process_tensor(target), memory_pt)
    temporary = leftovers(tmp_path)
    assert len(temporary) == 1
    with pytest.raises(ProcessTensorFileError, match="damaged|incomplete"):
        nm.import_process_tensor(str(tmp_path / temporary[0]))


def test_written_files_get_the_usual_permissions(memory_pt, memory_dynamics, tmp_path):
    """Files are written under an owner-only temporary name but end up with the
    permissions of a normally created file (0o666 minus the umask)."""
    mask = os.umask(0o022)
    os.umask(mask)
    expected = 0o666 & ~mask
    pt_path, dynamics_path = tmp_path / "pt.hdf5", tmp_path / "dynamics.h5"
    memory_pt.export(str(pt_path))
    memory_dynamics.export(str(dynamics_path))
    for path in (pt_path, dynamics_path):
        assert stat.S_IMODE(os.stat(path).st_mode) == expected
