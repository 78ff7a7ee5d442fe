"""Resumable PT-TEMPO: a streamed build that is killed (kill -9) continues from its
checkpoint with ``resume=True`` and gives the process tensor of an uninterrupted build,
to 1e-12; nothing ever appears under the target name before the build is complete.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import nonmarkov as nm
from models import SX
from nonmarkov import backends

SILENT = {"progress_type": "silent"}
END = 5.0
OPTIONS = "nm.EngineOptions(deterministic=True, window_sweep='exact')"
MODEL = """
bath = nm.Bath(0.5 * nm.operators.sigma("z"), nm.PowerLawSD(0.1, 1.0, 4.0, temperature=0.5))
parameters = nm.TempoParameters(dt=0.05, tcut=0.5, epsrel=1e-7)
options = {options}
"""


def model():
    namespace = {"nm": nm}
    exec(MODEL.format(options=OPTIONS), namespace)  # the same model as the killed process
    return namespace["bath"], namespace["parameters"], namespace["options"]


def start_build(filename: str, by_bytes: bool = False) -> subprocess.Popen:
    """The streamed build of ``model()`` in its own process, checkpointing every chunk:
    by its interval (0 s), or ``by_bytes``: by the bound on the step tensors it holds
    (0 bytes, an interval of an hour)."""
    interval = 3600.0 if by_bytes else 0.0
    script = (
        "import nonmarkov as nm\n"
        + ("import nonmarkov.methods.pt_tempo as build\nbuild.CHECKPOINT_BYTES = 0\n" * by_bytes)
        + MODEL.format(options=OPTIONS)
        + textwrap.dedent(
            f"""
        nm.PtTempo(bath, 0.0, {END}, parameters, process_tensor_file={filename!r},
                   options=options, checkpoint_interval={interval}).compute(progress_type="silent")
        """
        )
    )
    env = dict(os.environ, NONMARKOV_BACKEND=backends.get_backend())
    return subprocess.Popen([sys.executable, "-c", script], env=env)


def checkpoint_step(checkpoint: str) -> int:
    try:
        with np.load(checkpoint) as data:
            return int(data["step"])
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.slow
def test_a_killed_build_resumes_to_the_same_process_tensor(tmp_path):
    """(Its checkpoints come from the bound on the step tensors held in memory.)"""
    filename = str(tmp_path / "pt.hdf5")
    checkpoint = filename + ".checkpoint.npz"
    process = start_build(filename, by_bytes=True)
    deadline = time.monotonic() + 300.0
    while checkpoint_step(checkpoint) < 30 and process.poll() is None:
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the build wrote no checkpoint in time")
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    if os.path.exists(filename):
        pytest.skip("the build finished before it could be killed")
    killed_at = checkpoint_step(checkpoint)
    assert 30 <= killed_at < int(round(END / 0.05))
    # the partial file under a temporary name (and, if the kill cut a checkpoint's write
    # short, that write's temporary file)
    partials = [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")]
    assert len([name for name in partials if name.endswith("pt.hdf5")]) == 1

    bath, parameters, options = model()
    builder = nm.PtTempo(
        bath, 0.0, END, parameters, process_tensor_file=filename, options=options, resume=True
    )
    resumed = builder.get_process_tensor(**SILENT)
    assert not os.path.exists(checkpoint)
    assert [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")] == []
    reference = nm.PtTempo(bath, 0.0, END, parameters, options=options).get_process_tensor(**SILENT)
    assert len(resumed) == len(reference)
    for step in range(len(reference)):
        np.testing.assert_allclose(
            resumed.get_step_tensor(step)[0], reference.get_step_tensor(step)[0], rtol=0, atol=1e-12
        )
    system, rho0 = nm.System(0.5 * SX), nm.operators.spin_dm("up")
    np.testing.assert_allclose(
        nm.compute_dynamics(system, rho0, process_tensor=resumed, **SILENT).states,
        nm.compute_dynamics(system, rho0, process_tensor=reference, **SILENT).states,
        atol=1e-12,
    )


def test_resume_without_a_checkpoint_starts_afresh_and_cleans_up(tmp_path):
    filename = str(tmp_path / "pt.hdf5")
    # what a killed process left of a checkpoint's write, cut short
    (tmp_path / ".tmp-k1ll3dpt.hdf5.checkpoint.npz").write_bytes(b"PK\x03")
    bath, parameters, options = model()
    pt = nm.PtTempo(
        bath, 0.0, 1.0, parameters, process_tensor_file=filename, options=options, resume=True
    ).get_process_tensor(**SILENT)
    assert len(pt) == 20 and os.path.exists(filename)
    assert sorted(os.listdir(tmp_path)) == ["pt.hdf5"]


@pytest.mark.slow
def test_a_checkpoint_of_another_build_is_refused(tmp_path):
    filename = str(tmp_path / "pt.hdf5")
    bath, parameters, options = model()
    process = start_build(filename)
    checkpoint = filename + ".checkpoint.npz"
    while checkpoint_step(checkpoint) < 5 and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    if os.path.exists(filename):
        pytest.skip("the build finished before it could be killed")
    other = nm.TempoParameters(dt=0.05, tcut=0.5, epsrel=1e-6)
    with pytest.raises(ValueError, match="belongs to another build"):
        nm.PtTempo(
            bath, 0.0, END, other, process_tensor_file=filename, options=options, resume=True
        ).get_process_tensor(**SILENT)


def test_bad_resume_arguments():
    bath, parameters, _ = model()
    with pytest.raises(ValueError, match="resume=True needs a named process_tensor_file"):
        nm.PtTempo(bath, 0.0, 1.0, parameters, resume=True)
    with pytest.raises(ValueError, match="resume=True needs a named process_tensor_file"):
        nm.PtTempo(bath, 0.0, 1.0, parameters, process_tensor_file=True, resume=True)
    with pytest.raises(TypeError, match="resume must be True or False"):
        nm.PtTempo(bath, 0.0, 1.0, parameters, process_tensor_file="x.hdf5", resume="yes")
    with pytest.raises(ValueError, match="checkpoint_interval"):
        nm.PtTempo(bath, 0.0, 1.0, parameters, process_tensor_file="x.hdf5", checkpoint_interval=-1)


def test_leftover_files_are_found_and_removed(tmp_path):
    def old(path):
        path.write_bytes(b"x")
        os.utime(path, (time.time() - 3600, time.time() - 3600))
        return str(path)

    orphan = old(tmp_path / ".tmp-abc123pt.hdf5")
    kept = old(tmp_path / ".tmp-def456other.hdf5")
    fresh = str(tmp_path / ".tmp-ghi789busy.hdf5")
    open(fresh, "wb").close()
    resumable = str(tmp_path / "other.hdf5.checkpoint.npz")
    np.savez(resumable, temporary=kept)
    stale = str(tmp_path / "gone.hdf5.checkpoint.npz")
    np.savez(stale, temporary=str(tmp_path / ".tmp-missing.hdf5"))
    assert nm.leftover_files(tmp_path) == sorted([orphan, stale])
    assert nm.leftover_files(tmp_path, remove=True) == sorted([orphan, stale])
    assert sorted(os.listdir(tmp_path)) == sorted(
        [os.path.basename(p) for p in (kept, fresh, resumable)]
    )
    with pytest.raises(NotADirectoryError):
        nm.leftover_files(tmp_path / "nowhere")
