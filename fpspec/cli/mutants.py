"""``fpspec vectors mutants PACK``: run the mutant catalogue on a pack (FPS-MUT-3)."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import FpspecError
from ..io import atomic_write
from ..vectors.checker import EXIT_INTEGRITY, select_names, split_globs
from ..vectors.pack import IntegrityError
from .options import add_quiet, progress_stream


def _selected(pattern: str | None):
    from ..mutants import CATALOGUE
    if not split_globs(pattern):  # (as --select: no glob selects everything)
        return list(CATALOGUE)
    names = set(select_names([m.name for m in CATALOGUE], pattern))
    picked = [m for m in CATALOGUE if m.name in names]
    if not picked:
        raise FpspecError(f"--mutant {pattern!r} matches no mutant of the catalogue ({len(CATALOGUE)} mutants; "
                          "--list names them)")
    return picked


def _mutants(args: argparse.Namespace) -> int:
    from ..mutants import run_mutants
    todo = _selected(args.mutant)
    if args.list:
        for m in todo:
            print(f"{m.name:<58} {m.family:<16} {m.description}")
        return 0
    if args.pack is None:
        raise FpspecError("fpspec vectors mutants: give the PACK folder (or --list)")
    stream = progress_stream(args)

    def progress(outcome, i: int, n: int) -> None:
        if stream is not None:
            stream.write(f"\r[{i}/{n}] {outcome.mutant.name[:60]:<60}")
            stream.flush()
    try:
        report = run_mutants(args.pack, todo, progress=progress)
    except IntegrityError as exc:
        print(f"fpspec vectors mutants: integrity error: {exc}", file=sys.stderr)
        return EXIT_INTEGRITY
    if stream is not None:
        stream.write("\n")
    if args.json:
        text = json.dumps(report.to_dict(), indent=1, sort_keys=True) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
            return report.exit_code
        atomic_write(args.json, lambda fh: fh.write(text.encode("utf-8")))
    for o in report.outcomes:
        if args.verbose or o.status in ("survived", "no-set"):
            why = o.killed_by or o.mutant.equivalent or ("no set of the pack matches " + o.mutant.sets
                                                         if o.status == "no-set" else "every set passes it")
            print(f"{o.status:<10} {o.mutant.name:<58} {why}")
    c = report.counts()
    print(f"fpspec vectors mutants: {len(report.outcomes)} mutants on {args.pack}: {c['killed']} killed, "
          f"{c['equivalent']} equivalent (argued), {c['survived']} survived, {c['no-set']} without a set; "
          f"kill rate {100 * report.kill_rate:.1f}%")
    return report.exit_code


def register(vs: argparse._SubParsersAction) -> None:
    m = vs.add_parser("mutants", help="run the catalogue of plausible wrong implementations on a pack: each "
                      "must fail it (exit 0 when every mutant is killed or argued equivalent, 1 otherwise)")
    m.add_argument("pack", nargs="?", help="vector pack folder")
    m.add_argument("--mutant", metavar="GLOBS", help="comma-separated globs of mutant names (matching none "
                   "is an error)")
    m.add_argument("--list", action="store_true", help="list the mutants (name, family, what is wrong) and exit")
    m.add_argument("--json", metavar="OUT.json", help="write every outcome as JSON here ('-': standard output, "
                   "instead of the text report)")
    m.add_argument("--verbose", action="store_true", help="one line per mutant, killed ones included "
                   "(default: only the survivors)")
    add_quiet(m)
    m.set_defaults(func=_mutants)
