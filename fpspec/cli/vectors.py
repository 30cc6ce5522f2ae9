"""``fpspec vectors generate | verify | run-reference | list | mutants`` (FPS-VEC-5, FPS-VEC-10, FPS-CHK-6,
FPS-MUT-3)."""

from __future__ import annotations

import argparse
import sys

from ..errors import FpspecError
from ..vectors.checker import EXIT_INTEGRITY, select_names
from ..vectors.generate import generate
from ..vectors.pack import IntegrityError, Pack
from ..vectors.results import run_reference
from . import mutants
from .options import add_quiet, progress_stream


def _generate(args: argparse.Namespace) -> int:
    m = generate(args.out, args.level, progress=progress_stream(args))
    total = sum(s["bytes"] for s in m["sets"])
    print(f"wrote {len(m['sets'])} sets ({total / 1e6:.1f} MB, level {args.level}) to {args.out}; "
          f"pack id {m['pack_id']}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    try:
        pack = Pack(args.pack)
        lines = pack.verify()
    except IntegrityError as exc:
        print(f"fpspec vectors verify: integrity error: {exc}", file=sys.stderr)
        return EXIT_INTEGRITY
    if not args.quiet:
        print("\n".join(lines))
    m = pack.manifest
    print(f"pack {args.pack}: {len(lines)} sets verified (schema {m['schema_version']}, spec "
          f"{m['spec_version']}, generator {m['generator_version']}, level {m['level']}, id {m['pack_id'][:16]})")
    return 0


def _run_reference(args: argparse.Namespace) -> int:
    try:
        n = run_reference(args.pack, args.out, args.select, progress=progress_stream(args), impl=args.impl)
    except IntegrityError as exc:
        print(f"fpspec vectors run-reference: integrity error: {exc}", file=sys.stderr)
        return EXIT_INTEGRITY
    twin = "fast-path" if args.impl == "fast" else f"{args.impl} twin"
    print(f"wrote fpspec {twin} results of {n} sets to {args.out}")
    return 0


def _list(args: argparse.Namespace) -> int:
    try:
        pack = Pack(args.pack)
    except IntegrityError as exc:
        print(f"fpspec vectors list: integrity error: {exc}", file=sys.stderr)
        return EXIT_INTEGRITY
    names = select_names(pack.names(), args.select)
    if args.select and not names:
        raise FpspecError(f"--select {args.select!r} matches no set of {args.pack}")
    for n in names:
        e = pack.entries[n]
        print(f"{n:<48} {e['operation']:<9} {e['cases']:>7} cases  outputs {','.join(e['outputs'])}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vectors", help="generate, verify and run conformance vector packs")
    vs = p.add_subparsers(dest="vectors_command", metavar="ACTION")
    vs.required = True
    g = vs.add_parser("generate", help="write a vector pack deterministically (byte-identical on every run)")
    g.add_argument("--level", type=int, default=1, choices=(1, 2), help="1: committed CI pack; 2: larger")
    g.add_argument("--out", required=True, help="output folder: new, empty, or a previous pack's (replaced "
                   "as a whole once the new pack is complete); its parent folder must exist")
    add_quiet(g)
    g.set_defaults(func=_generate)
    v = vs.add_parser("verify", help="check a pack's manifest, hashes and schema (exit 3 on any problem)")
    v.add_argument("pack")
    v.add_argument("--quiet", action="store_true", help="print only the summary line")
    v.set_defaults(func=_verify)
    r = vs.add_parser("run-reference", help="write fpspec's own results for a pack (the fast path, or the "
                      "twin --impl names)")
    r.add_argument("pack")
    r.add_argument("--out", required=True, help="results folder (created; its parent folder must exist; "
                   "never a pack's folder); each file is written atomically")
    r.add_argument("--select", help="comma-separated globs of set names (matching none is an error)")
    r.add_argument("--impl", default="fast", help="the twin that computes: fast (default), exact, torch (CPU "
                   "tensors) or torch:DEVICE (e.g. torch:cuda)")
    add_quiet(r)
    r.set_defaults(func=_run_reference)
    ls = vs.add_parser("list", help="list the sets of a pack")
    ls.add_argument("pack")
    ls.add_argument("--select")
    ls.set_defaults(func=_list)
    mutants.register(vs)
