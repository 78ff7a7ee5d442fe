"""Old commit against new: one benchmark script from two trees, side by side in one run.

    python benchmarks/compare_commits.py --base COMMIT [--new-tree PATH] [--rounds 3]
        [--json out.json] [--tolerance 0.10] [--timeout S] [--quiet] -- SCRIPT ARGS...

``SCRIPT`` is a benchmark script's path relative to ``benchmarks/`` with its
arguments, for example ``bench_jax.py --problems B1 B2 --no-warm`` or
``bench_pt_steps.py --problem B3 --at 4 --steps 2``.

The runner checks ``COMMIT`` out into a temporary ``git worktree`` (a detached
checkout under the temporary directory, removed at the end; the repository's
own working tree, index and branches are not touched), then, for each round,
runs the base tree's own copy of ``SCRIPT`` with ``PYTHONPATH=<base>/src`` and
the new tree's copy (``--new-tree``, default: the working tree holding this
runner) with ``PYTHONPATH=<new>/src``, one after the other, never at the same
time, each in its tree's root directory, with the same interpreter
(``sys.executable``) and ``--json <temporary file>`` added. The order
alternates between rounds (base-new, new-base, base-new, ...), so that a drift
of the load on a shared machine falls on both sides alike. Both runs get the
same environment but for ``PYTHONPATH``; ``NONMARKOV_JAX_CACHE_DIR`` and
``JAX_COMPILATION_CACHE_DIR`` are removed from it, so that no run finds kernels
compiled by the other tree. Before the first round each tree's ``src`` and
``benchmarks`` are byte-compiled (``compileall``, so that the first run of a
fresh checkout does not pay for it) and checked to import ``nonmarkov`` from
its own ``src``.

From each run's JSON records it takes the timings and the checks of the
results (for other scripts: every number whose key ends in ``_s``):

- ``bench_jax.py``: per problem and run (numpy, jax cold, jax warm) the total
  seconds ``tempo_s`` (for PT problems PT-TEMPO plus dynamics; also ``pt_s``
  and ``dynamics_s``) and, for JAX, the compilation seconds (``compile_s`` +
  ``compile_ahead_s``: waited + in the background); checks: the bond dimension,
  steps and host steps, max |rho_numpy - rho_jax| within a tree
  (``max_deviation`` for the cold run; for the warm run from the states) and
  max |rho_new - rho_base| over all time points between the two trees' runs of
  the same round (``states_re``/``states_im``). With the host start the warm
  run may differ from NumPy by 1e-5 to 2e-4 on B1 (fewer host steps; the compiled
  kernel cuts differently while the bond rises), so compare it with the base's.
- ``bench_pt_steps.py``: per run (numpy, every ``--jax-runs`` label) the mean
  seconds per timed step (``step_s``), for JAX also without compilation
  (``step_s - step_compile_s``) and the time to reach the checkpoint
  (``to_checkpoint_s``); checks: the largest kept rank of the timed steps,
  ``same_ranks`` and ``state_difference`` (JAX against NumPy within a tree),
  whether the kept ranks are the same in both trees, and |chain state new -
  base| (``state_re``/``state_im``).

The timing table gives per (problem, run, metric) the median over the rounds
of each side, new/base of the medians, the median and the range of the
per-round ratios new/base (the paired figure: both runs of a round saw about
the same load) and the number of rounds with a value on each side; "verdict"
compares the median per-round ratio with 1 +- ``--tolerance``. A value missing
on one side (a run failed, a record or field is absent) is shown as
"missing". ``--json`` writes all raw records, the commands and the tables
(after every round, so that an interrupted run keeps what it has). The exit
status is 1 when a run failed or wrote no records, else 0 (the verdicts do not
change it: judge them against the noise, the ratio range).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SIDES = ("base", "new")
#: removed from the environment of every run (no kernels shared between the trees)
DROPPED_ENV = ("NONMARKOV_JAX_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR")


# --- trees -------------------------------------------------------------------------------


def _git(tree: str, *args: str) -> str:
    """Output of a read-only git command in ``tree`` (no optional index writes)."""
    result = subprocess.run(
        ["git", "-C", tree, *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    )
    return result.stdout.strip()


def add_worktree(commit: str) -> tuple[str, str]:
    """(full hash, path) of a new detached worktree of ``commit`` in a temporary folder."""
    try:
        full = _git(REPO, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    except subprocess.CalledProcessError:
        sys.exit(f"error: {commit!r} is not a commit of {REPO}")
    parent = tempfile.mkdtemp(prefix=f"compare_commits_{full[:9]}_")
    path = os.path.join(parent, "tree")
    result = subprocess.run(
        ["git", "-C", REPO, "worktree", "add", "--detach", "--quiet", path, full],
        capture_output=True,
        text=True,
    )
    if result.returncode:
        shutil.rmtree(parent, ignore_errors=True)
        sys.exit(f"error: git worktree add {path} {full[:9]}: {result.stderr.strip()}")
    return full, path


def remove_worktree(path: str) -> None:
    result = subprocess.run(
        ["git", "-C", REPO, "worktree", "remove", "--force", path], capture_output=True, text=True
    )
    if result.returncode:
        print(f"warning: git worktree remove {path}: {result.stderr.strip()}", file=sys.stderr)
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def tree_info(path: str) -> dict:
    """Path, HEAD and number of changed tracked files of a tree (what git can tell)."""
    info: dict = {"path": path}
    try:
        info["head"] = _git(path, "rev-parse", "HEAD")
        changed = _git(path, "status", "--porcelain", "--untracked-files=no")
        info["changed_files"] = len(changed.splitlines())
    except (OSError, subprocess.CalledProcessError):
        info["head"] = None
    return info


def describe(info: dict) -> str:
    if not info.get("head"):
        return info["path"]
    changes = info.get("changed_files", 0)
    return f"{info['path']} (HEAD {info['head'][:9]}" + (
        f" + {changes} changed files)" if changes else ", clean)"
    )


def run_environment(tree: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in DROPPED_ENV}
    env["PYTHONPATH"] = os.path.join(tree, "src")
    return env


def check_import(tree: str, env: dict) -> str | None:
    """Byte-compile the tree's ``src`` and ``benchmarks`` (so that no timed run pays for
    it), then where ``nonmarkov`` comes from with ``env``: exits if from outside
    ``<tree>/src``, None (and a warning) if it does not import."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            os.path.join(tree, "src"),
            os.path.join(tree, "benchmarks"),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
    )  # a file that does not compile shows up below
    code = "import nonmarkov; print(nonmarkov.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True
    )
    if result.returncode:
        last = (result.stderr.strip().splitlines() or ["?"])[-1]
        print(f"warning: nonmarkov does not import in {tree}: {last}", file=sys.stderr)
        return None
    location = os.path.realpath(result.stdout.strip().splitlines()[-1])
    src = os.path.realpath(os.path.join(tree, "src")) + os.sep
    if not location.startswith(src):
        sys.exit(
            f"error: with PYTHONPATH={env['PYTHONPATH']} nonmarkov comes from {location}, "
            f"not from {src}: the comparison would not measure that tree"
        )
    return location


# --- one run -----------------------------------------------------------------------------


def run_script(
    tree: str,
    script: str,
    script_args: list[str],
    env: dict,
    timeout: float | None,
    quiet: bool,
    tag: str,
) -> dict:
    """Run ``<tree>/benchmarks/<script> ARGS --json FILE``; the run's entry with its records."""
    path = os.path.join(tree, "benchmarks", script)
    entry: dict = {
        "tree": tree,
        "command": None,
        "returncode": None,
        "wall_s": None,
        "records": None,
    }
    if not os.path.isfile(path):
        entry["error"] = f"{path} does not exist"
        print(f"[{tag}] {entry['error']}", flush=True)
        return entry
    with tempfile.TemporaryDirectory(prefix="compare_commits_run_") as directory:
        output_path = os.path.join(directory, "records.json")
        command = [sys.executable, path, *script_args, "--json", output_path]
        entry["command"] = (
            f"cd {shlex.quote(tree)} && PYTHONPATH="
            f"{shlex.quote(env['PYTHONPATH'])} {shlex.join(command)}"
        )
        print(f"[{tag}] {entry['command']}", flush=True)
        pipe = subprocess.PIPE if quiet else None
        start = time.perf_counter()
        process = subprocess.Popen(
            command,
            cwd=tree,
            env=env,
            start_new_session=True,
            stdout=pipe,
            stderr=subprocess.STDOUT if quiet else None,
            text=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            output, _ = process.communicate()
            entry["error"] = f"timed out after {timeout:g} s"
        except BaseException:  # e.g. Ctrl-C: the script's workers must stop too
            _kill_group(process)
            process.wait()
            raise
        entry["wall_s"] = time.perf_counter() - start
        entry["returncode"] = process.returncode
        errors = (
            [entry.pop("error")]
            if "error" in entry
            else [f"exit status {process.returncode}"]
            if process.returncode
            else []
        )
        try:
            with open(output_path) as handle:
                entry["records"] = json.load(handle)
        except FileNotFoundError:
            errors.append("no JSON records")
        except (OSError, ValueError) as error:
            errors.append(f"unreadable JSON records ({type(error).__name__}: {error})")
        if errors:
            entry["error"] = "; ".join(errors)
    print(f"[{tag}] {_status(entry)}", flush=True)
    if quiet and "error" in entry and output:
        print("\n".join("    " + line for line in output.splitlines()[-25:]), flush=True)
    return entry


def _status(entry: dict) -> str:
    wall = f"{entry['wall_s']:.1f} s, " if entry.get("wall_s") is not None else ""
    return wall + entry.get("error", "exit 0")


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --- what is compared --------------------------------------------------------------------


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _flatten(value: object) -> list:
    if isinstance(value, list):
        return [item for part in value for item in _flatten(part)]
    return [value]


def _complex_values(record: dict | None, real: str, imaginary: str) -> list[complex] | None:
    if not isinstance(record, dict) or real not in record or imaginary not in record:
        return None
    re_part, im_part = _flatten(record[real]), _flatten(record[imaginary])
    if len(re_part) != len(im_part):
        return None
    return [complex(x, y) for x, y in zip(re_part, im_part)]


def difference(
    base: dict | None, new: dict | None, real: str, imaginary: str, norm: bool = False
) -> float | str | None:
    """max |new - base| (or the 2-norm) of two records' complex arrays; "size differs"
    when they do not match; None when one is absent."""
    a, b = _complex_values(base, real, imaginary), _complex_values(new, real, imaginary)
    if a is None or b is None:
        return None
    if len(a) != len(b):
        return "size differs"
    if not a:
        return 0.0
    if norm:
        return math.sqrt(sum(abs(x - y) ** 2 for x, y in zip(a, b)))
    return max(abs(x - y) for x, y in zip(a, b))


def _mean(values: object) -> float | None:
    if isinstance(values, list) and values and all(_number(v) for v in values):
        return sum(values) / len(values)
    return None


JAX_RUNS = {"numpy": "numpy", "jax_cold": "jax cold", "jax_warm": "jax warm"}
JAX_TIMES = (("tempo_s", "total s"), ("pt_s", "PT-TEMPO s"), ("dynamics_s", "dynamics s"))


def bench_jax_metrics(records: object) -> tuple[dict, dict]:
    """Timings and per-tree checks of one ``bench_jax.py`` run:
    {(problem, run, metric): value} each."""
    times: dict = {}
    checks: dict = {}
    for problem, runs in records.items() if isinstance(records, dict) else ():
        if not isinstance(runs, dict):
            continue
        for key, run in JAX_RUNS.items():
            record = runs.get(key)
            if not isinstance(record, dict):
                continue
            for field, metric in JAX_TIMES:
                if _number(record.get(field)):
                    times[(problem, run, metric)] = record[field]
            if key != "numpy" and _number(record.get("compile_s")):
                times[(problem, run, "compile s (waited+ahead)")] = record[
                    "compile_s"
                ] + record.get("compile_ahead_s", 0.0)
            for field, name in (
                ("max_bond_dimension", "bond"),
                ("steps", "steps"),
                ("host_steps", "host steps"),
            ):
                if field in record and (key != "numpy" or field != "host_steps"):
                    checks[(problem, run, name)] = record[field]
        if _number(runs.get("max_deviation")):
            checks[(problem, "jax cold", "max|drho| vs NumPy")] = runs["max_deviation"]
        # not in the records for the warm run: from the states
        deviation = difference(runs.get("numpy"), runs.get("jax_warm"), "states_re", "states_im")
        if _number(deviation):
            checks[(problem, "jax warm", "max|drho| vs NumPy")] = deviation
    return times, checks


def bench_jax_between(base: object, new: object) -> dict:
    """max |rho_new - rho_base| of the same problem and run in the two trees."""

    def record(records: object, problem: str, key: str) -> dict | None:
        runs = records.get(problem) if isinstance(records, dict) else None
        return runs.get(key) if isinstance(runs, dict) else None

    result: dict = {}
    for problem in new if isinstance(new, dict) else ():
        for key, run in JAX_RUNS.items():
            value = difference(
                record(base, problem, key), record(new, problem, key), "states_re", "states_im"
            )
            if value is not None:
                result[(problem, run, "max|rho new - rho base|")] = value
    return result


def _pt_runs(records: object) -> tuple[str, dict]:
    if not isinstance(records, dict):
        return "?", {}
    problem = f"{records.get('problem', '?')} at {records.get('at', '?')}"
    runs = {"numpy": records.get("numpy")}
    jax_runs = records.get("jax")
    for label, record in jax_runs.items() if isinstance(jax_runs, dict) else ():
        runs[f"jax {label}"] = record
    return problem, {run: record for run, record in runs.items() if isinstance(record, dict)}


def pt_steps_metrics(records: object) -> tuple[dict, dict]:
    """Timings and per-tree checks of one ``bench_pt_steps.py`` run."""
    times: dict = {}
    checks: dict = {}
    problem, runs = _pt_runs(records)
    for run, record in runs.items():
        step_s = _mean(record.get("step_s"))
        if step_s is not None:
            times[(problem, run, "s/step")] = step_s
        compile_s = _mean(record.get("step_compile_s"))
        if step_s is not None and compile_s is not None:
            times[(problem, run, "s/step without compile")] = step_s - compile_s
        if _number(record.get("to_checkpoint_s")):
            times[(problem, run, "to checkpoint s")] = record["to_checkpoint_s"]
        ranks = [r for r in _flatten(record.get("ranks", [])) if _number(r)]
        if ranks:
            checks[(problem, run, "largest kept rank")] = max(ranks)
        if "same_ranks" in record:
            checks[(problem, run, "kept ranks = NumPy's")] = record["same_ranks"]
        if _number(record.get("state_difference")):
            checks[(problem, run, "|state - NumPy's|")] = record["state_difference"]
    return times, checks


def pt_steps_between(base: object, new: object) -> dict:
    """Between the trees: the same kept ranks? |chain state new - base|."""
    result: dict = {}
    _, base_runs = _pt_runs(base)
    problem, new_runs = _pt_runs(new)
    for run, record in new_runs.items():
        other = base_runs.get(run)
        if other is None:
            continue
        if "ranks" in record and "ranks" in other:
            result[(problem, run, "kept ranks new = base")] = record["ranks"] == other["ranks"]
        value = difference(other, record, "state_re", "state_im", norm=True)
        if value is not None:
            result[(problem, run, "|state new - state base|")] = value
    return result


def generic_metrics(records: object) -> tuple[dict, dict]:
    """Any script: every number (or mean of a list of numbers) whose key ends in ``_s``."""
    times: dict = {}

    def walk(value: object, path: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, path + (str(key),))
        elif path and path[-1].endswith("_s"):
            number = value if _number(value) else _mean(value)
            if number is not None:
                times[
                    ("/".join(path[:-2]) or "-", path[-2] if len(path) > 1 else "-", path[-1])
                ] = number

    walk(records, ())
    return times, {}


EXTRACTORS = {
    "bench_jax.py": (bench_jax_metrics, bench_jax_between),
    "bench_pt_steps.py": (pt_steps_metrics, pt_steps_between),
}


# --- tables ------------------------------------------------------------------------------


def _seconds(value: float) -> str:
    if value >= 100:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 1 else f"{value:#.3g}"


def _check_text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.1e}"
    return str(value)


def _ordered_keys(*mappings: dict) -> list:
    keys: dict = {}
    for mapping in mappings:
        keys.update(dict.fromkeys(mapping))
    return list(keys)


def timing_rows(rounds: list[dict], tolerance: float) -> list[dict]:
    """One row per (problem, run, metric) over the rounds (see the module docstring)."""
    keys = _ordered_keys(*(r["times"][side] for r in rounds for side in ("new", "base")))
    rows = []
    for key in keys:
        values = {side: [r["times"][side].get(key) for r in rounds] for side in SIDES}
        present = {side: [v for v in values[side] if v is not None] for side in SIDES}
        medians = {
            side: statistics.median(present[side]) if present[side] else None for side in SIDES
        }
        ratios = [
            new / base
            for base, new in zip(values["base"], values["new"])
            if base is not None and new is not None and base > 0
        ]
        ratio = (
            medians["new"] / medians["base"]
            if medians["base"] and medians["new"] is not None
            else None
        )
        paired = statistics.median(ratios) if ratios else None
        verdict = (
            "-"
            if paired is None
            else "SLOWER"
            if paired > 1 + tolerance
            else "faster"
            if paired < 1 - tolerance
            else "ok"
        )
        rows.append(
            {
                "problem": key[0],
                "run": key[1],
                "metric": key[2],
                "base": values["base"],
                "new": values["new"],
                "base_median": medians["base"],
                "new_median": medians["new"],
                "ratio_of_medians": ratio,
                "round_ratios": ratios,
                "median_round_ratio": paired,
                "verdict": verdict,
            }
        )
    return rows


def check_rows(rounds: list[dict]) -> list[dict]:
    """Per-tree checks (worst over the rounds: the largest float, every distinct value)
    and the checks between the trees (column "new", base "-")."""
    rows = []
    for source in ("checks", "between"):
        keys = (
            _ordered_keys(*(r[source][side] for r in rounds for side in SIDES))
            if source == "checks"
            else _ordered_keys(*(r["between"] for r in rounds))
        )
        for key in keys:
            if source == "checks":
                values = {side: [r["checks"][side].get(key) for r in rounds] for side in SIDES}
            else:
                values = {"base": [], "new": [r["between"].get(key) for r in rounds]}
            rows.append(
                {
                    "problem": key[0],
                    "run": key[1],
                    "check": key[2],
                    "base": values["base"],
                    "new": values["new"],
                    "base_summary": _summary(values["base"]) if source == "checks" else "-",
                    "new_summary": _summary(values["new"]),
                }
            )
    return rows


def _summary(values: list) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "missing"
    if all(isinstance(v, float) for v in present):
        return _check_text(max(present))
    distinct = list(dict.fromkeys(_check_text(v) for v in present))
    return "/".join(distinct) + ("" if len(present) == len(values) else " (some missing)")


def render(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table with aligned columns ("|" in a cell escaped)."""
    header = [cell.replace("|", "\\|") for cell in header]
    rows = [[cell.replace("|", "\\|") for cell in cells] for cells in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
        for cells in [header, ["-" * w for w in widths], *rows]
    ]
    return "\n".join(lines)


def timing_table(rows: list[dict], rounds: int) -> str:
    if not rows:
        return "(none: no run wrote timings)"
    cells = []
    for row in rows:
        counts = [sum(v is not None for v in row[side]) for side in SIDES]
        spread = row["round_ratios"]
        cells.append(
            [
                row["problem"],
                row["run"],
                row["metric"],
                _seconds(row["base_median"]) if row["base_median"] is not None else "missing",
                _seconds(row["new_median"]) if row["new_median"] is not None else "missing",
                f"{row['ratio_of_medians']:.3f}" if row["ratio_of_medians"] is not None else "-",
                f"{row['median_round_ratio']:.3f}"
                if row["median_round_ratio"] is not None
                else "-",
                f"{min(spread):.3f}-{max(spread):.3f}" if spread else "-",
                f"{counts[0]}/{counts[1]} of {rounds}",
                row["verdict"],
            ]
        )
    return render(
        [
            "problem",
            "run",
            "metric",
            "base median",
            "new median",
            "new/base",
            "median ratio",
            "ratio range",
            "rounds base/new",
            "verdict",
        ],
        cells,
    )


def check_table(rows: list[dict]) -> str:
    return render(
        ["problem", "run", "check", "base", "new"],
        [[r["problem"], r["run"], r["check"], r["base_summary"], r["new_summary"]] for r in rows],
    )


# --- main --------------------------------------------------------------------------------


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """The runner's own arguments and ``SCRIPT ARGS...`` (after the first ``--``)."""
    if "--" not in argv:
        return argv, []
    index = argv.index("--")
    return argv[:index], argv[index + 1 :]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        usage="%(prog)s --base COMMIT [options] -- SCRIPT [ARGS...]",
        epilog="SCRIPT: a benchmark script relative to benchmarks/ (e.g. 'bench_jax.py "
        "--problems B1 B2 --no-warm'); the runner adds '--json FILE' to its arguments. "
        "See the module docstring (or benchmarks/README.md) for what is compared.",
    )
    parser.add_argument(
        "--base", required=True, help="the old commit (any name git knows in this repository)"
    )
    parser.add_argument(
        "--new-tree",
        default=REPO,
        help="the tree to compare against it (default: %(default)s, with its uncommitted changes)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds, each one run per tree, order alternating (default 3)",
    )
    parser.add_argument(
        "--json", default=None, help="write all raw records, the commands and the tables here"
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="verdict 'SLOWER'/'faster' when the median per-round ratio "
        "new/base is beyond 1 +- this (default 0.10)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds after which one run is stopped and counted as missing",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="capture the scripts' output (shown only when a run fails)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    # a plain kill should stop the scripts and remove the worktree too (see below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    parser = build_parser()
    own, script_part = split_argv(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(own)
    if not script_part:
        parser.error("give the benchmark script and its arguments after '--'")
    script, script_args = script_part[0], script_part[1:]
    script = script.removeprefix("benchmarks/")
    if any(item == "--json" or item.startswith("--json=") for item in script_args):
        parser.error("do not pass --json to the script: the runner adds its own")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1; got {args.rounds}")
    new_tree = os.path.abspath(args.new_tree)
    if not os.path.isdir(os.path.join(new_tree, "src")):
        parser.error(f"--new-tree {new_tree} has no src/ folder")
    metrics, between = EXTRACTORS.get(
        os.path.basename(script), (generic_metrics, lambda base, new: {})
    )

    commit, base_tree = add_worktree(args.base)
    trees = {"base": base_tree, "new": new_tree}
    try:
        info = {"base": {**tree_info(base_tree), "commit": commit}, "new": tree_info(new_tree)}
        envs = {side: run_environment(trees[side]) for side in SIDES}
        for side in SIDES:
            info[side]["nonmarkov"] = check_import(trees[side], envs[side])
        result = {
            "script": script,
            "script_args": script_args,
            "python": sys.executable,
            "rounds_requested": args.rounds,
            "tolerance": args.tolerance,
            "dropped_env": [k for k in DROPPED_ENV if k in os.environ],
            "trees": info,
            "rounds": [],
        }
        print(
            f"base: {commit[:9]} in {base_tree}\nnew:  {describe(info['new'])}\n"
            f"python: {sys.executable}\nscript: {shlex.join([script, *script_args])}",
            flush=True,
        )
        failed = False
        for number in range(args.rounds):
            order = SIDES if number % 2 == 0 else SIDES[::-1]
            entry: dict = {
                "round": number + 1,
                "order": list(order),
                "load_before": list(os.getloadavg()),
                "runs": {},
            }
            for side in order:
                run = run_script(
                    trees[side],
                    script,
                    script_args,
                    envs[side],
                    args.timeout,
                    args.quiet,
                    f"round {number + 1}/{args.rounds} {side}",
                )
                failed = failed or "error" in run
                entry["runs"][side] = run
            records = {side: entry["runs"][side]["records"] for side in SIDES}
            extracted = {side: metrics(records[side]) for side in SIDES}
            entry["times"] = {side: extracted[side][0] for side in SIDES}
            entry["checks"] = {side: extracted[side][1] for side in SIDES}
            entry["between"] = between(records["base"], records["new"])
            result["rounds"].append(entry)
            if args.json:  # after every round: an interrupted run keeps what it has
                write_json(args.json, result, args.tolerance)
        report(result, args.tolerance)
        if args.json:
            write_json(args.json, result, args.tolerance)
            print(f"\nraw records and tables: {args.json}")
        return 1 if failed else 0
    finally:
        remove_worktree(base_tree)


def _json_keys(mapping: dict) -> list:
    return [{"problem": k[0], "run": k[1], "name": k[2], "value": v} for k, v in mapping.items()]


def write_json(path: str, result: dict, tolerance: float) -> None:
    rounds = result["rounds"]
    output = {
        **result,
        "timings": timing_rows(rounds, tolerance),
        "checks": check_rows(rounds),
        "rounds": [
            {
                **r,
                "times": {s: _json_keys(r["times"][s]) for s in SIDES},
                "checks": {s: _json_keys(r["checks"][s]) for s in SIDES},
                "between": _json_keys(r["between"]),
            }
            for r in rounds
        ],
    }
    with open(path, "w") as handle:
        json.dump(output, handle, indent=1)


def report(result: dict, tolerance: float) -> None:
    rounds = result["rounds"]
    print(f"\nOld commit against new: {shlex.join([result['script'], *result['script_args']])}")
    print(
        f"base: {result['trees']['base']['commit'][:9]} "
        f"({result['trees']['base']['nonmarkov'] or 'nonmarkov did not import'})"
    )
    print(
        f"new:  {describe(result['trees']['new'])} "
        f"({result['trees']['new']['nonmarkov'] or 'nonmarkov did not import'})"
    )
    if result["dropped_env"]:
        print(f"removed from the runs' environment: {', '.join(result['dropped_env'])}")
    print("commands (the --json file is a new temporary one in every run):")
    for entry in rounds:
        loads = "/".join(f"{x:.1f}" for x in entry["load_before"])
        print(f"  round {entry['round']} (load {loads}):")
        for side in entry["order"]:
            run = entry["runs"][side]
            print(f"    {side}: {run['command'] or '-'}\n          -> {_status(run)}")
    print(f"\nTimings (seconds; verdict: median per-round ratio against 1 +- {tolerance:g})\n")
    print(timing_table(timing_rows(rounds, tolerance), len(rounds)))
    checks = check_rows(rounds)
    if checks:
        print(
            "\nChecks of the results (floats: the largest over the rounds; other values: "
            "every distinct one)\n"
        )
        print(check_table(checks))


if __name__ == "__main__":
    sys.exit(main())
