"""The ``nonmarkov`` command line (docs/cli.md).

- ``nonmarkov run SPEC.toml``: run the simulation a spec describes, write its
  results (HDF5) and a plot (PNG), print where;
- ``nonmarkov plot RESULTS.h5 [MORE.h5 ...]``: a PNG of the observables of one or
  several results files (overlaid; ``--observable`` chooses);
- ``nonmarkov export RESULTS.h5 --csv``: the times and expectation values as text;
- ``nonmarkov inspect FILE``: what a process-tensor or results file holds;
- ``nonmarkov info``: the numerical backend, devices and precision;
- ``nonmarkov --version``.

Exit status: 0 on success, 2 for a bad spec, a missing or foreign file, or a
file that would be replaced (a message on stderr, no traceback), 1 if a run
fails.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import sys
import time
from typing import Any

from ._version import __version__

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nonmarkov", description="Non-Markovian open quantum systems with process tensors."
    )
    parser.add_argument("--version", action="version", version=f"nonmarkov {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log what the library does (level INFO)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the simulation a spec file (TOML) describes")
    run.add_argument("spec", help="the spec file, e.g. examples/spin_boson.toml")
    run.add_argument("--output", "-o", default="results", help="output directory (results/)")
    run.add_argument(
        "--progress",
        choices=["bar", "simple", "silent"],
        default=None,
        help="progress display (default: $NONMARKOV_PROGRESS or bar)",
    )
    run.add_argument("--overwrite", action="store_true", help="replace existing result files")
    run.add_argument(
        "--check", action="store_true", help="check the spec and list its runs; run nothing"
    )
    _backend_option(run)

    plot = sub.add_parser(
        "plot", help="plot the observables of one or several results files, overlaid (PNG)"
    )
    plot.add_argument(
        "results", nargs="+", help="results files written by nonmarkov run or Dynamics.export"
    )
    plot.add_argument(
        "--output",
        "-o",
        default=None,
        help="the PNG (default: next to the first file, FILE.png; several: FILE_overlay.png)",
    )
    _observable_option(plot)
    plot.add_argument("--overwrite", action="store_true", help="replace an existing PNG")

    export = sub.add_parser(
        "export", help="write the times and expectation values of a results file as CSV"
    )
    export.add_argument("results", help="a results file written by nonmarkov run or export")
    export.add_argument(
        "--csv",
        action="store_true",
        help="comma-separated values, one row per time (the default and, for now, only format)",
    )
    _observable_option(export)
    export.add_argument(
        "--complex",
        action="store_true",
        help="write the real and the imaginary part of each value (default: the real part)",
    )
    export.add_argument("--output", "-o", default=None, help="the file (default: stdout)")
    export.add_argument("--overwrite", action="store_true", help="replace an existing file")

    inspect = sub.add_parser("inspect", help="what a process-tensor or results file holds")
    inspect.add_argument("file", help="a process-tensor file or a results file")
    inspect.add_argument("--json", action="store_true", help="print the metadata as JSON")

    convert = sub.add_parser(
        "convert", help="write a process-tensor file (OQuPy 0.5's or ours) in nonmarkov's format"
    )
    convert.add_argument("source", help="the process-tensor file to read")
    convert.add_argument("target", help="the nonmarkov process-tensor file to write")
    convert.add_argument("--overwrite", action="store_true", help="replace an existing target")

    info = sub.add_parser("info", help="show the numerical backend, devices and precision")
    _backend_option(info, "describe this backend instead of the active one")
    return parser


def _observable_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--observable",
        action="append",
        metavar="NAME",
        help="an observable: one the file names (a spec's [output] observables) or an "
        "operator name (sigma_z, number, proj_1, sigma_+*sigma_-, ...); repeat for several "
        "(default: the file's observables, else sigma_x, sigma_y, sigma_z or the populations)",
    )


def _backend_option(parser: argparse.ArgumentParser, text: str | None = None) -> None:
    parser.add_argument(
        "--backend",
        choices=["numpy", "jax"],
        default=None,
        help=text or "numerical backend (default: $NONMARKOV_BACKEND or numpy)",
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``nonmarkov`` and ``python -m nonmarkov``."""
    args = _parser().parse_args(argv)
    logging.basicConfig(format="%(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("nonmarkov").setLevel(logging.INFO if args.verbose else logging.WARNING)
    from .io.spec import SpecError

    try:
        if args.command == "run":
            return _run(args, sys.argv if argv is None else ["nonmarkov", *argv])
        if args.command == "plot":
            return _plot(args)
        if args.command == "export":
            return _export(args)
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "convert":
            return _convert(args)
        return _info(args)
    except (SpecError, FileNotFoundError, FileExistsError) as error:
        message = getattr(error, "message", None)  # a spec's outputs that exist
        text = message("--overwrite") if callable(message) else str(error)
        print(f"nonmarkov {args.command}: error: {text}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as error:  # a file of another kind, a run the library refuses
        notes = "".join(f" {note}" for note in getattr(error, "__notes__", []))  # (sweep point)
        print(f"nonmarkov {args.command}: error: {error}{notes}", file=sys.stderr)
        return EXIT_USAGE if args.command in ("plot", "inspect", "convert") else 1
    except BrokenPipeError:  # the reader went away (`nonmarkov inspect FILE | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:  # a path that is a directory, not writable, ...
        where = f" {error.filename!r}" if error.filename else ""
        print(f"nonmarkov {args.command}: error:{where} {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:
        print(
            f"nonmarkov {args.command}: error: out of memory; the run is too large for this "
            "machine (fewer steps, a smaller system or a looser epsrel)",
            file=sys.stderr,
        )
        return 1


def _set_backend(name: str | None) -> None:
    if name is not None:
        from . import backends

        backends.set_backend(name)


def _run(args: argparse.Namespace, command: list[str]) -> int:
    from .io.spec import load_spec
    from .methods import spec_run

    started = time.perf_counter()
    spec = load_spec(args.spec)  # every key checked before anything runs
    prepared = spec_run.prepare_spec(spec, args.output, args.overwrite)
    if args.check:
        print(f"{spec.source}: {len(prepared)} run(s), method {spec.runs[0].method}")
        for item in prepared:
            point = spec_run.point_text(item.spec)
            print(f"  {item.results_file}" + (f"  ({point})" if point else ""))
        if spec.sweep_keys:
            print(f"  {spec_run.sweep_results_file(spec, args.output)}  (the sweep)")
        return 0
    _set_backend(args.backend)
    results = spec_run.run_spec(
        spec, args.output, progress_type=args.progress, overwrite=args.overwrite, command=command
    )
    for line in spec_run.summary(results):
        print(f"wrote {line}")
    if any(result.spec.plot for result in results):
        print(f"wrote {spec_run.plot_file(spec, args.output)}")
    for result in results:
        for filename in result.process_tensor_files:
            print(f"wrote {filename}")
    if spec.sweep_keys:
        print(f"wrote {spec_run.sweep_results_file(spec, args.output)}")
    print(spec_run.summary_total(results, time.perf_counter() - started))
    return 0


def _refuse_existing(target: str, overwrite: bool) -> None:
    if os.path.exists(target) and not overwrite:
        raise FileExistsError(f"{target} exists; pass --overwrite to replace it")


def _observables(dynamics: Any, names: list[str] | None, filename: str) -> dict[str, Any]:
    """The observables ``names`` of ``dynamics`` (label -> (d, d) matrix): the file's
    own (:meth:`~nonmarkov.Dynamics.default_observables`) by label, else named
    operators; all of the file's own without ``names``."""
    from .io.spec import SpecError, named_operator

    available = dynamics.default_observables()
    if not names:
        return available
    dimension = int(dynamics.shape[0]) if len(dynamics) else 2
    chosen = {}
    for name in names:
        if name in available:
            chosen[name] = available[name]
            continue
        try:
            chosen[name] = named_operator(name, dimension, f"--observable {name!r}")
        except SpecError as error:
            raise SpecError(
                f"{error}; the observables of {filename} are {list(available)}"
            ) from None
    return chosen


def _plot(args: argparse.Namespace) -> int:
    from .io.results import import_dynamics
    from .methods.spec_run import plot_results

    runs = [import_dynamics(filename) for filename in args.results]
    dimensions = {int(d.shape[0]) for d in runs if len(d)}
    if len(dimensions) > 1:
        raise ValueError(
            f"the files hold systems of different dimensions {sorted(dimensions)}; "
            "plot files of one system together"
        )
    observables = _observables(runs[0], args.observable, args.results[0])
    suffix = ".png" if len(runs) == 1 else "_overlay.png"  # not the plot of the first alone
    target = args.output or os.path.splitext(args.results[0])[0] + suffix
    _refuse_existing(target, args.overwrite)
    if len(runs) == 1:
        labels: list[str | None] = [None]
        title = runs[0].name
    else:
        names = [d.name for d in runs]
        unique = len(set(names)) == len(names)
        labels = [n if unique else os.path.basename(f) for n, f in zip(names, args.results)]
        title = ""
    plot_results(runs, labels, target, title=title, observables=observables)
    print(f"wrote {target}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from .io.atomic import atomic_path
    from .io.results import import_dynamics

    dynamics = import_dynamics(args.results)
    observables = _observables(dynamics, args.observable, args.results)
    times, values = dynamics.expectations_of(observables, real=False)
    header = ["t"]
    for name in observables:
        header += [f"Re <{name}>", f"Im <{name}>"] if args.complex else [f"<{name}>"]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    for k, time_k in enumerate([] if times is None else times):
        row = [repr(float(time_k))]
        for series in values.values():
            value = complex(series[k])
            row += [repr(value.real), repr(value.imag)] if args.complex else [repr(value.real)]
        writer.writerow(row)
    if args.output is None:
        sys.stdout.write(text.getvalue())
        return 0
    _refuse_existing(args.output, args.overwrite)
    with atomic_path(args.output) as temporary:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text.getvalue())
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _convert(args: argparse.Namespace) -> int:
    from .process_tensors.file import convert_process_tensor

    _refuse_existing(args.target, args.overwrite)
    print(f"wrote {convert_process_tensor(args.source, args.target, args.overwrite)}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    described = describe_file(args.file)
    if args.json:
        print(json.dumps(described, indent=2, default=str))
        return 0
    metadata = described.pop("metadata", {})
    for key, value in described.items():
        print(f"{key}: {value}")
    if metadata:
        print("metadata:")
        _print_tree(metadata, "  ")
    return 0


def _print_tree(tree: dict, indent: str) -> None:
    """Every entry of ``tree``, nested tables indented, text of several lines as a
    block, other values as JSON in full (nothing cut)."""
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            print(f"{indent}{key}:")
            _print_tree(value, indent + "  ")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            print(f"{indent}{key}:")
            _print_tree({f"[{i}]": item for i, item in enumerate(value)}, indent + "  ")
        elif isinstance(value, str) and "\n" in value.strip():
            print(f"{indent}{key}: |")
            for line in value.strip("\n").splitlines():
                print(f"{indent}  {line}".rstrip())
        else:
            print(f"{indent}{key}: {json.dumps(value, default=str)}")


def describe_file(filename: str) -> dict[str, Any]:
    """What ``filename`` holds: its kind and, for a results file, the times,
    steps, dimension and metadata; for a process-tensor file the dimension,
    steps, dt, bond dimensions and metadata. A ``ValueError`` for a file of
    another kind, ``FileNotFoundError`` for a missing one."""
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"{filename!r} does not exist")
    kind = _file_kind(filename)
    if kind == "dynamics":
        from .io.results import import_dynamics

        dynamics = import_dynamics(filename)
        times = dynamics.times
        described: dict[str, Any] = {
            "kind": "dynamics (results)",
            "name": dynamics.name,
            "states": len(dynamics),
            "dimension": int(dynamics.shape[0]) if len(dynamics) else None,
        }
        if len(dynamics):
            described["times"] = f"{times[0]:g} .. {times[-1]:g}"
            if len(dynamics) > 1:
                described["dt"] = float((times[-1] - times[0]) / (len(times) - 1))
        described["summary"] = repr(dynamics)
        ladder = dynamics.statistics.get("ladder")
        if ladder:
            from .methods.error_ladder import ladder_lines

            record = dynamics.metadata.get("convergence", {})
            described["convergence"] = (
                f"tolerance {record.get('tolerance')}, estimate {record.get('estimate')}, "
                f"parameters {record.get('parameters')}\n" + "\n".join(ladder_lines(ladder))
            )
        described["metadata"] = dynamics.metadata
        return described
    from .process_tensors.file import import_process_tensor

    pt: Any = import_process_tensor(filename)
    try:
        bonds = [int(b) for b in pt.get_bond_dimensions()]
        return {
            "kind": "process tensor",
            "name": pt.name,
            "dimension": pt.dimension,
            "steps": len(pt),
            "dt": pt.dt,
            "bond dimensions": _bond_text(bonds),
            "max bond dimension": max(bonds, default=1),
            "library version": getattr(pt, "library_version", None),
            "metadata": pt.metadata,
        }
    finally:
        if hasattr(pt, "close"):
            pt.close()


def _bond_text(bonds: list[int]) -> str:
    if len(bonds) <= 12:
        return str(bonds)
    return f"[{', '.join(map(str, bonds[:5]))}, ..., {', '.join(map(str, bonds[-5:]))}]"


def _file_kind(filename: str) -> str:
    """``'dynamics'`` or ``'process_tensor'`` from the file's format mark."""
    from .io.results import DYNAMICS_FORMAT

    extension = os.path.splitext(filename)[1].lower()
    if extension == ".npz":
        return "dynamics"
    if extension not in (".h5", ".hdf5"):
        raise ValueError(f"{filename}: unknown file type {extension!r}; use .h5, .hdf5 or .npz")
    import h5py

    try:
        with h5py.File(filename, "r") as handle:
            mark = str(handle.attrs.get("format", ""))
    except OSError as error:
        raise ValueError(f"{filename} is not an HDF5 file ({error})") from error
    if mark == DYNAMICS_FORMAT:
        return "dynamics"
    return "process_tensor"


def _info(args: argparse.Namespace) -> int:
    from . import backends

    if args.backend is not None:
        backends.set_backend(args.backend)
    print(f"nonmarkov {__version__}")
    print(backends.format_info())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
