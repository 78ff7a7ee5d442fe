"""The description of how a process tensor was made, stored with it in files."""

from __future__ import annotations

from ..model.bath import Bath
from ..model.parameters import TempoParameters


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
    correlations = bath.correlations
    described: dict[str, object] = {
        "type": type(correlations).__name__,
        "text": str(correlations),
        "name": correlations.name,
    }
    for key in ("alpha", "zeta", "cutoff", "cutoff_type", "temperature"):
        value = getattr(correlations, key, None)
        if isinstance(value, (int, float, str)):
            described[key] = value
    coupling = bath.coupling_operator
    return {
        "created_by": created_by,
        "start_time": start_time,
        "end_time": end_time,
        "num_steps": num_steps,
        "unique": bool(unique),
        "parameters": {
            "dt": parameters.dt,
            "epsrel": parameters.epsrel,
            "dkmax": parameters.dkmax,
            "tcut": parameters.tcut,
            "add_correlation_time": parameters.add_correlation_time,
            "subdiv_limit": parameters.subdiv_limit,
            "liouvillian_epsrel": parameters.liouvillian_epsrel,
            "name": parameters.name,
            "description": parameters.description,
        },
        "bath": {
            "name": bath.name,
            "description": bath.description,
            "coupling_operator_real": coupling.real.tolist(),
            "coupling_operator_imag": coupling.imag.tolist(),
            "correlations": described,
        },
    }
