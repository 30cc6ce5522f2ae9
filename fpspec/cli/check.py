"""``fpspec check PACK RESULTS``: the conformance checker's command line (FPS-CHK-1..7, FPS-CNF-3)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import FpspecError
from ..io import check_output
from ..vectors.checker import EXIT_INTEGRITY, check, format_text, write_json, write_junit
from ..vectors.declare import load_declaration


def _check(args: argparse.Namespace) -> int:
    inputs = [args.pack, args.results, args.declare]
    for flag in ("report", "junit"):
        path = getattr(args, flag)
        if path is not None:
            check_output(path, inputs=inputs, flag=f"--{flag}")
    if args.report and args.junit and Path(args.report).absolute() == Path(args.junit).absolute():
        raise FpspecError(f"--report and --junit name the same file {args.report}")
    if args.max_report < 0:
        raise FpspecError(f"--max-report must be 0 or more, got {args.max_report}")
    decl = load_declaration(args.declare)
    from .. import mutants  # noqa: F401  (registers the mutant catalogue as named candidates: FPS-MUT-1)
    report = check(args.pack, args.results, select=args.select, declaration=decl, max_report=args.max_report)
    print(format_text(report, args.max_report, verbose=args.verbose))
    for e in report.errors:  # also on stderr, as every command reports bad input
        kind = "integrity error" if report.exit_code == EXIT_INTEGRITY else "error"
        print(f"fpspec check: {kind}: {e}", file=sys.stderr)
    for why in report.incomplete:  # a check that checks nothing for a pattern is not a silent pass
        print(f"fpspec check: incomplete: {why}", file=sys.stderr)
    if args.report:
        write_json(report, args.report)
    if args.junit:
        write_junit(report, args.junit)
    return report.exit_code


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="check an implementation's results against a vector pack, bit for bit",
        description="Exit status: 0 pass, 1 mismatch, 2 usage or I/O error (wrong shape or dtype "
                    "included), 3 integrity error (pack hash or schema, results from another pack), "
                    "4 incomplete (declared outputs missing from the results, a --select or declaration "
                    "sets glob that matches no set, or a declaration that selects no output).")
    p.add_argument("pack", help="vector pack folder (holding MANIFEST.json)")
    p.add_argument("results", help="results folder of <set>.npz files, or one .npz with <set>/out_<name> keys")
    p.add_argument("--select", help="comma-separated globs of set names to check")
    p.add_argument("--declare", help="YAML or JSON file declaring what the implementation supports")
    p.add_argument("--max-report", type=int, default=20, help="mismatches printed in full (default 20)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="print the full table of sets and outputs (default: one summary line per operation)")
    p.add_argument("--report", metavar="OUT.json", help="write the full report as JSON here (atomically)")
    p.add_argument("--junit", metavar="OUT.xml", help="write a JUnit XML report here (atomically)")
    p.set_defaults(func=_check)
