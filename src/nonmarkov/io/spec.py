"""Run specifications: a TOML file that describes a simulation, read and checked.

:func:`load_spec` / :func:`parse_spec` turn the text of a spec (the format is
documented in docs/cli.md) into a :class:`Spec`: one :class:`RunSpec` per point
of its sweep (one point without a ``[sweep]`` table), each holding host arrays
and numbers and the library's model objects built from them. Every key is
checked here, before anything runs, once: the structure (tables, key names,
operator and state forms) by this module, every value by the library itself
while its objects (``System``, the spectral densities, ``Bath``,
``TempoParameters``, ``EngineOptions``) are built, its message prefixed with the
key path (``parameters.epsrel: epsrel must lie in (0, 1]; got 2.0``). A bad spec
is a :class:`SpecError`. Running the algorithms is
:mod:`nonmarkov.methods.spec_run`.
"""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import difflib
import json
import math
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as default_np

from .. import validation as check
from ..cost import affordable_run
from ..methods.pt_construction import PT_METHODS as CONSTRUCTIONS
from ..model import operators
from ..model.bath import Bath
from ..model.correlations import PowerLawSD
from ..model.parameters import TempoParameters, check_tolerance
from ..model.spectral_densities import (
    DrudeLorentzSD,
    TabulatedSD,
    UnderdampedSD,
)
from ..model.system import System
from ..options import EngineOptions, default_options
from ..sweeps.grid import expand_grid

T = TypeVar("T")

#: the methods a spec can name (``construction``: one of ``CONSTRUCTIONS``, the
#: constructions of :func:`~nonmarkov.pt_tempo_compute`, for ``'pt-tempo'``)
METHODS = ("tempo", "pt-tempo", "uniform")
SPECTRAL_DENSITIES = ("power_law", "drude_lorentz", "underdamped", "tabulated")
#: the keys of each spectral density (besides coupling, spectral_density and name)
SPECTRAL_DENSITY_KEYS = {
    "power_law": ("alpha", "zeta", "cutoff", "cutoff_type", "temperature"),
    "drude_lorentz": ("reorganisation_energy", "cutoff", "temperature"),
    "underdamped": ("reorganisation_energy", "frequency", "damping", "temperature"),
    "tabulated": ("file", "temperature", "tail_width", "scale"),
}
#: named operators of a two-level system
PAULI_NAMES = ("sigma_x", "sigma_y", "sigma_z", "sigma_+", "sigma_-")
#: named operators of any dimension d (proj_k is |k><k|, k = 0..d-1)
LEVEL_NAMES = ("identity", "create", "destroy", "number", "proj_<k>")
STATE_NAMES = tuple(operators.SPIN_DM)

TOP_KEYS: tuple[str, ...] = ("name", "description", "method", "system", "bath", "parameters")
TOP_KEYS += ("times", "output", "options", "sweep", "convergence")
SYSTEM_KEYS = ("dimension", "hamiltonian", "lindblad", "initial_state", "name")
LINDBLAD_KEYS = ("rate", "operator")
BATH_KEYS: tuple[str, ...] = ("coupling", "spectral_density", "alpha", "zeta", "cutoff")
BATH_KEYS += ("cutoff_type",)
BATH_KEYS += ("reorganisation_energy", "frequency", "damping", "file", "tail_width", "scale")
BATH_KEYS += ("temperature", "name")
METHOD_KEYS = ("name", "construction", "unique", "save_process_tensor")
PARAMETER_KEYS = (
    "guess",
    "tolerance",
    "dt",
    "epsrel",
    "tcut",
    "dkmax",
    "add_correlation_time",
    "exponential_tail",
)
TIMES_KEYS = ("start", "end")
OUTPUT_KEYS = ("observables", "plot")
CONVERGENCE_KEYS = ("tolerance", "observables", "max_cost", "max_seconds")


class SpecError(ValueError):
    """A spec that cannot run: the message names the key and what is allowed."""


@dataclass
class BathSpec:
    """One bath: coupling operator S (d, d) and a spectral density of the kind
    ``spectral_density`` (``SPECTRAL_DENSITIES``) with its keys; ``file`` is the
    absolute path of a tabulated one."""

    coupling: default_np.ndarray
    alpha: float
    zeta: float
    cutoff: float
    cutoff_type: str
    temperature: float
    name: str
    spectral_density: str = "power_law"
    reorganisation_energy: float = 0.0
    frequency: float = 0.0
    damping: float = 0.0
    file: str = ""
    tail_width: float | None = None
    scale: float = 1.0
    #: the library's bath, built from the fields above (which it checked)
    bath: Bath | None = None


@dataclass
class RunSpec:
    """One run of a spec (one point of its sweep), checked.

    ``parameters`` holds the keyword arguments of ``TempoParameters`` (dt, epsrel
    and the memory cut) as the spec gives them, or is None for ``guess`` (then
    ``tolerance``, None for the library default); ``options`` the ``[options]``
    table. ``system``, ``tempo_parameters`` (None for a guess),
    ``engine_options`` and each bath's ``bath`` are the library's objects built
    from them: every value was checked by the library when they were built.
    ``point`` holds the sweep values of this run (key path -> value); ``tree``
    the spec with them filled in.
    """

    name: str
    description: str
    dimension: int
    hamiltonian: default_np.ndarray
    lindblad: list[tuple[float, default_np.ndarray]]
    system_name: str
    baths: list[BathSpec]
    method: str
    construction: str
    unique: bool
    save_process_tensor: bool
    parameters: dict[str, Any] | None
    tolerance: float | None
    initial_state: default_np.ndarray
    observables: dict[str, default_np.ndarray]
    start: float
    end: float
    plot: bool
    options: dict[str, Any]
    system: System
    tempo_parameters: TempoParameters | None
    engine_options: EngineOptions
    point: dict[str, Any] = field(default_factory=dict)
    tree: dict[str, Any] = field(default_factory=dict)
    #: ``[convergence]``: tolerance, observables (label -> (d, d) or None), max_cost,
    #: max_seconds; None without the table
    convergence: dict[str, Any] | None = None

    def process_tensor_keys(self) -> list[str]:
        """What the process tensor of each bath depends on, as text (one per bath):
        runs with the same key for a bath share its process tensor (the system, the
        initial state and the observables may differ)."""
        common = {
            "method": self.method,
            "construction": self.construction,
            "unique": self.unique,
            "parameters": self.parameters,
            "tolerance": self.tolerance,
            "times": [self.start, self.end],
            "options": self.options,
        }
        keys = []
        for bath in self.baths:
            described = {
                "coupling": [bath.coupling.real.tolist(), bath.coupling.imag.tolist()],
                **{k: getattr(bath, k) for k in ("alpha", "zeta", "cutoff", "cutoff_type")},
                **{k: getattr(bath, k) for k in _OTHER_SPECTRAL_DENSITY_FIELDS},
                "temperature": bath.temperature,
                **common,
            }
            keys.append(json.dumps(described, sort_keys=True))
        return keys

    def process_tensor_key(self) -> str:
        """The keys of all baths together (:meth:`process_tensor_keys`)."""
        return json.dumps(self.process_tensor_keys())


@dataclass
class Spec:
    """A checked spec: its text, where it came from and its runs (one per sweep point)."""

    text: str
    source: str
    name: str
    runs: list[RunSpec]
    sweep_keys: list[str]


def load_spec(filename: str | os.PathLike) -> Spec:
    """Read and check the spec file ``filename`` (TOML); a :class:`SpecError` if it
    cannot run."""
    path = os.fspath(filename)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise SpecError(f"cannot read the spec file {path!r}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise SpecError(
            f"cannot read the spec file {path!r}: it is not UTF-8 text (byte {error.start}); "
            "a spec is a TOML file in UTF-8"
        ) from error
    default_name = os.path.splitext(os.path.basename(path))[0] or "run"
    if not _is_file_name(default_name):
        default_name = "run"
    token = _SPEC_DIRECTORY.set(os.path.dirname(os.path.abspath(path)))
    try:  # a tabulated spectral density's file is relative to the spec file
        return parse_spec(text, source=path, default_name=default_name)
    finally:
        _SPEC_DIRECTORY.reset(token)


def parse_spec(text: str, source: str = "<spec>", default_name: str = "run") -> Spec:
    """Check the spec ``text`` (TOML) and return its runs; a :class:`SpecError` naming
    the key otherwise. ``source`` names the spec in the messages; ``default_name``
    is the run's name when the spec has no ``name``."""
    try:
        tree = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{source}: not valid TOML: {error}") from error
    try:
        _known_keys(tree, TOP_KEYS, "the top level")
        for key in ("system", "times"):
            if key not in tree:
                raise SpecError(f"[{key}] is missing; a spec needs [system], [bath] and [times]")
        name = _file_name(tree.get("name", default_name), "name")
        sweep = _sweep(tree.get("sweep", {}))
        keys: list[str] = []
        points: list[dict[str, Any]] = [{}]  # one run without a sweep
        if sweep:
            try:  # the grid of the library's sweeps: its value kinds, its cost rule
                keys, points = expand_grid(
                    sweep,
                    label="sweep",
                    method="the sweep",
                    keywords=False,
                    point_bytes=SPEC_POINT_BYTES,
                )
            except (TypeError, ValueError) as error:
                raise SpecError(f"[sweep]: {error}") from error
        base = {key: value for key, value in tree.items() if key != "sweep"}
        if isinstance(base.get("method"), str):  # the short forms as tables, for the sweep
            base["method"] = {"name": base["method"]}
        if base.get("parameters") == "guess":
            base["parameters"] = {"guess": True}
        _sweep_targets(base, sweep)
        runs = []
        for point in points:
            point_tree = copy.deepcopy(base)
            for key, value in point.items():
                _set_path(point_tree, key, value)
            try:
                run = _run(point_tree, name)
            except SpecError as error:
                if not point or _fails_alike(base, name, error):
                    raise  # the sweep is not the cause: no sweep point in the message
                where = ", ".join(f"{k} = {_short(v)}" for k, v in point.items())
                raise SpecError(f"{error} (at the sweep point {where})") from error
            run.point = point
            run.tree = point_tree
            runs.append(run)
    except SpecError as error:
        raise SpecError(f"{source}: {error}") from error
    return Spec(text=text, source=source, name=name, runs=runs, sweep_keys=keys)


# --------------------------------------------------------------------------- sweep


def _sweep(table: Any) -> dict[str, list]:
    """``[sweep]``: key path -> list of values (dotted keys or nested tables)."""
    if not isinstance(table, dict):
        raise SpecError("[sweep] must be a table of key = [values]")
    flat: dict[str, list] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        elif isinstance(value, list):
            flat[prefix] = value
        else:
            raise SpecError(
                f"sweep.{prefix} must be a list of values, e.g. {prefix} = [0.1, 0.2]; "
                f"got {_short(value)}"
            )

    walk("", table)
    for key in flat:
        if key.split(".")[0] not in TOP_KEYS or key.split(".")[0] == "sweep":
            top = [k for k in TOP_KEYS if k != "sweep"]
            raise SpecError(
                f"sweep.{key}: {key.split('.')[0]!r} is not a key of a spec"
                f"{did_you_mean(key.split('.')[0], top)}; the sweep names keys of {top}"
            )
    return flat


def _fails_alike(base: dict, name: str, error: SpecError) -> bool:
    """Whether the spec without its sweep values fails with the same message as a
    sweep point did (then the point is not the cause)."""
    try:
        _run(copy.deepcopy(base), name)
    except SpecError as base_error:
        return str(base_error) == str(error)
    return False


#: spec tables whose keys are the terms of an operator (name = coefficient)
OPERATOR_TABLES = ("system.hamiltonian", "coupling")


def _sweep_targets(base: dict, sweep: dict[str, list]) -> None:
    """Refuse a sweep over a term of an operator table (``system.hamiltonian.sigma_z``,
    ``bath.coupling.sigma_x``) that the spec's operator does not have: sweeping it would
    add a term the spec does not show."""
    for path in sweep:
        parts = path.split(".")
        parent = ".".join(parts[:-1])
        if not any(parent == t or parent.endswith("." + t) for t in OPERATOR_TABLES):
            continue
        node: Any = base
        for part in parts[:-1]:
            if isinstance(node, list) and len(node) == 1 and not part.isdigit():
                node = node[0]
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict):
                node = node.get(part)
            else:
                node = None
        if isinstance(node, list) and len(node) == 1 and isinstance(node[0], dict):
            node = node[0]
        if isinstance(node, dict) and parts[-1] not in node:
            raise SpecError(
                f"sweep.{path}: {parent} has no term {parts[-1]!r}"
                f"{did_you_mean(parts[-1], node)}; its terms are {list(node)} (add the term, "
                f"e.g. {parts[-1]} = 0.0, to sweep its coefficient)"
            )


def _set_path(tree: dict, path: str, value: Any) -> None:
    """Set ``tree[a][b]... = value`` for ``path`` ``'a.b...'``; a list of baths is
    indexed by number (``bath.1.alpha``), a single bath needs none (``bath.alpha``)."""
    parts = path.split(".")
    node: Any = tree
    for i, part in enumerate(parts[:-1]):
        here = ".".join(parts[: i + 1])
        child = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise SpecError(
                    f"sweep.{path}: {here} has {len(node)} entries; index them 0..{len(node) - 1}"
                )
            child = node[int(part)]
        if isinstance(child, list) and child and all(isinstance(c, dict) for c in child):
            if len(child) == 1 and not parts[i + 1].isdigit():
                child = child[0]
        if child is None:
            if not isinstance(node, dict):
                raise SpecError(f"sweep.{path}: {here} is not a table")
            child = node.setdefault(part, {})
        node = child
    if not isinstance(node, dict):
        raise SpecError(f"sweep.{path}: {'.'.join(parts[:-1])} is not a table")
    node[parts[-1]] = value


# --------------------------------------------------------------------------- one run


def _run(tree: dict, name: str) -> RunSpec:
    """The checked run of the spec ``tree`` (no sweep left): its structure read here,
    every value checked by building the library's objects (:func:`_built`)."""
    system = _table(tree["system"], "system", SYSTEM_KEYS)
    baths = _bath_tables(tree.get("bath"))
    method = _method(tree.get("method", "tempo"))
    parameters, tolerance, tempo_parameters = _parameters(tree.get("parameters", {"guess": True}))
    times = _table(tree["times"], "times", TIMES_KEYS)
    output = _table(tree.get("output", {}), "output", OUTPUT_KEYS)
    options = _table(tree.get("options", {}), "options", None)
    engine_options = _engine_options(options)

    dimension = _dimension(system, baths, output)
    if "hamiltonian" not in system:
        raise SpecError("system.hamiltonian is missing: e.g. hamiltonian = { sigma_x = 0.5 }")
    hamiltonian = _operator(system["hamiltonian"], "system.hamiltonian", dimension)
    lindblad = []
    terms = system.get("lindblad", [])
    if isinstance(terms, dict):
        terms = [terms]
    if not isinstance(terms, list):
        raise SpecError("system.lindblad must be a list of { rate = ..., operator = ... }")
    for i, term in enumerate(terms):
        where = f"system.lindblad[{i}]"
        term = _table(term, where, LINDBLAD_KEYS)
        for key in LINDBLAD_KEYS:
            if key not in term:
                raise SpecError(f"{where}.{key} is missing (a term needs rate and operator)")
        lindblad.append((term["rate"], _operator(term["operator"], f"{where}.operator", dimension)))
    system_name = _text(system.get("name", "system"), "system.name")
    system_keys = {"hamiltonian": "system.hamiltonian"}
    for i in range(len(lindblad)):
        system_keys[f"gammas[{i}]"] = f"system.lindblad[{i}].rate"
        system_keys[f"lindblad_operators[{i}]"] = f"system.lindblad[{i}].operator"
    model_system = _built(
        lambda: System(
            hamiltonian,
            gammas=[rate for rate, _ in lindblad],
            lindblad_operators=[operator for _, operator in lindblad],
            name=system_name,
        ),
        system_keys,
        "[system]",
    )
    lindblad = [(gamma, op) for gamma, (_, op) in zip(model_system.gammas, lindblad)]

    bath_specs = []
    for i, bath in enumerate(baths):
        where = "bath" if len(baths) == 1 else f"bath[{i}]"
        bath_specs.append(_bath(bath, where, dimension))
    if method["name"] == "tempo" and len(bath_specs) != 1:
        raise SpecError(
            f"method 'tempo' takes exactly one bath; the spec has {len(bath_specs)} "
            "(use method 'pt-tempo' for several baths, or none)"
        )
    if tempo_parameters is not None and tempo_parameters.exponential_tail:
        sequential = method["name"] == "pt-tempo" and method["construction"] == "sequential"
        if method["name"] != "tempo" and not sequential:
            raise SpecError(
                "parameters.exponential_tail is run by method 'tempo' and by 'pt-tempo' "
                f"with the sequential construction; the spec's method is {method['name']!r}"
                + (f" ({method['construction']})" if method["name"] == "pt-tempo" else "")
            )
    if parameters is None and len(bath_specs) != 1:
        raise SpecError(
            f"parameters: guess needs exactly one bath; the spec has {len(bath_specs)}: "
            "give dt and epsrel (and tcut or dkmax)"
        )
    if method["name"] == "uniform":
        if not bath_specs:
            raise SpecError("method 'uniform' needs a [bath]")
        if tempo_parameters is not None and tempo_parameters.dkmax is None:
            raise SpecError(
                "method 'uniform' needs a memory cut: give parameters.tcut or parameters.dkmax"
            )

    start = _built(lambda: check.real_number(times.get("start", 0.0), "times.start"))
    if "end" not in times:
        raise SpecError("times.end is missing: the time up to which the system is propagated")
    end = _built(lambda: check.real_number(times["end"], "times.end"))
    if not end > start:
        raise SpecError(f"times.end ({end}) must be after times.start ({start})")
    if tempo_parameters is not None:
        dt = tempo_parameters.dt
        if (end - start) / dt < 0.5:
            raise SpecError(
                f"parameters.dt ({dt}) is longer than the run "
                f"(times.end - times.start = {end - start}); choose a smaller dt"
            )
        steps = int(round((end - start) / dt))
        memory = tempo_parameters.dkmax
        _built(
            lambda: affordable_run(
                steps,
                dimension,
                steps + 1,
                "the run",
                None if memory is None else min(memory, steps),
                cause=f"times.end - times.start = {end - start:g}, parameters.dt = {dt:g}",
            )
        )

    if "initial_state" not in system:
        raise SpecError(
            f"system.initial_state is missing: a name {list(STATE_NAMES)} (two levels), "
            "a level number k (|k><k|) or a matrix"
        )
    initial_state = _state(system["initial_state"], "system.initial_state", dimension)
    observables = _observables(output.get("observables"), dimension)
    convergence = None
    if "convergence" in tree:
        convergence = _convergence(tree["convergence"], observables, dimension)
        if method["name"] == "uniform" or len(bath_specs) != 1:
            raise SpecError(
                "[convergence] needs method 'tempo' or 'pt-tempo' with exactly one bath; "
                f"the spec has method {method['name']!r} and {len(bath_specs)} bath(s)"
            )
    return RunSpec(
        name=name,
        description=_text(tree.get("description", ""), "description"),
        dimension=dimension,
        hamiltonian=model_system.hamiltonian,
        lindblad=lindblad,
        system_name=system_name,
        baths=bath_specs,
        method=method["name"],
        construction=method["construction"],
        unique=method["unique"],
        save_process_tensor=method["save_process_tensor"],
        parameters=parameters,
        tolerance=tolerance,
        initial_state=initial_state,
        observables=observables,
        start=start,
        end=end,
        plot=_boolean(output.get("plot", True), "output.plot"),
        convergence=convergence,
        options=dict(options),
        system=model_system,
        tempo_parameters=tempo_parameters,
        engine_options=engine_options,
    )


def _built(build: Callable[[], T], keys: dict[str, str] | None = None, where: str = "") -> T:
    """``build()``, the library's constructor or check of spec values; its
    ``TypeError``/``ValueError`` becomes a :class:`SpecError` that starts with the spec
    key its message names first (``keys``: the library's argument name -> the spec's
    key path), else with ``where`` (nothing: the message names the key itself)."""
    try:
        return build()
    except SpecError:
        raise
    except (TypeError, ValueError) as error:
        text = str(error)
        named = []
        for word, key in (keys or {}).items():
            found = re.search(rf"(?<![\w.]){re.escape(word)}(?![\w\[])", text)
            if found:
                named.append((found.start(), key))
        culprit = min(named)[1] if named else where
        raise SpecError(f"{culprit}: {text}" if culprit else text) from error


def _convergence(
    value: Any, observables: dict[str, default_np.ndarray], dimension: int
) -> dict[str, Any]:
    """``[convergence]``: tolerance (required, in (0, 1)), observables (labels of
    ``output.observables`` or operator names; none: the tolerance is on the states),
    max_cost (cost units), max_seconds."""
    table = _table(value, "convergence", CONVERGENCE_KEYS)
    if "tolerance" not in table:
        raise SpecError("convergence.tolerance is missing: e.g. tolerance = 1e-4")
    given = table["tolerance"]
    tolerance = _built(lambda: check_tolerance(given), {"tolerance": "convergence.tolerance"})
    chosen = None
    if "observables" in table:
        names = table["observables"]
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise SpecError(
                "convergence.observables must be a non-empty list of labels of "
                "output.observables or operator names"
            )
        chosen = {
            name: observables[name]
            if name in observables
            else named_operator(name, dimension, f"convergence.observables[{i}]")
            for i, name in enumerate(names)
        }
    limits = {}
    for key in ("max_cost", "max_seconds"):
        if key in table:
            limit = table[key]
            limits[key] = _built(lambda: check.positive_number(limit, f"convergence.{key}"))
    return {"tolerance": tolerance, "observables": chosen, **limits}


def _bath_tables(value: Any) -> list[dict]:
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return list(value)
    raise SpecError("bath must be a table [bath] or a list of tables [[bath]]")


def _bath(table: dict, where: str, dimension: int) -> BathSpec:
    """One bath table: its keys read here, its values checked by building the
    spectral density and the :class:`~nonmarkov.Bath` (a tabulated one reads its file)."""
    table = _table(table, where, BATH_KEYS)
    kind = _choice(
        table.get("spectral_density", "power_law"), SPECTRAL_DENSITIES, where, "spectral_density"
    )
    allowed = SPECTRAL_DENSITY_KEYS[kind]
    for key in table:
        if key not in ("coupling", "spectral_density", "name", *allowed):
            raise SpecError(
                f"{where}.{key} is not a key of the {kind!r} spectral density"
                f"{did_you_mean(key, allowed)}; its keys are {list(allowed)}"
            )
    if "coupling" not in table:
        raise SpecError(f"{where}.coupling is missing: the operator S, e.g. {{ sigma_z = 0.5 }}")
    required = {
        "power_law": ("alpha", "cutoff"),
        "tabulated": ("file",),
    }.get(kind, allowed[:-1])  # (not temperature)
    for key in required:
        if key not in table:
            raise SpecError(
                f"{where}.{key} is missing: the {kind!r} spectral density needs {list(required)}"
            )
    coupling = _operator(table["coupling"], f"{where}.coupling", dimension)
    spec = BathSpec(
        coupling=coupling,
        alpha=table.get("alpha", 0.0),
        zeta=table.get("zeta", 1.0),
        cutoff=table.get("cutoff", 0.0),
        cutoff_type=table.get("cutoff_type", "exponential"),
        temperature=table.get("temperature", 0.0),
        name=_text(table.get("name", "bath"), f"{where}.name"),
        spectral_density=kind,
        reorganisation_energy=table.get("reorganisation_energy", 0.0),
        frequency=table.get("frequency", 0.0),
        damping=table.get("damping", 0.0),
        tail_width=table.get("tail_width"),
        scale=table.get("scale", 1.0),
    )
    if kind == "tabulated":
        name = _text(table["file"], f"{where}.file")
        spec.file = os.path.abspath(os.path.join(_SPEC_DIRECTORY.get(), name))
    keys = {key: f"{where}.{key}" for key in allowed}
    fallback = f"{where}.file" if kind == "tabulated" else where
    correlations = _built(lambda: spectral_density_of(spec), keys, fallback)
    spec.bath = _built(
        lambda: Bath(coupling, correlations, name=spec.name),
        {"coupling_operator": f"{where}.coupling"},
        where,
    )
    numbers = ("alpha", "zeta", "cutoff", "temperature", "reorganisation_energy", "frequency")
    for key in (*numbers, "damping", "scale"):
        setattr(spec, key, float(getattr(spec, key)))  # accepted by the library: numbers
    spec.cutoff_type = getattr(correlations, "cutoff_type", spec.cutoff_type)  # its normal form
    return spec


#: the fields of a BathSpec beyond the power law's
_OTHER_SPECTRAL_DENSITY_FIELDS = (
    "spectral_density",
    "reorganisation_energy",
    "frequency",
    "damping",
    "file",
    "tail_width",
    "scale",
)
#: the directory that a tabulated spectral density's ``file`` is relative to
_SPEC_DIRECTORY: contextvars.ContextVar[str] = contextvars.ContextVar("spec_directory", default="")


def spectral_density_of(bath: BathSpec) -> Any:
    """The library's spectral density object of ``bath``."""
    kind = bath.spectral_density
    if kind == "drude_lorentz":
        return DrudeLorentzSD(bath.reorganisation_energy, bath.cutoff, bath.temperature)
    if kind == "underdamped":
        return UnderdampedSD(
            bath.reorganisation_energy, bath.frequency, bath.damping, bath.temperature
        )
    if kind == "tabulated":
        return TabulatedSD.from_file(
            bath.file, bath.temperature, tail_width=bath.tail_width, scale=bath.scale
        )
    return PowerLawSD(bath.alpha, bath.zeta, bath.cutoff, bath.cutoff_type, bath.temperature)


def _choice(value: Any, choices: tuple[str, ...], table: str, key: str, hint: str = "") -> str:
    """``table.key``: one of ``choices`` by the library's choice rule
    (:func:`nonmarkov.validation.choice`), with a suggestion for a misspelt value."""
    where = f"{table}.{key}" if table else key
    try:
        return check.choice(value, choices, where)
    except (TypeError, ValueError) as error:
        raise SpecError(f"{error}{did_you_mean(value, choices)}{hint}") from error


def _method(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        value = {"name": value}
    table = _table(value, "method", METHOD_KEYS)
    name = _choice(
        table.get("name", "tempo"),
        METHODS,
        "",
        "method",
        " (mean-field TEMPO and PT-TEBD need Python: their systems are functions)",
    )
    if "construction" in table and name != "pt-tempo":
        raise SpecError(f"method.construction applies to method 'pt-tempo' only, not {name!r}")
    construction = _choice(
        table.get("construction", "sequential"), CONSTRUCTIONS, "method", "construction"
    )
    save = _boolean(table.get("save_process_tensor", False), "method.save_process_tensor")
    if save and name != "pt-tempo":
        raise SpecError("method.save_process_tensor applies to method 'pt-tempo' only")
    return {
        "name": name,
        "construction": construction,
        "unique": _boolean(table.get("unique", False), "method.unique"),
        "save_process_tensor": save,
    }


def _parameters(
    value: Any,
) -> tuple[dict[str, Any] | None, float | None, TempoParameters | None]:
    """``[parameters]``: (the keyword arguments of ``TempoParameters`` as given, the
    guess's tolerance, the ``TempoParameters``); (None, tolerance or None, None) for a
    guess."""
    if value == "guess":
        return None, None, None
    if isinstance(value, str):
        raise SpecError(
            f"parameters: {_short(value)} is not allowed; give 'guess' or a table "
            "{ dt = ..., epsrel = ..., tcut = ... }"
        )
    table = _table(value, "parameters", PARAMETER_KEYS)
    guess = _boolean(table.get("guess", False), "parameters.guess")
    if guess:
        others = sorted(set(table) - {"guess", "tolerance"})
        if others:
            raise SpecError(
                f"parameters: guess = true takes only tolerance; remove {others} "
                "or set guess = false"
            )
        tolerance = table.get("tolerance")
        if tolerance is not None:
            tolerance = _built(
                lambda: check_tolerance(tolerance), {"tolerance": "parameters.tolerance"}
            )
        return None, tolerance, None
    if "tolerance" in table:
        raise SpecError("parameters.tolerance applies to guess = true only")
    for key in ("dt", "epsrel"):
        if key not in table:
            raise SpecError(
                f"parameters.{key} is missing; give dt and epsrel (and tcut or dkmax), "
                "or guess = true"
            )
    given = {key: value for key, value in table.items() if key != "guess"}
    parameters = _built(
        lambda: TempoParameters(**given),
        {key: f"parameters.{key}" for key in PARAMETER_KEYS},
        "parameters",
    )
    return given, None, parameters


def _engine_options(table: dict) -> EngineOptions:
    """``[options]``: the library's options with these fields replaced (its checks)."""
    try:
        return default_options().replace(**table)
    except (TypeError, ValueError) as error:
        names = [f.name for f in dataclasses.fields(EngineOptions)]
        raise SpecError(f"[options]: {error} (the options are {names})") from error


def _dimension(system: dict, baths: list[dict], output: dict) -> int:
    """The system dimension: ``system.dimension``, else that of a matrix in the spec,
    else 2 (named Pauli operators)."""
    if "dimension" in system:
        d = _built(lambda: check.positive_integer(system["dimension"], "system.dimension"))
        # its operators and Liouvillians must fit, by the library's one cost rule
        _built(lambda: affordable_run(0, d, 0, "system.dimension", cause=f"system.dimension = {d}"))
        return d
    candidates = [system.get("hamiltonian"), system.get("initial_state")]
    candidates += [term.get("operator") for term in _as_list(system.get("lindblad"))]
    candidates += [bath.get("coupling") for bath in baths]
    observables = output.get("observables")
    if isinstance(observables, dict):
        candidates += list(observables.values())
    for candidate in candidates:
        if isinstance(candidate, list) and candidate and isinstance(candidate[0], list):
            return len(candidate)
    return 2


def _as_list(value: Any) -> list[dict]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


# --------------------------------------------------------------------------- operators


def named_operator(name: str, dimension: int, where: str = "operator") -> default_np.ndarray:
    """The operator ``name`` (one of :data:`PAULI_NAMES` for d = 2, or of
    :data:`LEVEL_NAMES`), or a product ``'a*b'`` of them, as a (d, d) matrix."""
    if "*" in name:
        result = default_np.identity(dimension, dtype=complex)
        for part in name.split("*"):
            result = result @ named_operator(part.strip(), dimension, where)
        return result
    if name in PAULI_NAMES:
        if dimension != 2:
            raise SpecError(
                f"{where}: {name!r} is an operator of two levels; the system has {dimension} "
                f"(use {[n for n in LEVEL_NAMES]} or a matrix)"
            )
        return operators.sigma(name.removeprefix("sigma_"))
    if name == "identity":
        return operators.identity(dimension)
    if name == "create":
        return operators.create(dimension)
    if name == "destroy":
        return operators.destroy(dimension)
    if name == "number":
        return default_np.diag(default_np.arange(dimension)).astype(complex)
    if name.startswith("proj_") and name[5:].isdigit() and int(name[5:]) < dimension:
        level = int(name[5:])
        return default_np.diag(default_np.arange(dimension) == level).astype(complex)
    allowed = list(PAULI_NAMES) + list(LEVEL_NAMES) if dimension == 2 else list(LEVEL_NAMES)
    raise SpecError(
        f"{where}: unknown operator {name!r}{did_you_mean(name, allowed)}; allowed names are "
        f"{allowed} "
        f"(k = 0..{dimension - 1}), products 'a*b' of them, or a matrix"
    )


def _operator(value: Any, where: str, dimension: int) -> default_np.ndarray:
    """An operator: a name, a table ``{ name = coefficient, ... }`` (their sum) or a
    matrix (rows of numbers or complex strings such as ``'0.5j'``)."""
    if isinstance(value, str):
        return named_operator(value, dimension, where)
    if isinstance(value, dict):
        if not value:
            raise SpecError(f"{where} is an empty table; give e.g. {{ sigma_z = 0.5 }}")
        total = default_np.zeros((dimension, dimension), dtype=complex)
        for name, coefficient in value.items():
            total = total + _complex(coefficient, f"{where}.{name}") * named_operator(
                name, dimension, where
            )
        return total
    if isinstance(value, list):
        return _matrix(value, where, dimension)
    raise SpecError(
        f"{where} must be an operator name, a table {{ name = coefficient }} or a matrix; "
        f"got {_short(value)}"
    )


def _matrix(rows: Any, where: str, dimension: int) -> default_np.ndarray:
    if not (isinstance(rows, list) and all(isinstance(row, list) for row in rows)):
        raise SpecError(f"{where} must be a matrix: a list of rows, e.g. [[1, 0], [0, -1]]")
    if len(rows) != dimension or any(len(row) != dimension for row in rows):
        shape = f"{len(rows)} rows of lengths {[len(row) for row in rows]}"
        raise SpecError(f"{where} must be a {dimension} x {dimension} matrix; got {shape}")
    return default_np.array(
        [
            [_complex(entry, f"{where}[{i}][{j}]") for j, entry in enumerate(row)]
            for i, row in enumerate(rows)
        ],
        dtype=complex,
    )


def _state(value: Any, where: str, dimension: int) -> default_np.ndarray:
    if isinstance(value, str):
        if value not in STATE_NAMES:
            raise SpecError(
                f"{where}: unknown state {value!r}{did_you_mean(value, STATE_NAMES)}; allowed "
                f"names are {list(STATE_NAMES)}, "
                "or a level number k (|k><k|), or a matrix"
            )
        if dimension != 2 and value != "mixed":
            raise SpecError(
                f"{where}: {value!r} is a state of two levels; the system has {dimension} "
                "(give a level number k or a matrix)"
            )
        if value == "mixed":
            return default_np.identity(dimension, dtype=complex) / dimension
        return operators.spin_dm(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < dimension:
            raise SpecError(f"{where}: level {value} is not one of 0..{dimension - 1}")
        return default_np.diag(default_np.arange(dimension) == value).astype(complex)
    matrix = _matrix(value, where, dimension)
    try:
        return check.density_matrix(matrix, where, dimension)
    except ValueError as error:
        raise SpecError(str(error)) from error


def _observables(value: Any, dimension: int) -> dict[str, default_np.ndarray]:
    """``output.observables``: a list of operator names (each its own label) or a table
    label -> operator; default sigma_x, sigma_y, sigma_z (two levels) or the populations."""
    if value is None:
        if dimension == 2:
            value = list(PAULI_NAMES[:3])
        else:
            value = [f"proj_{k}" for k in range(dimension)]
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        if not value or not all(isinstance(item, str) for item in value):
            raise SpecError(
                "output.observables must be a non-empty list of operator names, or a table "
                "label = operator"
            )
        return {
            name: named_operator(name, dimension, f"output.observables[{i}]")
            for i, name in enumerate(value)
        }
    if isinstance(value, dict):
        if not value:
            raise SpecError("output.observables is an empty table")
        return {
            str(label): _operator(item, f"output.observables.{label}", dimension)
            for label, item in value.items()
        }
    raise SpecError(f"output.observables must be a list of names or a table; got {_short(value)}")


# --------------------------------------------------------------------------- values


def _table(value: Any, where: str, allowed: tuple[str, ...] | None) -> dict:
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a table [{where}]; got {_short(value)}")
    if allowed is not None:
        _known_keys(value, allowed, where)
    return value


def _known_keys(table: dict, allowed: tuple[str, ...], where: str) -> None:
    unknown = [key for key in table if key not in allowed]
    if unknown:
        prefix = "" if where == "the top level" else f"{where}."
        raise SpecError(
            f"unknown key {prefix}{unknown[0]} (in {where}){did_you_mean(unknown[0], allowed)}; "
            f"allowed keys are {list(allowed)}"
        )


def did_you_mean(word: Any, choices: Any) -> str:
    """``" (did you mean 'x'?)"`` for the choice closest to a misspelt ``word``, or ``""``."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, [str(choice) for choice in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _complex(value: Any, where: str) -> complex:
    if isinstance(value, str):
        try:
            number = complex(value.replace(" ", ""))
        except ValueError as error:
            raise SpecError(
                f"{where} must be a number or a complex number as text, e.g. '0.5j'; got {value!r}"
            ) from error
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{where} must be a number; got {_short(value)}")
    else:
        number = complex(value)
    if not (math.isfinite(number.real) and math.isfinite(number.imag)):
        raise SpecError(f"{where} must be finite; got {number}")
    return number


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where} must be true or false; got {_short(value)}")
    return value


#: bytes a checked sweep point holds at the least (its tree, its arrays, its model)
SPEC_POINT_BYTES = 16 * 1024
#: the longest run name (it names the output files)
MAX_NAME_LENGTH = 200


def _is_file_name(name: str) -> bool:
    """Whether ``name`` is a plain file name: no separators, not ``.``/``..``, no NUL,
    printable, at most :data:`MAX_NAME_LENGTH` characters."""
    return (
        0 < len(name) <= MAX_NAME_LENGTH
        and name not in (".", "..")
        and not any(sep in name for sep in ("/", "\\", "\0", os.sep, os.altsep or "/"))
        and name.isprintable()
        and not name.startswith("-")
    )


def _file_name(value: Any, where: str) -> str:
    """``name``: text that is a plain file name (it names the output files in -o)."""
    name = _text(value, where)
    if not _is_file_name(name):
        raise SpecError(
            f"{where} must be a plain file name (1 to {MAX_NAME_LENGTH} printable characters, "
            f"no '/' or '\\', not '.' or '..', not starting with '-'): it names the output "
            f"files inside the output directory; got {_short(name)}"
        )
    return name


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{where} must be text; got {_short(value)}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
