"""Helpers shared by the side-by-side benchmark scripts (run as ``python benchmarks/x.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def subprocess_json(command: list[str], env: dict) -> dict:
    """Run ``command --json FILE`` in its own process and return the JSON it wrote."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "out.json")
        subprocess.run(command + ["--json", path], check=True, env=env)
        with open(path) as handle:
            return json.load(handle)


OQUPY_PYTHON_HELP = "python of the OQuPy 0.5 venv (default: setup_oqupy_env.sh)"


def add_comparison_arguments(
    parser, problems: list[str], default: list[str], reference_help: str
) -> None:
    """The options every side-by-side script shares (problems, JSON, OQuPy, threads)."""
    parser.add_argument("--problems", nargs="+", default=default, choices=problems)
    parser.add_argument("--json", default=None, help="write all records to this JSON file")
    parser.add_argument("--oqupy-python", default=None, help=OQUPY_PYTHON_HELP)
    parser.add_argument("--no-oqupy", action="store_true", help="run nonmarkov only")
    parser.add_argument("--reference", action="store_true", help=reference_help)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="limit BLAS threads of every run (sets OMP/OPENBLAS/MKL vars)",
    )


def oqupy_python(explicit: str | None) -> str:
    """The python of the OQuPy 0.5 venv: ``explicit``, or made by setup_oqupy_env.sh."""
    if explicit:
        return explicit
    result = subprocess.run(
        ["bash", os.path.join(HERE, "setup_oqupy_env.sh")],
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip().splitlines()[-1]


def spin_boson_model():
    """The B1/B2 model: (nonmarkov, system, bath, initial state).

    H_S = 0.5 sigma_x, coupling 0.5 sigma_z, PowerLawSD(alpha=0.3, zeta=1,
    cutoff=5, 'exponential', T=0), spin up. nonmarkov is imported here so that
    a worker process times its own import.
    """
    import nonmarkov as nm

    correlations = nm.PowerLawSD(
        alpha=0.3, zeta=1, cutoff=5.0, cutoff_type="exponential", temperature=0.0
    )
    bath = nm.Bath(0.5 * nm.operators.sigma("z"), correlations)
    system = nm.System(0.5 * nm.operators.sigma("x"))
    return nm, system, bath, nm.operators.spin_dm("up")


#: Settings of a JAX run ("svd=qr,compiled=on"): key -> (field of
#: ``nonmarkov.options.EngineOptions``, its valid values, the environment variable
#: of its default or None).
JAX_SETTINGS = {
    "svd": ("svd", ("default", "qr", "divide_and_conquer"), "NONMARKOV_JAX_SVD"),
    "compiled": ("compiled", ("auto", "on", "off"), None),
    "device": ("device", ("auto", "host", "accelerator"), "NONMARKOV_JAX_DEVICE"),
}
JAX_SETTINGS_HELP = "'default' or KEY=VALUE,... with KEY one of svd, compiled (auto/on/off), device"


def jax_settings(label: str) -> dict[str, str]:
    """The settings of a JAX run label, checked: {} for "default", else {key: value}
    for "key=value,..." (keys of :data:`JAX_SETTINGS`). Raises ValueError."""
    if label == "default":
        return {}
    settings = {}
    for item in label.split(","):
        key, _, value = item.partition("=")
        if key not in JAX_SETTINGS:
            raise ValueError(f"unknown setting {key!r} in {label!r}; valid: {sorted(JAX_SETTINGS)}")
        if value not in JAX_SETTINGS[key][1]:
            valid = list(JAX_SETTINGS[key][1])
            raise ValueError(f"{key}={value!r} in {label!r}: valid values are {valid}")
        settings[key] = value
    return settings


def jax_options(label: str, base=None):
    """``nonmarkov.options.EngineOptions``: ``base`` (default: the library default) with
    the settings of ``label``."""
    from nonmarkov.options import default_options

    changes = {JAX_SETTINGS[key][0]: value for key, value in jax_settings(label).items()}
    return (default_options() if base is None else base).replace(**changes)


def jax_environment(label: str) -> dict[str, str]:
    """The settings of ``label`` that have an environment variable, as its assignments
    (for ``env``)."""
    return {
        JAX_SETTINGS[key][2]: value
        for key, value in jax_settings(label).items()
        if JAX_SETTINGS[key][2] is not None
    }


def options_record(options) -> dict:
    """``options`` (EngineOptions) as a JSON-serialisable dict."""
    import dataclasses

    return dataclasses.asdict(options)


def thread_env(threads: int | None) -> dict:
    """A copy of the environment, with the BLAS thread variables set to ``threads``."""
    env = dict(os.environ)
    if threads is not None:
        for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[key] = str(threads)
    return env


def comparison_cells(
    ours: dict,
    theirs: dict | None,
    reference: dict | None,
    seconds: float,
    other: float | None,
    deviation,
) -> str:
    """The table cells after a phase's time: OQuPy s, ratio, bonds, memory, deviations.

    ``deviation(a, b)`` is the problem's max difference of two records.
    """
    ratio = f"{other / seconds:7.1f}" if other else "      -"
    bonds = (
        f"{ours['max_bond_dimension']}/{theirs.get('max_bond_dimension')}"
        if theirs
        else f"{ours['max_bond_dimension']}"
    )
    memory = (
        (f"{ours['maxrss_kib_after'] / 1024:.0f}/{theirs['maxrss_kib_after'] / 1024:.0f}")
        if theirs
        else f"{ours['maxrss_kib_after'] / 1024:.0f}"
    )
    between = f"{deviation(ours, theirs):12.2e}" if theirs else "           -"
    err_nm = f"{deviation(ours, reference):9.2e}" if reference else "        -"
    err_oq = f"{deviation(theirs, reference):9.2e}" if (reference and theirs) else "        -"
    other_text = f"{other:10.2f}" if other else "         -"
    return f"{other_text} {ratio} {bonds:>11} {memory:>17} {between} {err_nm} {err_oq}"
