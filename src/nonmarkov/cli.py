"""The ``nonmarkov`` command line: ``nonmarkov info``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``nonmarkov`` and ``python -m nonmarkov``."""
    parser = argparse.ArgumentParser(
        prog="nonmarkov", description="Non-Markovian open quantum systems with process tensors."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    info_parser = sub.add_parser("info", help="show the numerical backend, devices and precision")
    info_parser.add_argument(
        "--backend",
        choices=["numpy", "jax"],
        default=None,
        help="describe this backend instead of the active one",
    )
    args = parser.parse_args(argv)
    if args.command == "info":
        from . import __version__, backends

        if args.backend is not None:
            backends.set_backend(args.backend)
        print(f"nonmarkov {__version__}")
        print(backends.format_info())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
