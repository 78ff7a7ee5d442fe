"""The package's layering, checked on its source: the "may import" table of
docs/ARCHITECTURE.md holds, there are no import cycles, no module imports another's
private name, and the algorithms (``nonmarkov.methods``) never import JAX nor
branch on the backend."""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterator

import nonmarkov

PACKAGE = pathlib.Path(nonmarkov.__file__).parent
ARCHITECTURE = PACKAGE.parents[1] / "docs" / "ARCHITECTURE.md"

#: private names imported across modules that are still to be promoted (inside the
#: JAX engine, which is being reworked); the list may only shrink
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def _module_name(path: pathlib.Path) -> str:
    parts = ("nonmarkov",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _statements(path: pathlib.Path) -> Iterator[tuple[str, list[str] | None]]:
    """(module, names) of every import in ``path``, also inside functions, relative
    imports resolved: ``import a.b`` gives ``('a.b', None)``, ``from a import x, y``
    ``('a', ['x', 'y'])``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            yield base, [alias.name for alias in node.names]


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """Modules of the package that ``path`` imports anywhere (also inside functions)."""
    found: set[str] = set()
    for base, names in _statements(path):
        found.add(base)
        found.update(f"{base}.{name}" for name in names or [])
    return {module for module in found if module in modules and module != _module_name(path)}


def _direct_imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The modules of the package that ``path`` imports (also inside functions): for
    ``from package import name`` the submodule ``package.name`` where there is one,
    else ``package`` itself."""
    found: set[str] = set()
    for base, names in _statements(path):
        if names is None:
            found.add(base)
        for name in names or []:
            found.add(f"{base}.{name}" if f"{base}.{name}" in modules else base)
    return {module for module in found if module in modules and module != _module_name(path)}


def _private_imports(path: pathlib.Path, modules: set[str]) -> set[tuple[str, str]]:
    """(importer, module.name) for every ``from module import _name`` of another module
    of the package."""
    importer = _module_name(path)
    found = set()
    for base, names in _statements(path):
        if base not in modules or base == importer:
            continue
        for name in names or []:
            private = name.startswith("_") and not name.startswith("__")
            if private and f"{base}.{name}" not in modules:
                found.add((importer, f"{base}.{name}"))
    return found


def _layer_table() -> list[tuple[list[str], set[str] | None]]:
    """The rows of docs/ARCHITECTURE.md's table under "The layers": (the folders and
    modules of the row, e.g. ``['io/spec.py']`` or ``['model/']``; what they may
    import as dotted names relative to the package, None for everything)."""
    text = ARCHITECTURE.read_text()
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        units = re.findall(r"`([^`]+)`", cells[0])
        if cells[2].startswith("everything"):
            rows.append((units, None))
            continue
        allowed = {
            token.removesuffix("/").removesuffix(".py").replace("/", ".")
            for token in re.findall(r"`([^`]+)`", cells[2])
        }
        rows.append((units, allowed))
    return rows


def _row_of(module: str, rows: list[tuple[list[str], set[str] | None]]) -> int | None:
    """The row of ``module`` (dotted, without ``nonmarkov.``): the row that names its
    file, else the row of its nearest folder."""
    path = module.replace(".", "/")
    candidates = [f"{path}.py", f"{path}/__init__.py"]
    parts = module.split(".")
    candidates += ["/".join(parts[:n]) + "/" for n in range(len(parts), 0, -1)]
    if module == "":
        candidates = ["__init__.py"]
    for candidate in candidates:
        for index, (units, _) in enumerate(rows):
            if candidate in units:
                return index
    return None


def _graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(path) for path in paths}
    return {_module_name(path): _imports(path, modules) for path in paths}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            # a package's __init__ importing its own submodules is not a cycle of code
            if node.startswith(target + "."):
                continue
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_import_graph_has_no_cycle():
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_the_architecture_table_is_read():
    rows = _layer_table()
    assert len(rows) > 10
    by_unit = {unit: allowed for units, allowed in rows for unit in units}
    assert by_unit["validation.py"] == set()
    assert by_unit["cli.py"] is None
    assert {"backends", "_threads"} == by_unit["kernels/"]
    assert "methods.pt_construction" in by_unit["io/spec.py"]


def test_every_module_imports_only_what_its_layer_may():
    """docs/ARCHITECTURE.md's "may import" column, module by module."""
    rows = _layer_table()
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(path) for path in paths}
    problems = []
    for path in paths:
        name = _module_name(path).removeprefix("nonmarkov").removeprefix(".")
        index = _row_of(name, rows)
        if index is None:
            problems.append(f"{name or '__init__'}: in no row of the table")
            continue
        units, allowed = rows[index]
        if allowed is None:
            continue
        own = {unit.removesuffix("/").removesuffix(".py").replace("/", ".") for unit in units}
        for target in sorted(_direct_imports(path, modules)):
            relative = target.removeprefix("nonmarkov.")
            if _row_of(relative, rows) == index:
                continue
            if not any(
                relative == entry or relative.startswith(entry + ".") for entry in allowed | own
            ):
                problems.append(f"{name} imports {relative} (row {units[0]}: {sorted(allowed)})")
    assert not problems, "\n".join(problems)


def test_the_layer_check_finds_a_forbidden_import():
    """A kernel that imported the model would be reported (the check is not vacuous)."""
    rows = _layer_table()
    kernels = _row_of("kernels.window", rows)
    model = _row_of("model.system", rows)
    assert kernels is not None and model is not None and kernels != model
    allowed = rows[kernels][1]
    assert allowed is not None and not any(entry.startswith("model") for entry in allowed)


def test_no_module_imports_another_modules_private_name():
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(path) for path in paths}
    found = set().union(*(_private_imports(path, modules) for path in paths))
    assert found <= KNOWN_PRIVATE_IMPORTS, sorted(found - KNOWN_PRIVATE_IMPORTS)


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_algorithms_neither_import_jax_nor_branch_on_the_backend():
    for path in sorted((PACKAGE / "methods").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "jax" for a in node.names), path.name
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] != "jax", path.name
                assert "engines.jax" not in (node.module or ""), path.name
            if isinstance(node, ast.Attribute):
                assert node.attr != "backend_name", f"{path.name} branches on the backend"


def test_public_names_are_listed_in_all():
    assert sorted(set(nonmarkov.__all__)) == sorted(nonmarkov.__all__)
    for name in nonmarkov.__all__:
        assert hasattr(nonmarkov, name), name


def test_oqupy_module_paths_are_attributes_of_the_package():
    """``import nonmarkov as oqupy`` scripts use ``oqupy.tempo.Tempo`` and the like
    without importing the submodule."""
    paths = {
        "operators": [
            "SIGMA",
            "SPIN_DM",
            "sigma",
            "spin_dm",
            "left_super",
            "cross_commutator",
            "cross_acommutator",
            "cross_left_right_super",
        ],
        "system": ["BaseSystem", "System", "TimeDependentSystem"],
        "bath": ["Bath"],
        "correlations": ["BaseCorrelations", "PowerLawSD", "CustomSD", "CustomCorrelations"],
        "bath_correlations": ["BaseCorrelations", "PowerLawSD", "CustomSD", "CustomCorrelations"],
        "control": ["Control"],
        "tempo": [
            "Tempo",
            "TempoParameters",
            "guess_tempo_parameters",
            "tempo_compute",
            "GUESS_WARNING_MSG",
        ],
        "pt_tempo": ["PtTempo", "pt_tempo_compute", "TempoParameters", "guess_tempo_parameters"],
        "process_tensor": [
            "BaseProcessTensor",
            "TrivialProcessTensor",
            "SimpleProcessTensor",
            "FileProcessTensor",
            "import_process_tensor",
        ],
        "dynamics": ["BaseDynamics", "Dynamics", "compute_dynamics"],
        "base_api": ["BaseAPIClass"],
        "util": ["BaseProgress", "ProgressBar", "ProgressSimple", "ProgressSilent", "get_progress"],
        "system_dynamics": [
            "compute_dynamics",
            "compute_correlations",
            "compute_correlations_nt",
            "Indices",
        ],
        "helpers": ["plot_correlations_with_parameters"],
        "version": ["__version__"],
    }
    for module, names in paths.items():
        submodule = getattr(nonmarkov, module)
        assert module in nonmarkov.__all__, module
        for name in names:
            assert hasattr(submodule, name), f"nonmarkov.{module}.{name}"
            if hasattr(nonmarkov, name):  # the same object as the top-level name
                assert getattr(submodule, name) is getattr(nonmarkov, name)
    # the two module paths of the correlations hold the same classes
    for name in paths["correlations"]:
        assert getattr(nonmarkov.bath_correlations, name) is getattr(nonmarkov.correlations, name)


def test_oqupy_module_paths_only_re_export():
    """The module paths scripts import hold no code of their own: imports, a
    docstring and (``system_dynamics.Indices``) a type alias."""
    for module in (
        "operators",
        "system",
        "bath",
        "correlations",
        "bath_correlations",
        "control",
        "tempo",
        "pt_tempo",
        "process_tensor",
        "dynamics",
        "base_api",
        "util",
        "system_dynamics",
        "version",
    ):
        tree = ast.parse((PACKAGE / f"{module}.py").read_text())
        for node in tree.body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                continue
            is_alias = (
                isinstance(node, ast.Assign)
                and module == "system_dynamics"
                and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["Indices"]
            )
            assert is_alias, f"nonmarkov/{module}.py line {node.lineno} is not a re-export"
