"""``Dynamics``: the time series of reduced density matrices an algorithm returns;
``MeanFieldDynamics``: those of the systems of a mean-field system and their field."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as default_np

from .. import validation as check
from .._version import __version__
from .atomic import atomic_path

DYNAMICS_FORMAT = "nonmarkov-dynamics-1"

logger = logging.getLogger("nonmarkov")


def _sequence(value: Any, name: str, what: str) -> list:
    """``value`` as a list, else a TypeError naming ``name`` and what it holds."""
    try:
        return list(value)
    except TypeError as error:
        raise TypeError(f"{name} must be a sequence of {what}; got {value!r}") from error


def plot_with_band(ax: Any, times: Any, series: Any, band: Any | None, label: str | None) -> None:
    """One line of ``series`` (N,) against ``times`` (N,) on the matplotlib Axes ``ax``,
    and, where ``band`` (N,) is given, the band series +- band in the line's colour
    (the error estimate of a converged result)."""
    (line,) = ax.plot(times, series, label=label)
    if band is not None:
        ax.fill_between(
            times, series - band, series + band, color=line.get_color(), alpha=0.25, linewidth=0
        )


class BaseDynamics:
    """What every time series of states offers, empty: ``name``, ``description``,
    ``times`` (0,), ``states`` (0, 0, 0), ``shape`` None, ``len`` 0, and
    ``expectations()`` ``(None, None)``. :class:`Dynamics` holds the states.
    """

    def __init__(self, name: str | None = None, description: str | None = None):
        self.name = f"Unnamed {type(self).__name__}" if name is None else str(name)
        self.description = "" if description is None else str(description)

    def __len__(self) -> int:
        return 0

    @property
    def times(self) -> default_np.ndarray:
        """The times, shape (0,)."""
        return default_np.zeros(0, dtype=float)

    @property
    def states(self) -> default_np.ndarray:
        """The states, shape (0, 0, 0)."""
        return default_np.zeros((0, 0, 0), dtype=default_np.complex128)

    @property
    def shape(self) -> Any:
        """Shape of one state; None without states."""
        return None

    def expectations(self, operator: Any = None, real: bool = False) -> tuple[Any, Any]:
        """``(times, Tr(operator rho(t)))``; ``(None, None)`` without states."""
        return None, None

    def __str__(self) -> str:
        return f"{type(self).__name__} {self.name!r}: {len(self)} states"


class Dynamics(BaseDynamics):
    """Times t_k and reduced density matrices rho(t_k), (d, d) each.

    Parameters
    ----------
    times : optional initial list of times.
    states : optional initial list of (d, d) density matrices.
    name, description : optional text.
    metadata : optional JSON-serialisable dict of how the dynamics was computed
        (the algorithms fill it: method, system, baths, parameters); kept in files.
    """

    def __init__(
        self,
        times: Any = None,
        states: Any = None,
        name: str | None = None,
        description: str | None = None,
        *,
        metadata: dict | None = None,
    ):
        self.name = "Unnamed Dynamics" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self.metadata: dict = check.metadata(metadata)
        self._times: list[float] = []
        self._states: list[default_np.ndarray] = []
        times = [] if times is None else _sequence(times, "times", "times t_k")
        states = [] if states is None else _sequence(states, "states", "(d, d) states")
        if len(times) != len(states):
            raise ValueError(
                f"times and states must have the same length; got {len(times)} and {len(states)}"
            )
        for time, state in zip(times, states):
            self.add(time, state)

    def add(self, time: float, state: Any) -> None:
        """Append the state (d, d) at ``time``."""
        time = check.real_number(time, "time")
        matrix = default_np.array(check.from_qutip(state, "state", "state"), dtype=complex)
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"state must be a square matrix; got shape {matrix.shape}")
        if self._states and matrix.shape != self._states[0].shape:
            raise ValueError(
                f"state has shape {matrix.shape} but earlier states have {self._states[0].shape}"
            )
        self._times.append(time)
        self._states.append(matrix)

    def __len__(self) -> int:
        return len(self._times)

    @property
    def times(self) -> default_np.ndarray:
        """The times, shape (N,)."""
        return default_np.array(self._times, dtype=float)

    @property
    def states(self) -> default_np.ndarray:
        """The density matrices, shape (N, d, d)."""
        if not self._states:
            return default_np.zeros((0, 0, 0), dtype=default_np.complex128)
        return default_np.array(self._states)

    @property
    def shape(self) -> default_np.ndarray:
        """Shape of one state as an integer array, ``array([d, d])``.

        Before the first state is added there is no shape: the value is then
        ``numpy.array(None, dtype=object)``, a 0-d array holding None (test
        ``len(dynamics) == 0`` for an empty Dynamics). All states together
        have shape ``(len(dynamics), d, d)``: ``dynamics.states.shape``.
        """
        if not self._states:
            return default_np.array(None, dtype=object)
        return default_np.array(self._states[0].shape)

    def expectations(
        self, operator: Any = None, real: bool = False
    ) -> tuple[default_np.ndarray | None, default_np.ndarray | None]:
        """Return ``(times, Tr(operator rho(t)))``: (N,) floats and (N,) values.

        ``operator``: a (d, d) matrix O; None gives the trace Tr(rho(t)).
        ``real=True`` returns the real part only (for Hermitian operators),
        else the complex values. An empty Dynamics returns ``(None, None)``.
        """
        if not self._states:
            return None, None
        states = self.states
        if operator is None:
            values = default_np.trace(states, axis1=1, axis2=2)
        else:
            matrix = check.square_matrix(operator, "operator", states.shape[1])
            values = default_np.einsum("ij,nji->n", matrix, states)
        return self.times, (values.real if check.boolean(real, "real") else values)

    def to_qutip(self, dims: Any = None) -> list:
        """The states as a list of ``qutip.Qobj`` density matrices, one per time.

        ``dims``: QuTiP's tensor structure, e.g. ``[2, 2]`` for two qubits;
        None: one space of dimension d. Needs QuTiP (``nonmarkov[qutip]``).
        """
        from .qutip_interop import states_to_qutip

        return states_to_qutip(self.states, dims)

    def expectations_of(
        self, operators: Any, real: bool = False
    ) -> tuple[default_np.ndarray | None, Any]:
        """Expectation values of several operators at once.

        ``operators``: a sequence of K (d, d) matrices, or a dict label ->
        (d, d) matrix. Returns ``(times, values)``: times (N,), and values an
        array (K, N) (one row per operator, in order; complex, or real with
        ``real=True``) for a sequence, a dict label -> (N,) for a dict. An
        empty Dynamics returns ``(None, None)``. One operator:
        :meth:`expectations` (OQuPy's signature).
        """
        real = check.boolean(real, "real")
        if isinstance(operators, dict):
            labels = list(operators)
            matrices = list(operators.values())
        elif isinstance(operators, (list, tuple)) or (
            isinstance(operators, default_np.ndarray) and operators.ndim == 3
        ):
            labels, matrices = None, list(operators)
        else:
            raise TypeError(
                "operators must be a list of (d, d) matrices or a dict label -> matrix; got "
                f"{type(operators).__name__} (for one operator use expectations)"
            )
        if not matrices:
            raise ValueError("operators is empty; give at least one (d, d) matrix")
        if not self._states:
            return None, None
        states = self.states
        stacked = default_np.array(
            [
                check.square_matrix(matrix, f"operators[{label!r}]", states.shape[1])
                for label, matrix in zip(labels or range(len(matrices)), matrices)
            ]
        )
        values = default_np.einsum("kij,nji->kn", stacked, states)
        values = values.real if real else values
        if labels is None:
            return self.times, values
        return self.times, dict(zip(labels, values))

    def between(self, start: float, end: float) -> Dynamics:
        """The states at times start <= t <= end (to rounding, 1e-9 dt), as a new
        :class:`Dynamics` with the same name, description and metadata (plus
        ``metadata['selected_times'] = [start, end]``)."""
        start = check.real_number(start, "start", allow_infinity=True)
        end = check.real_number(end, "end", allow_infinity=True)
        if end < start:
            raise ValueError(f"end ({end}) is before start ({start})")
        times = self.times
        steps = default_np.diff(times)
        slack = 1e-9 * (float(default_np.min(default_np.abs(steps))) if steps.size else 1.0)
        keep = [k for k, t in enumerate(times) if start - slack <= t <= end + slack]
        metadata = dict(self.metadata)
        metadata["selected_times"] = [start, end]
        return Dynamics(
            [self._times[k] for k in keep],
            [self._states[k] for k in keep],
            name=self.name,
            description=self.description,
            metadata=metadata,
        )

    def default_observables(self) -> dict[str, default_np.ndarray]:
        """The operators :meth:`plot` shows by default: those a run of a spec named
        (``metadata['observables']``), else sigma_x, sigma_y, sigma_z for two levels,
        else the populations |k><k|."""
        stored = self.metadata.get("observables")
        d = int(self._states[0].shape[0]) if self._states else 2
        if isinstance(stored, dict) and stored:
            return {
                str(label): default_np.array(value["real"]) + 1j * default_np.array(value["imag"])
                for label, value in stored.items()
            }
        if d == 2:
            pauli = {
                "sigma_x": [[0, 1], [1, 0]],
                "sigma_y": [[0, -1j], [1j, 0]],
                "sigma_z": [[1, 0], [0, -1]],
            }
            return {label: default_np.array(m, dtype=complex) for label, m in pauli.items()}
        return {
            f"proj_{k}": default_np.diag(default_np.arange(d) == k).astype(complex)
            for k in range(d)
        }

    def plot(self, operators: Any = None, ax: Any = None, label: str | None = None) -> Any:
        """Plot the real part of expectation values against time on ``ax``.

        ``operators``: a (d, d) matrix, a list of them, a dict label -> matrix,
        or None for :meth:`default_observables`. ``ax``: a matplotlib Axes (None:
        a new figure). ``label``: put before each line's label (e.g. the run).
        A converged result (:func:`~nonmarkov.converge`) draws its error estimate
        as a band around each line. Returns the Axes. Needs matplotlib
        (``pip install "nonmarkov[plot]"``).
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:  # pragma: no cover - matplotlib is in the test extra
            raise ImportError(
                'Dynamics.plot needs matplotlib: pip install "nonmarkov[plot]"'
            ) from error
        if operators is None:
            operators = self.default_observables()
        elif not isinstance(operators, dict):
            array = default_np.asarray(operators)
            matrices = [operators] if array.ndim == 2 else list(operators)
            operators = {f"operator {k}": matrix for k, matrix in enumerate(matrices)}
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4))
        times, values = self.expectations_of(operators, real=True)
        if times is not None:
            bands = self.error_bands(operators)
            for name, series in values.items():
                plot_with_band(
                    ax,
                    times,
                    series,
                    bands.get(name),
                    name if label is None else f"{label}: {name}",
                )
        ax.set_xlabel("time t")
        ax.set_ylabel("expectation value")
        ax.legend(fontsize=8)
        return ax

    @property
    def error_estimate(self) -> default_np.ndarray | None:
        """Estimated error per time of a converged result (:func:`~nonmarkov.converge`):
        (N,) bounds on max_ij |rho_ij(t) - rho_ij,exact(t)|, or None for a result
        without an estimate (``metadata['convergence']``)."""
        errors = self._convergence_errors()
        return None if errors is None else errors.get("states")

    def observable_errors(self) -> dict[str, default_np.ndarray]:
        """Estimated errors per time (N,) of the expectation values of the observables
        a converged result was asked for, label -> array; {} without them."""
        errors = self._convergence_errors() or {}
        return {k: v for k, v in errors.items() if k != "states"}

    def _convergence_errors(self) -> dict[str, default_np.ndarray] | None:
        record = self.metadata.get("convergence")
        if not isinstance(record, dict) or not isinstance(record.get("errors"), dict):
            return None
        errors = {k: default_np.asarray(v, dtype=float) for k, v in record["errors"].items()}
        if any(v.shape != (len(self),) for v in errors.values()):
            return None  # a selection (between) of the times: no estimate per time
        return errors

    def error_bands(self, operators: dict) -> dict[str, default_np.ndarray]:
        """Half-widths (N,) of the error bands of the expectation values of
        ``operators`` (label -> (d, d) matrix), as :meth:`plot` draws them: the
        estimate of an observable the result was converged on (same label), else
        sum_ij |O_ij| times the states' estimate (a bound on |Tr(O delta rho)|);
        {} for a result without an estimate."""
        states = self.error_estimate
        if states is None:
            return {}
        own = self.observable_errors()
        return {
            name: own[name]
            if name in own
            else float(default_np.sum(default_np.abs(default_np.asarray(matrix)))) * states
            for name, matrix in operators.items()
        }

    @property
    def statistics(self) -> dict:
        """The run statistics the algorithm recorded (``metadata['statistics']``: wall
        time in seconds, steps, largest bond dimension), or {}."""
        stats = self.metadata.get("statistics", {})
        return dict(stats) if isinstance(stats, dict) else {}

    def export(self, filename: str, overwrite: bool = False) -> None:
        """Write the dynamics to ``filename`` (``.npz``, or ``.h5``/``.hdf5``).

        The file appears only when complete (written under a temporary name,
        then renamed). Load it back with :func:`import_dynamics`. The
        ``nonmarkov`` logger notes the file at level INFO.
        """
        _write(
            filename,
            overwrite,
            {"times": self.times, "states": self.states},
            {
                "name": self.name,
                "description": self.description,
                "format": DYNAMICS_FORMAT,
                "library_version": __version__,
                "metadata": json.dumps(self.metadata),
            },
        )
        logger.info("wrote dynamics %r (%d states) to %s", self.name, len(self), filename)

    def __str__(self) -> str:
        return f"Dynamics {self.name!r}: {len(self)} states"

    def __repr__(self) -> str:
        if not self._times:
            return f"<Dynamics {self.name!r}: empty>"
        times = self._times
        steps = len(times) - 1
        grid = f"t = {times[0]:g} .. {times[-1]:g}, {steps} steps"
        if steps > 0:
            grid += f" (dt {(times[-1] - times[0]) / steps:.4g})"
        parts = [f"Dynamics {self.name!r}: {len(times)} states", grid]
        parts.append(f"d = {self._states[0].shape[0]}")
        how = self.metadata.get("created_by")
        if how:
            parameters = self.metadata.get("parameters")
            if not isinstance(parameters, dict):
                tensors = self.metadata.get("process_tensors") or [{}]
                parameters = tensors[0].get("parameters") if isinstance(tensors[0], dict) else None
                if tensors[0].get("created_by"):
                    how = f"{how} on {tensors[0]['created_by']}"
            if isinstance(parameters, dict):
                shown = ", ".join(
                    f"{key}={parameters[key]:g}"
                    for key in ("dt", "epsrel", "dkmax")
                    if isinstance(parameters.get(key), (int, float))
                )
                how = f"{how} ({shown})" if shown else how
            parts.append(f"by {how}")
        stats = self.statistics
        if isinstance(stats.get("wall_time_s"), (int, float)):
            parts.append(f"{stats['wall_time_s']:.3g} s")
        if isinstance(stats.get("max_bond_dimension"), int):
            parts.append(f"max bond {stats['max_bond_dimension']}")
        return "<" + ", ".join(parts) + ">"


def import_dynamics(filename: str) -> Dynamics:
    """Load a :class:`Dynamics` written by :meth:`Dynamics.export`."""
    content = _read(
        filename,
        DYNAMICS_FORMAT,
        "a nonmarkov dynamics file",
        ("times", "states", "name", "description"),
    )
    times, states = default_np.asarray(content["times"]), default_np.asarray(content["states"])
    if states.ndim != 3 or states.shape[0] != times.shape[0] or times.ndim != 1:
        raise ValueError(
            f"{filename} is damaged: {times.shape[0] if times.ndim else 0} times but states "
            f"of shape {states.shape}"
        )
    for dataset, array in (("times", times), ("states", states)):
        bad = ~default_np.isfinite(array)
        if default_np.any(bad):
            where = int(default_np.argmax(bad.reshape(bad.shape[0], -1).any(axis=1)))
            raise ValueError(
                f"{filename} is damaged: the dataset {dataset!r} has NaN or infinite entries "
                f"(first at index {where}); a computed Dynamics is always finite"
            )
    try:
        metadata = json.loads(str(content.get("metadata", "{}")))
    except json.JSONDecodeError as error:
        raise ValueError(f"{filename} is damaged: its metadata is not JSON ({error})") from error
    return Dynamics(
        content["times"],
        content["states"],
        name=str(content["name"]),
        description=str(content["description"]),
        metadata=metadata,
    )


def _write(filename: str, overwrite: bool, arrays: dict[str, Any], text: dict[str, Any]) -> None:
    """``arrays`` and ``text`` into ``filename`` (``.npz`` or ``.h5``/``.hdf5``): the
    file appears only when complete."""
    filename = os.fspath(filename)
    overwrite = check.boolean(overwrite, "overwrite")
    if os.path.exists(filename) and not overwrite:
        raise FileExistsError(f"{filename} exists; pass overwrite=True to replace it")
    extension = os.path.splitext(filename)[1].lower()
    if extension not in (".npz", ".h5", ".hdf5"):
        raise ValueError(f"unknown file type {extension!r}; use .npz, .h5 or .hdf5")
    with atomic_path(filename) as temporary:
        if extension == ".npz":
            with open(temporary, "wb") as handle:
                default_np.savez(handle, **arrays, **text)
        else:
            import h5py

            with h5py.File(temporary, "w") as handle:
                for key, value in text.items():
                    handle.attrs[key] = value
                write_datasets(handle, arrays)


def write_datasets(group: Any, arrays: Mapping[str, Any]) -> None:
    """Each array of ``arrays`` (name -> array) as a dataset of the open HDF5 group
    ``group``, with a fletcher32 checksum where it can carry one (not a scalar, not
    empty), so that a damaged file fails when read."""
    for key, array in arrays.items():
        array = default_np.asarray(array)
        checksum = array.ndim > 0 and array.size > 0
        group.create_dataset(key, data=array, fletcher32=checksum)


def _read(filename: str, file_format: str, what: str, required: tuple[str, ...]) -> dict[str, Any]:
    """Everything :func:`_write` put into ``filename``, checked to be ``file_format``
    with the entries ``required`` (``what`` names it in the errors)."""
    filename = os.fspath(filename)
    extension = os.path.splitext(filename)[1].lower()
    if extension not in (".npz", ".h5", ".hdf5"):
        raise ValueError(f"unknown file type {extension!r}; use .npz, .h5 or .hdf5")
    if not os.path.exists(filename):
        raise FileNotFoundError(f"{what} {filename!r} does not exist")
    if not os.path.isfile(filename):
        kind = (
            "a directory" if os.path.isdir(filename) else "not a regular file (a FIFO, a device?)"
        )
        raise ValueError(f"{what} {filename!r} is {kind}; give a file written by export")
    try:
        if extension == ".npz":
            with default_np.load(filename, allow_pickle=False) as data:
                content = {key: data[key] for key in data.files}
        else:
            import h5py

            with h5py.File(filename, "r") as handle:
                content = {}
                for key in handle:
                    try:
                        content[key] = handle[key][()]
                    except OSError as error:  # a failed checksum, a truncated dataset
                        raise ValueError(
                            f"{filename} is damaged: dataset {key!r} cannot be read ({error})"
                        ) from error
                content.update({key: handle.attrs[key] for key in handle.attrs})
    except ValueError:
        raise
    except Exception as error:  # a damaged or foreign file, named
        raise ValueError(
            f"{filename} cannot be read as {what}: it is damaged, truncated or of another "
            f"kind ({type(error).__name__}: {error})"
        ) from error
    if str(content.get("format", "")) != file_format:
        raise ValueError(f"{filename} is not {what} (format {file_format!r})")
    missing = [key for key in required if key not in content]
    if missing:
        raise ValueError(f"{filename} is damaged: it lacks {', '.join(missing)}")
    return content


MEAN_FIELD_FORMAT = "nonmarkov-mean-field-dynamics-1"


class MeanFieldDynamics:
    """The states of the systems of a mean-field system and their shared field.

    Parameters
    ----------
    times : optional list of times t_k.
    system_states_list : optional list, per time, of the states [rho_1, ...,
        rho_n] of the n systems (rho_i (d_i, d_i)).
    fields : optional list of complex fields a(t_k).
    name, description : optional text.

    ``system_dynamics`` holds one :class:`Dynamics` per system.
    """

    def __init__(
        self,
        times: Any = None,
        system_states_list: Any = None,
        fields: Any = None,
        name: str | None = None,
        description: str | None = None,
    ):
        self.name = "Unnamed MeanFieldDynamics" if name is None else str(name)
        self.description = "" if description is None else str(description)
        self._times: list[float] = []
        self._fields: list[complex] = []
        self._system_dynamics: list[Dynamics] = []
        times = [] if times is None else list(times)
        states = [] if system_states_list is None else list(system_states_list)
        fields = [] if fields is None else list(fields)
        if not len(times) == len(states) == len(fields):
            raise ValueError(
                "times, system_states_list and fields must have the same length; got "
                f"{len(times)}, {len(states)} and {len(fields)}"
            )
        for time, system_states, field in zip(times, states, fields):
            self.add(time, system_states, field)

    def add(self, time: float, system_states: Any, field: complex) -> None:
        """Append the states [rho_1, ..., rho_n] and the field at ``time``."""
        time = check.real_number(time, "time")
        value = complex(default_np.asarray(field).item())
        if not (math.isfinite(value.real) and math.isfinite(value.imag)):
            raise ValueError(f"the field at t={time} is not finite: {value}")
        system_states = list(system_states)
        if not self._system_dynamics:
            if not system_states:
                raise ValueError("system_states must hold the state of at least one system")
            self._system_dynamics = [
                Dynamics(name=f"system {i}") for i in range(len(system_states))
            ]
        elif len(system_states) != len(self._system_dynamics):
            raise ValueError(
                f"got {len(system_states)} states; this dynamics has "
                f"{len(self._system_dynamics)} systems"
            )
        for dynamics, state in zip(self._system_dynamics, system_states):
            dynamics.add(time, state)
        self._times.append(time)
        self._fields.append(value)

    def __len__(self) -> int:
        return len(self._times)

    @property
    def times(self) -> default_np.ndarray:
        """The times, (N,)."""
        return default_np.asarray(self._times, dtype=float)

    @property
    def fields(self) -> default_np.ndarray:
        """The field at each time, (N,) complex."""
        return default_np.asarray(self._fields, dtype=complex)

    def field_expectations(self) -> tuple[Any, Any]:
        """(times, fields), or (None, None) when empty (as OQuPy)."""
        if not self._times:
            return None, None
        return self.times, self.fields

    @property
    def system_dynamics(self) -> list[Dynamics]:
        """One :class:`Dynamics` per system."""
        return list(self._system_dynamics)

    def export(self, filename: str, overwrite: bool = False) -> None:
        """Write to ``filename`` (``.npz``, or ``.h5``/``.hdf5``), complete or not at
        all; load it back with :func:`import_mean_field_dynamics`."""
        arrays: dict[str, Any] = {"times": self.times, "fields": self.fields}
        for i, dynamics in enumerate(self._system_dynamics):
            arrays[f"states_{i}"] = dynamics.states
        text = {
            "name": self.name,
            "description": self.description,
            "format": MEAN_FIELD_FORMAT,
            "library_version": __version__,
        }
        _write(filename, overwrite, arrays, text)

    def __str__(self) -> str:
        return (
            f"MeanFieldDynamics {self.name!r}: {len(self._system_dynamics)} systems, "
            f"{len(self)} times"
        )


def import_mean_field_dynamics(filename: str) -> MeanFieldDynamics:
    """Load a :class:`MeanFieldDynamics` written by :meth:`MeanFieldDynamics.export`."""
    content = _read(
        filename,
        MEAN_FIELD_FORMAT,
        "a nonmarkov mean-field dynamics file",
        ("times", "fields", "name", "description", "states_0"),
    )
    count = len([key for key in content if str(key).startswith("states_")])
    states = [content[f"states_{i}"] for i in range(count)]
    times = content["times"]
    return MeanFieldDynamics(
        times,
        [[system[k] for system in states] for k in range(len(times))],
        content["fields"],
        name=str(content["name"]),
        description=str(content["description"]),
    )
