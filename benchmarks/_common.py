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


def oqupy_python(explicit: str | None) -> str:
    """The python of the OQuPy 0.5 venv: ``explicit``, or made by setup_oqupy_env.sh."""
    if explicit:
        return explicit
    result = subprocess.run(["bash", os.path.join(HERE, "setup_oqupy_env.sh")], check=True,
                            capture_output=True, text=True)
    return result.stdout.strip().splitlines()[-1]
