#!/usr/bin/env bash
# Create (if missing) a separate virtual environment holding OQuPy 0.5.0,
# used only to produce reference timings/results for the nonmarkov benchmarks.
# Idempotent: re-running only re-checks the install. Prints the venv's python.
set -euo pipefail

VENV="${OQUPY_VENV:-$HOME/.cache/nonmarkov/oqupy-venv}"
PYTHON_BIN="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON_BIN" -m venv "$VENV"
fi

if ! "$VENV/bin/python" -c 'import oqupy, sys; sys.exit(oqupy.__version__ != "0.5.0")' >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip install --upgrade pip >&2
    # OQuPy 0.5.0 pins its own dependencies (NumPy<2 etc.); let pip resolve.
    "$VENV/bin/python" -m pip install "oqupy==0.5.0" >&2
fi

"$VENV/bin/python" -c 'import oqupy; print("oqupy", oqupy.__version__)' >&2
echo "$VENV/bin/python"
