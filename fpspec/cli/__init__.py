"""The ``fpspec`` command: thin argument parsing over the public API (FPS-CLI-*).

Each subcommand lives in its own module with a ``register(subparsers)`` function;
nothing numeric lives here.  Exit status: 0 success, 2 bad input or usage, and
the checker's own codes (docs/cli.rst, docs/checker.rst) for ``fpspec check``.
Options that several commands share are parsed in :mod:`fpspec.cli.options`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from .. import __version__
from ..errors import FpspecError

#: Subcommand modules, in the order ``fpspec --help`` lists them.
COMMAND_MODULES = [
    "fpspec.cli.codebook",
    "fpspec.cli.quantize",
    "fpspec.cli.bounds",
    "fpspec.cli.gemm",
    "fpspec.cli.bench",
    "fpspec.cli.probe",
    "fpspec.cli.vectors",
    "fpspec.cli.check",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fpspec",
        description="Bit-exact specification, simulator and conformance checker for 4-bit "
                    "block-scaled floating point (E2M1 payloads with UE5M3, E4M3 and E8M0 scales).",
    )
    parser.add_argument("--version", action="version", version=f"fpspec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    name = " ".join(n for n in (args.command, getattr(args, "vectors_command", None)) if n)
    try:
        return int(args.func(args) or 0)
    except (FpspecError, OSError, ValueError) as exc:
        print(f"fpspec {name}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
