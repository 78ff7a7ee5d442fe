"""Files that prove they are intact: every dataset of a process-tensor or dynamics file
carries a checksum (HDF5 fletcher32), verified on read; a flipped bit is an error naming
the dataset, never different numbers. Non-finite tensors are refused on the way in.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import nonmarkov as nm
from models import SX, SZ

SILENT = {"progress_type": "silent"}


def flip_a_bit(filename, dataset, offset=3):
    """Flip one bit inside the stored bytes of ``dataset`` (its first chunk)."""
    with h5py.File(filename, "r") as handle:
        stored = handle[dataset]
        assert stored.fletcher32, f"{dataset} has no checksum"
        start = stored.id.get_chunk_info(0).byte_offset
    with open(filename, "r+b") as raw:
        raw.seek(start + offset)
        byte = raw.read(1)[0]
        raw.seek(start + offset)
        raw.write(bytes([byte ^ 0x10]))


@pytest.fixture
def pt_file(tmp_path):
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1, 4.0))
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, tcut=0.3)
    pt = nm.pt_tempo_compute(bath, 0.0, 0.6, parameters, **SILENT)
    filename = str(tmp_path / "pt.hdf5")
    pt.export(filename)
    return filename


def test_a_flipped_bit_in_a_step_tensor_is_an_error_naming_it(pt_file):
    system, rho0 = nm.System(0.5 * SX), nm.operators.spin_dm("up")
    intact = nm.compute_dynamics(system, rho0, process_tensor=nm.import_process_tensor(pt_file))
    flip_a_bit(pt_file, "tensors/00000003")
    damaged = nm.import_process_tensor(pt_file)
    with pytest.raises(nm.process_tensors.hdf5.ProcessTensorFileError, match="step tensor 3"):
        nm.compute_dynamics(system, rho0, process_tensor=damaged, **SILENT)
    assert len(intact.times) == 7


@pytest.mark.parametrize("dataset", ["transform_in", "classes"])
def test_a_flipped_bit_in_the_header_is_an_error(pt_file, dataset):
    flip_a_bit(pt_file, dataset, offset=0)
    with pytest.raises(nm.process_tensors.hdf5.ProcessTensorFileError, match="damaged"):
        nm.import_process_tensor(pt_file, "simple")


def test_a_flipped_bit_in_a_dynamics_file_is_an_error_naming_the_dataset(tmp_path):
    dynamics = nm.compute_dynamics(
        nm.System(0.5 * SX), nm.operators.spin_dm("up"), dt=0.1, num_steps=5, **SILENT
    )
    filename = str(tmp_path / "dynamics.h5")
    dynamics.export(filename)
    np.testing.assert_allclose(nm.import_dynamics(filename).states, dynamics.states)
    flip_a_bit(filename, "states")
    with pytest.raises(ValueError, match="dataset 'states' cannot be read"):
        nm.import_dynamics(filename)


def test_non_finite_tensors_are_refused():
    pt = nm.SimpleProcessTensor(2, 0.1)
    tensor = np.ones((1, 1, 4), dtype=complex)
    tensor[0, 0, 2] = np.nan
    with pytest.raises(ValueError, match="step tensor 0 has NaN"):
        pt.set(0, tensor)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h: h.attrs.__setitem__("dt", 0.2), "differs from the dt it was made with"),
        (lambda h: h.attrs.__setitem__("hilbert_space_dimension", np.int64(3)), "damaged"),
        (lambda h: h.attrs.__setitem__("num_steps", np.int64(4)), "should hold 4 step tensors"),
        (lambda h: h.__delitem__("tensors/00000002"), "damaged"),
    ],
    ids=["dt", "dimension", "num_steps", "missing-tensor"],
)
def test_edited_attributes_of_a_process_tensor_file_are_errors(pt_file, edit, message):
    with h5py.File(pt_file, "r+") as handle:
        edit(handle)
    with pytest.raises(nm.process_tensors.hdf5.ProcessTensorFileError, match=message):
        nm.import_process_tensor(pt_file, "simple")


def test_damaged_dynamics_files_are_errors_naming_the_file(tmp_path):
    dynamics = nm.Dynamics([0.0, 0.1], [np.eye(2) / 2, np.eye(2) / 2])
    filename = str(tmp_path / "dynamics.h5")
    dynamics.export(filename)
    with h5py.File(filename, "r") as handle:
        assert handle.attrs["library_version"] == nm.__version__
    with h5py.File(filename, "r+") as handle:
        del handle["states"]
    with pytest.raises(ValueError, match="dynamics.h5 is damaged: it lacks states"):
        nm.import_dynamics(filename)
    truncated = str(tmp_path / "truncated.npz")
    dynamics.export(truncated)
    with open(truncated, "r+b") as raw:
        raw.truncate(40)
    with pytest.raises(ValueError, match="truncated.npz cannot be read as a nonmarkov dynamics"):
        nm.import_dynamics(truncated)
    with pytest.raises(FileNotFoundError, match="missing.h5"):
        nm.import_dynamics(str(tmp_path / "missing.h5"))


@pytest.mark.parametrize("suffix", [".h5", ".npz"])
def test_dynamics_keep_their_provenance_through_files(tmp_path, suffix):
    bath = nm.Bath(0.5 * SZ, nm.PowerLawSD(0.2, 1, 4.0))
    parameters = nm.TempoParameters(dt=0.1, epsrel=1e-6, tcut=0.3)
    system, rho0 = nm.System(0.5 * SX), nm.operators.spin_dm("up")
    tempo = nm.tempo_compute(system, bath, rho0, 0.0, 0.3, parameters, **SILENT)
    pt = nm.pt_tempo_compute(bath, 0.0, 0.3, parameters, **SILENT)
    through_pt = nm.compute_dynamics(system, rho0, process_tensor=pt, **SILENT)
    assert tempo.metadata["created_by"] == "Tempo"
    assert tempo.metadata["parameters"]["dt"] == 0.1
    assert tempo.metadata["bath"]["correlations"]["alpha"] == 0.2
    assert tempo.metadata["system"]["hamiltonian_real"] == (0.5 * SX).real.tolist()
    assert through_pt.metadata["process_tensors"][0]["created_by"] == "PtTempo"
    for dynamics in (tempo, through_pt):
        filename = str(tmp_path / f"dynamics{suffix}")
        dynamics.export(filename, overwrite=True)
        assert nm.import_dynamics(filename).metadata == dynamics.metadata
    with pytest.raises(TypeError):
        nm.Dynamics(metadata={"not json": object()})


def test_a_non_finite_tensor_in_a_file_is_refused_on_read(pt_file):
    with h5py.File(pt_file, "r+") as handle:
        data = handle["tensors/00000001"][()]
        data[0, 0, 0] = np.nan
        del handle["tensors/00000001"]
        handle.create_dataset("tensors/00000001", data=data)  # a valid checksum of a NaN
    with pytest.raises(
        nm.process_tensors.hdf5.ProcessTensorFileError, match="step tensor 1 has NaN"
    ):
        nm.import_process_tensor(pt_file, "simple")
