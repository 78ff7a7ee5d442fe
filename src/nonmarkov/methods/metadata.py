"""The description of how a process tensor was made, stored with it in files."""

from __future__ import annotations

from typing import Any

from ..model.bath import Bath
from ..model.parameters import TempoParameters
from ..model.spectral_densities import TabulatedSD
from ..model.system import System

#: parameters of the spectral densities of ``model.spectral_densities``
_SD_KEYS = ("reorganisation_energy", "frequency", "damping", "tail_width", "scale")


def bath_metadata(bath: Bath) -> dict:
    """JSON-serialisable description of a bath: coupling operator and correlations."""
    correlations = bath.correlations
    described: dict[str, object] = {
        "type": type(correlations).__name__,
        "text": str(correlations),
        "name": correlations.name,
    }
    for key in ("alpha", "zeta", "cutoff", "cutoff_type", "temperature") + _SD_KEYS:
        value = getattr(correlations, key, None)
        if isinstance(value, (int, float, str)):
            described[key] = value
    if isinstance(correlations, TabulatedSD):  # the table itself, as interpolated
        described["frequencies"] = correlations.frequencies.tolist()
        described["values"] = correlations.values.tolist()
    coupling = bath.coupling_operator
    return {
        "name": bath.name,
        "description": bath.description,
        "coupling_operator_real": coupling.real.tolist(),
        "coupling_operator_imag": coupling.imag.tolist(),
        "correlations": described,
    }


def parameters_metadata(parameters: TempoParameters) -> dict:
    """JSON-serialisable description of TempoParameters."""
    return {
        "dt": parameters.dt,
        "epsrel": parameters.epsrel,
        "dkmax": parameters.dkmax,
        "tcut": parameters.tcut,
        "add_correlation_time": parameters.add_correlation_time,
        "exponential_tail": parameters.exponential_tail,
        "subdiv_limit": parameters.subdiv_limit,
        "liouvillian_epsrel": parameters.liouvillian_epsrel,
        "name": parameters.name,
        "description": parameters.description,
    }


def process_tensor_metadata(
    created_by: str,
    bath: Bath,
    parameters: TempoParameters,
    start_time: float,
    end_time: float,
    num_steps: int,
    unique: bool,
) -> dict:
    """JSON-serialisable description of how a process tensor was made (stored in files)."""
    return {
        "created_by": created_by,
        "start_time": start_time,
        "end_time": end_time,
        "num_steps": num_steps,
        "unique": bool(unique),
        "parameters": parameters_metadata(parameters),
        "bath": bath_metadata(bath),
    }


def system_metadata(system: Any) -> dict:
    """JSON-serialisable description of a system: its type, dimension, name, and for a
    time-independent one its Hamiltonian and Lindblad rates."""
    described: dict[str, object] = {
        "type": type(system).__name__,
        "dimension": int(system.dimension),
        "name": getattr(system, "name", ""),
    }
    if isinstance(system, System):
        hamiltonian = system.hamiltonian
        described["hamiltonian_real"] = hamiltonian.real.tolist()
        described["hamiltonian_imag"] = hamiltonian.imag.tolist()
        described["gammas"] = [float(g) for g in system.gammas]
    return described


def dynamics_metadata(created_by: str, system: Any, **details: Any) -> dict:
    """The provenance a :class:`~nonmarkov.Dynamics` keeps: who made it, the system, and
    the method's ``details`` (JSON-serialisable: baths, parameters, process tensors)."""
    return {"created_by": created_by, "system": system_metadata(system), **details}


def run_statistics(wall_time_s: float, num_steps: int, max_bond_dimension: Any = None) -> dict:
    """The record of a run a :class:`~nonmarkov.Dynamics` keeps in
    ``metadata['statistics']``: wall time (s), steps and the largest bond dimension
    (of the window, or of the process tensors; None where there is none)."""
    return {
        "wall_time_s": float(wall_time_s),
        "num_steps": int(num_steps),
        "max_bond_dimension": None if max_bond_dimension is None else int(max_bond_dimension),
    }
