"""The ``fpspec`` command: thin argument parsing over the public API (FPS-CLI-*).

Each subcommand lives in its own module with a ``register(subparsers)`` function;
nothing numeric lives here.  Exit status: 0 success, 2 bad input or usage, and
the checker's own codes (docs/cli.rst, docs/checker.rst) for ``fpspec check``;
:data:`BROKEN_PIPE_STATUS` when the reader of stdout goes away (``| head``).
Options that several commands share are parsed in :mod:`fpspec.cli.options`.
"""

from __future__ import annotations

import argparse
import importlib
import os
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
    "fpspec.cli.sample",
    "fpspec.cli.bench",
    "fpspec.cli.probe",
    "fpspec.cli.vectors",
    "fpspec.cli.check",
]


#: Exit status when the reader of stdout closes it early (``fpspec codebook fp16 | head``):
#: 128 + SIGPIPE (13), the status a shell reports for a Unix tool that SIGPIPE ends (``seq 1 100000 |
#: head -1`` under ``set -o pipefail``), so a script can tell that the output was cut.  Nothing is
#: printed: the reader chose to stop.  (fpspec writes to no other pipe, so a BrokenPipeError is
#: always stdout's, or stderr's.)
BROKEN_PIPE_STATUS = 128 + 13


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
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # output still buffered meets a closed pipe here, not at interpreter exit
        return status
    except BrokenPipeError:
        return _stdout_closed()
    except (FpspecError, OSError, ValueError) as exc:
        print(f"fpspec {name}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


def _stdout_closed() -> int:
    """The reader of stdout has gone: point stdout's file descriptor at the null device, so the
    interpreter's last flush of what is still buffered does not fail again, and exit quietly with
    :data:`BROKEN_PIPE_STATUS`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (AttributeError, OSError, ValueError):  # a stdout with no file descriptor (an in-process caller's)
        pass
    return BROKEN_PIPE_STATUS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
