"""Conformance tables generated from the committed vector pack (FPS-CNF-1, FPS-DOC-3).

``.. fpspec-coverage::``
    every set of ``vectors/v1`` grouped by what it covers: per operation, the
    format (decode, encode), the ``scheme/profile`` (quantize) or the GEMM preset.
``.. fpspec-implementer-check:: SCHEME/PROFILE``
    for one block-scaling profile: the declaration an implementation of it writes,
    the sets and outputs of the pack that this declaration selects (computed with
    the checker's own matching, :meth:`fpspec.vectors.declare.Declaration.supports`),
    and the commands that check it.

Both read ``MANIFEST.json`` and the ``__meta__`` entry of each set (no arrays, no
pickles), so the pages always describe the pack that is committed.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

from fpspec_tables import GeneratedDirective, Table

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "vectors" / "v1"


@lru_cache(maxsize=1)
def pack_metas() -> tuple[dict, dict[str, dict]]:
    """(manifest, {set name: __meta__}) of the committed pack."""
    import fpspec_reqs

    manifest = json.loads((PACK / "MANIFEST.json").read_text(encoding="utf-8"))
    metas = {}
    for e in manifest["sets"]:
        metas[e["name"]] = json.loads(fpspec_reqs.npz_meta_text(PACK / e["file"]))
    return manifest, metas


def coverage_groups() -> list[tuple[str, str, list[dict]]]:
    """(operation, what, manifest entries) rows, in a stable order."""
    manifest, _ = pack_metas()
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for e in manifest["sets"]:
        op = e["operation"]
        fmts = [f for f in e["formats"] if f != "raw"]
        if op == "decode":
            what = next(f for f in fmts if f != "fp32") if len(fmts) > 1 else "fp32"
            what = f"format ``{what}``"
        elif op == "encode":
            name = e["name"]
            target = name.split("-")[2]
            what = f"into ``{target}``"
        elif op == "quantize":
            what = f"profile ``{e['profile']}``"
        else:
            what = f"preset ``{e['model']}``" if e.get("model") else "every preset (order-independent data)"
        groups[(op, what)].append(e)
    order = {"decode": 0, "encode": 1, "quantize": 2, "gemm": 3}
    return [(op, what, sorted(v, key=lambda e: e["name"]))
            for (op, what), v in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1]))]


class CoverageDirective(GeneratedDirective):
    """``.. fpspec-coverage::`` the sets of vectors/v1 by operation and what they cover."""

    def rst_lines(self) -> list:
        env = self.state.document.settings.env
        env.note_dependency(str(PACK / "MANIFEST.json"))
        manifest, _ = pack_metas()
        rows = []
        for op, what, entries in coverage_groups():
            sets = ", ".join(f"``{e['name']}``" for e in entries)
            outs = sum(len(e["outputs"]) for e in entries)
            cases = sum(e["cases"] for e in entries)
            rows.append([f"``{op}``", what, sets, str(outs), str(cases)])
        total = len(manifest["sets"])
        return [f"``vectors/v1`` (pack id ``{manifest['pack_id'][:16]}...``, spec version "
                f"{manifest['spec_version']}, level {manifest['level']}): {total} sets.", "",
                Table(["operation", "covers", "sets", "outputs", "cases"], rows, widths=(10, 22, 52, 8, 8),
                      classes="fpspec-table fpspec-coverage")]


def declaration_for(scheme: str, profile: str, *, full: bool = False) -> dict:
    """The declaration of an implementation of one profile: RNE payloads and the default scale
    format, or (full) every payload rounding and scale format the profile accepts."""
    from fpspec.schemes import get_profile, get_scheme

    prof = get_profile(scheme, profile)
    payloads = get_scheme(scheme).payload_formats   # e2m1, or e4m3 and e5m2 (mxfp8)
    scale_formats = list(prof.scale_formats if full else prof.scale_formats[:1])
    roundings = [r if not r.startswith("sr") else f"{r}/8" for r in prof.roundings] if full else ["rne"]
    return {"name": f"my-{scheme}-{profile}-kernel", "operations": ["quantize"], "schemes": [scheme],
            "profiles": [f"{scheme}/{profile}"], "formats": sorted({*payloads, "fp32", *scale_formats}),
            "rounding": {pf: roundings for pf in payloads}}


def selected(decl: dict) -> dict[str, list[str]]:
    """set name -> the outputs that the checker would check under decl (FPS-CHK-5)."""
    from fpspec.vectors.declare import Declaration

    d = Declaration.from_mapping(decl)
    _, metas = pack_metas()
    out: dict[str, list[str]] = {}
    for name, meta in sorted(metas.items()):
        ok = [o for o in meta["outputs"] if d.supports(meta, o)[0]]
        if ok:
            out[name] = ok
    return out


def _yaml(decl: dict) -> str:
    lines = []
    for k, v in decl.items():
        if isinstance(v, dict):
            inner = ", ".join(f"{a}: [{', '.join(b)}]" for a, b in v.items())
            lines.append(f"{k}: {{{inner}}}")
        elif isinstance(v, list):
            lines.append(f"{k}: [{', '.join(v)}]")
        else:
            lines.append(f"{k}: {v}")
    return "\n".join(lines)


class ImplementerCheckDirective(Directive):
    """``.. fpspec-implementer-check:: SCHEME/PROFILE``: declaration, selected sets, commands."""

    required_arguments = 1

    def run(self):
        from fpspec.schemes import PROFILES

        env = self.state.document.settings.env
        env.note_dependency(str(PACK / "MANIFEST.json"))
        env.note_dependency(os.path.abspath(__file__))
        try:
            scheme, profile = self.arguments[0].split("/")
            prof = PROFILES[(scheme, profile)]
        except (ValueError, KeyError):
            raise self.error(f"unknown profile {self.arguments[0]!r}; known: "
                             + ", ".join(f"{s}/{p}" for s, p in PROFILES))
        decl = declaration_for(scheme, profile)
        full = declaration_for(scheme, profile, full=True)
        sel, sel_full = selected(decl), selected(full)
        extra = {k: v for k, v in sel_full.items() if k not in sel}
        box = nodes.container(classes=["fpspec-implementer-check"], ids=[f"check-{scheme}-{profile}"])
        box += nodes.rubric(text=f"Checking a kernel for {scheme}/{profile}")
        box += nodes.paragraph(text="1. The declaration (save as my-kernel.yaml; RNE payloads and the default "
                                    f"scale format {prof.scale_formats[0]}):")
        text = _yaml(decl)
        box += nodes.literal_block(text, text, language="yaml")
        if sel:
            p = nodes.paragraph(text=f"2. The sets and outputs it selects in vectors/v1 ({len(sel)} "
                                     f"set{'s' if len(sel) != 1 else ''}; computed with the checker's own "
                                     "matching):")
            box += p
            lst = nodes.bullet_list()
            for name, outs in sel.items():
                item = nodes.list_item()
                para = nodes.paragraph()
                para += nodes.literal(name, name)
                para += nodes.Text(": " + ", ".join(f"out_{o}" for o in outs))
                item += para
                lst += item
            box += lst
        else:
            box += nodes.paragraph(text=f"2. vectors/v1 has no set for {scheme}/{profile}, so X(D) is empty "
                                        "and no conformance claim can be made against this pack (FPS-CNF-3). "
                                        "Until a pack carries such sets, compare the kernel in process with "
                                        f"fpspec.quantize(x, \"{scheme}\", profile=\"{profile}\", ...) on your "
                                        "own inputs (codes, scales and decode scale, bit for bit).")
        if extra:
            more = ", ".join(sorted(extra))
            box += nodes.paragraph(text="Declaring every payload rounding and scale format the profile accepts "
                                        f"({', '.join(next(iter(full['rounding'].values())))}; "
                                        f"{', '.join(prof.scale_formats)}) adds: {more}.")
        cmds = ("fpspec vectors verify vectors/v1\n"
                "# run the kernel on in_x (and in_amax, in_r) of every set listed above and write\n"
                "# results/<set>.npz holding its out_* arrays (same names, dtypes and shapes)\n"
                "fpspec check vectors/v1 results --declare my-kernel.yaml")
        if sel:
            box += nodes.paragraph(text="3. The commands (exit status 0: the kernel conforms for this "
                                        "declaration at level 1; see the conformance clause):")
            box += nodes.literal_block(cmds, cmds, language="shell")
        return [box]


def setup(app):
    app.add_directive("fpspec-coverage", CoverageDirective)
    app.add_directive("fpspec-implementer-check", ImplementerCheckDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
