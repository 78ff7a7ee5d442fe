"""OQuPy 0.5 process-tensor files: read by ``import_process_tensor``, converted by
``convert_process_tensor``.

- A file written by real ``oqupy==0.5.0`` (run in its own virtual environment,
  ``benchmarks/setup_oqupy_env.sh``; the test skips with a message where it is
  missing): the dynamics on it equal OQuPy's own to 1e-10.
- Files with OQuPy's layout written here with h5py, from a process tensor of
  this library (no OQuPy needed): read back to the same process tensor.
- Damaged and foreign files: a ProcessTensorFileError (a ValueError) that
  names the file and the problem, never a different process tensor.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import textwrap

import h5py
import numpy as np
import pytest

import nonmarkov as nm
from models import SX, SY, SZ, pure_state
from nonmarkov.process_tensors.file import ProcessTensorFileError, convert_process_tensor

SILENT = {"progress_type": "silent"}
OQUPY_VENV = pathlib.Path(
    os.environ.get("OQUPY_VENV", pathlib.Path.home() / ".cache/nonmarkov/oqupy-venv")
)
OQUPY_PYTHON = OQUPY_VENV / "bin" / "python"
HAMILTONIAN = 0.5 * SX + 0.2 * SZ
RHO0 = pure_state(0.8, 0.6j)

# --------------------------------------------------------------------------
# a file written by real OQuPy 0.5.0
# --------------------------------------------------------------------------

OQUPY_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import oqupy
    assert oqupy.__version__ == "0.5.0", oqupy.__version__
    out = sys.argv[1]
    sx, sy, sz = (oqupy.operators.sigma(k) for k in "xyz")
    # eigenvectors with complex entries: the basis change matters
    bath = oqupy.Bath(0.5 * (sz + 0.3 * sx + 0.4 * sy),
                      oqupy.PowerLawSD(0.1, 1.0, 4.0, temperature=0.5))
    parameters = oqupy.TempoParameters(dt=0.1, epsrel=1e-6, dkmax=4)
    pt = oqupy.pt_tempo_compute(bath, 0.0, 1.0, parameters, progress_type="silent")
    pt.export(out + "/pt.hdf5", overwrite=True)
    rho0 = np.array([[0.64, -0.48j], [0.48j, 0.36]])
    system = oqupy.System(0.5 * sx + 0.2 * sz)
    dynamics = oqupy.compute_dynamics(system, initial_state=rho0, process_tensor=pt,
                                      progress_type="silent")
    np.save(out + "/times.npy", dynamics.times)
    np.save(out + "/states.npy", dynamics.states)
""")


@pytest.fixture(scope="module")
def oqupy_run(tmp_path_factory):
    """A 10-step PT file written by oqupy 0.5.0 and OQuPy's dynamics on it."""
    if not OQUPY_PYTHON.exists():
        pytest.skip(
            f"no OQuPy 0.5.0 environment at {OQUPY_VENV} (make one with "
            "benchmarks/setup_oqupy_env.sh, or set OQUPY_VENV)"
        )
    directory = tmp_path_factory.mktemp("oqupy")
    subprocess.run(
        [str(OQUPY_PYTHON), "-c", OQUPY_SCRIPT, str(directory)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    return (
        str(directory / "pt.hdf5"),
        np.load(directory / "times.npy"),
        np.load(directory / "states.npy"),
    )


def test_dynamics_on_a_real_oqupy_file_equal_oqupys(oqupy_run, tmp_path):
    filename, times, states = oqupy_run
    pt = nm.import_process_tensor(filename)
    assert isinstance(pt, nm.SimpleProcessTensor)
    assert len(pt) == 10 and pt.dt == pytest.approx(0.1, abs=0)
    assert pt.metadata["converted_from"]["oqupy_version"] == "0.5.0"
    dynamics = nm.compute_dynamics(nm.System(HAMILTONIAN), RHO0, process_tensor=pt, **SILENT)
    assert np.max(np.abs(dynamics.times - times)) < 1e-12
    # OQuPy closes the state at t = 0 with the PT's total trace (cap_0, 1 up to the
    # truncation); nonmarkov returns the initial state itself (docs/oqupy_differences.md)
    assert np.max(np.abs(states[0] - pt.get_cap_tensor(0)[0] * RHO0)) < 1e-10
    assert np.max(np.abs(dynamics.states[1:] - states[1:])) < 1e-10

    converted = nm.convert_process_tensor(filename, tmp_path / "ours.hdf5")
    file_pt = nm.import_process_tensor(converted)
    assert isinstance(file_pt, nm.FileProcessTensor)
    again = nm.compute_dynamics(nm.System(HAMILTONIAN), RHO0, process_tensor=file_pt, **SILENT)
    file_pt.close()
    assert np.max(np.abs(again.states - dynamics.states)) < 1e-13


# --------------------------------------------------------------------------
# files with OQuPy's layout, written here
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def our_pt():
    """A 6-step PT of this library with a basis change (non-diagonal coupling)."""
    bath = nm.Bath(0.5 * (SZ + 0.3 * SX + 0.4 * SY), nm.PowerLawSD(0.1, 1.0, 4.0, temperature=0.5))
    parameters = nm.TempoParameters(dt=0.2, epsrel=1e-7, dkmax=3)
    return nm.pt_tempo_compute(bath, 0.0, 1.2, parameters, **SILENT)


def _ragged(handle, name, arrays, dtype):
    dataset = handle.create_dataset(name, (len(arrays),), dtype=h5py.vlen_dtype(dtype))
    for k, array in enumerate(arrays):
        dataset[k] = np.asarray(array, dtype=dtype).reshape(-1)


def write_oqupy_layout(filename, pt, rank=3, caps=True, dt=True, change=None):
    """Write ``pt`` with OQuPy 0.5's layout: attributes, single-NaN stand-ins for
    None, ragged (vlen) tensors with their shapes, transforms as OQuPy applies them
    (to row vectors: the transposes of ours), untransformed MPO tensors."""
    tensors = []
    for step in range(len(pt)):
        full = pt.get_mpo_tensor(step, transformed=False)
        tensors.append(full if rank == 4 else np.einsum("bcaa->bca", full))
    parts = {
        "hs_dim": np.array([pt.hilbert_space_dimension], dtype="i"),
        "dt": np.array([pt.dt if dt else np.nan]),
        "transform_in": pt.transform_in.T,
        "transform_out": pt.transform_out.T,
        "initial": [np.array([np.nan], dtype=complex)],
        "mpo": tensors,
        "caps": [pt.get_cap_tensor(k) for k in range(len(pt) + 1)] if caps else [],
    }
    if change is not None:
        change(parts)
    with h5py.File(filename, "w") as handle:
        handle.attrs["oqupy_version"] = "0.5.0"
        handle.attrs["name"] = "from the test"
        handle.attrs["description"] = "__no_description__"
        handle.attrs["writing"] = True  # as OQuPy 0.5 leaves it
        for key in ("hs_dim", "dt", "transform_in", "transform_out"):
            if parts[key] is not None:
                handle.create_dataset(key, data=parts[key])
        for key, prefix in (
            ("initial", "initial_tensor"),
            ("mpo", "mpo_tensors"),
            ("caps", "cap_tensors"),
        ):
            if parts[key] is None:
                continue
            _ragged(handle, f"{prefix}_data", parts[key], np.complex128)
            _ragged(handle, f"{prefix}_shape", [np.shape(t) for t in parts[key]], np.int32)
    return str(filename)


@pytest.mark.parametrize("rank", [3, 4])
def test_a_file_with_oqupys_layout_is_the_same_process_tensor(our_pt, tmp_path, rank):
    filename = write_oqupy_layout(tmp_path / "pt.hdf5", our_pt, rank=rank)
    for kind in ("file", "simple"):
        pt = nm.import_process_tensor(filename, kind)
        assert isinstance(pt, nm.SimpleProcessTensor)
        assert pt.name == "from the test" and pt.dt == our_pt.dt
        assert np.array_equal(pt.get_bond_dimensions(), our_pt.get_bond_dimensions())
        for step in range(len(pt)):
            assert np.allclose(
                pt.get_mpo_tensor(step), our_pt.get_mpo_tensor(step), rtol=0, atol=1e-14
            )
    expected = nm.compute_dynamics(nm.System(HAMILTONIAN), RHO0, process_tensor=our_pt, **SILENT)
    dynamics = nm.compute_dynamics(nm.System(HAMILTONIAN), RHO0, process_tensor=pt, **SILENT)
    assert np.max(np.abs(dynamics.states - expected.states)) < 1e-12


def test_files_without_caps_or_dt(our_pt, tmp_path):
    filename = write_oqupy_layout(tmp_path / "pt.hdf5", our_pt, caps=False, dt=False)
    pt = nm.import_process_tensor(filename)
    assert pt.dt is None and len(pt) == len(our_pt)
    dynamics = nm.compute_dynamics(
        nm.System(HAMILTONIAN), RHO0, process_tensor=pt, dt=our_pt.dt, **SILENT
    )
    expected = nm.compute_dynamics(nm.System(HAMILTONIAN), RHO0, process_tensor=our_pt, **SILENT)
    assert np.max(np.abs(dynamics.states - expected.states)) < 1e-12


def test_convert_process_tensor(our_pt, tmp_path):
    source = write_oqupy_layout(tmp_path / "oqupy.hdf5", our_pt)
    target = tmp_path / "ours.hdf5"
    assert nm.convert_process_tensor is convert_process_tensor
    assert convert_process_tensor(source, target) == str(target)
    with nm.import_process_tensor(str(target)) as file_pt:
        assert isinstance(file_pt, nm.FileProcessTensor)
        assert file_pt.metadata["converted_from"]["file"] == "oqupy.hdf5"
        for step in range(len(our_pt)):
            assert np.allclose(
                file_pt.get_mpo_tensor(step), our_pt.get_mpo_tensor(step), atol=1e-14
            )
    with pytest.raises(FileExistsError, match="overwrite=True"):
        convert_process_tensor(source, target)
    convert_process_tensor(str(target), target.with_name("copy.hdf5"))  # ours -> ours
    with pytest.raises(ValueError, match="same file"):
        convert_process_tensor(source, source, overwrite=True)
    with pytest.raises(FileNotFoundError):
        convert_process_tensor(tmp_path / "missing.hdf5", tmp_path / "out.hdf5")
    assert not (tmp_path / "out.hdf5").exists()


def test_the_file_reader_points_to_the_converter(our_pt, tmp_path):
    filename = write_oqupy_layout(tmp_path / "pt.hdf5", our_pt)
    with pytest.raises(ProcessTensorFileError, match="convert_process_tensor"):
        nm.FileProcessTensor("read", filename)


# --------------------------------------------------------------------------
# damaged and foreign files
# --------------------------------------------------------------------------


def _set(key, value):
    def change(parts):
        parts[key] = value

    return change


def _flip_entry(parts):
    """Change an entry the caps see: Liouville index 0, a diagonal one (OQuPy stores no
    checksums; the traced caps are blind to the off-diagonal indices)."""
    tensor = parts["mpo"][3].copy()
    tensor[0, 0, 0] += 1e-3
    parts["mpo"][3] = tensor


def _nan_entry(parts):
    tensor = parts["mpo"][2].copy()
    tensor.reshape(-1)[0] = np.nan
    parts["mpo"][2] = tensor


def _off_diagonal(parts):
    full = np.einsum("bca,ad->bcad", parts["mpo"][1], np.eye(parts["mpo"][1].shape[2]))
    full[0, 0, 0, 1] = 0.5
    parts["mpo"][1] = full


DAMAGED = {
    "missing-dataset": (_set("hs_dim", None), "lacks the dataset 'hs_dim'"),
    "bad-dimension": (_set("hs_dim", np.array([0], dtype="i")), "hs_dim is"),
    "bad-dt": (_set("dt", np.array([-0.1])), "dt is -0.1"),
    "narrow-transform": (_set("transform_in", np.eye(4)[:, :3]), "fewer than d"),
    "wrong-transform": (_set("transform_out", np.eye(9)), r"transform_out has shape \(9, 9\)"),
    "initial-tensor": (_set("initial", [np.ones((1, 4))]), "correlated initial state"),
    "cut-short": (lambda parts: parts["mpo"].pop(), "ends on bond|caps for"),
    "broken-chain": (lambda parts: parts["mpo"].pop(2), "past bond"),
    "wrong-leg": (lambda parts: parts["mpo"].__setitem__(0, np.ones((1, 4, 9))), "expected"),
    "flipped-entry": (_flip_entry, "cap .* differs"),
    "nan-entry": (_nan_entry, "NaN or infinite"),
    "off-diagonal": (_off_diagonal, "not diagonal"),
    "caps-count": (lambda parts: parts["caps"].pop(), "caps for"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_oqupy_files_are_clear_errors(our_pt, tmp_path, case):
    change, message = DAMAGED[case]
    filename = write_oqupy_layout(tmp_path / "pt.hdf5", our_pt, change=change)
    for kind in ("file", "simple"):
        with pytest.raises(ProcessTensorFileError, match=message) as error:
            nm.import_process_tensor(filename, kind)
        assert filename in str(error.value) and "OQuPy" in str(error.value)


def test_mismatched_data_and_shapes(our_pt, tmp_path):
    filename = write_oqupy_layout(tmp_path / "pt.hdf5", our_pt)
    with h5py.File(filename, "r+") as handle:
        shapes = handle["mpo_tensors_shape"]
        shapes[2] = np.array([5, 5, 4], dtype=np.int32)
    with pytest.raises(ProcessTensorFileError, match="entry 2 of mpo_tensors has"):
        nm.import_process_tensor(filename)
    with h5py.File(filename, "r+") as handle:
        del handle["mpo_tensors_shape"]
        _ragged(handle, "mpo_tensors_shape", [(1, 1, 4)], np.int32)
    with pytest.raises(ProcessTensorFileError, match="differ"):
        nm.import_process_tensor(filename)


def test_truncated_oqupy_file(our_pt, tmp_path):
    filename = write_oqupy_layout(tmp_path / "pt.hdf5", our_pt)
    size = os.path.getsize(filename)
    with open(filename, "r+b") as handle:
        handle.truncate(size // 2)
    with pytest.raises(ProcessTensorFileError, match="pt.hdf5"):
        nm.import_process_tensor(filename)
