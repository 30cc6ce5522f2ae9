"""The checker: compare an implementation's outputs with a pack, bit for bit (FPS-CHK-*).

:func:`check` is shared by ``fpspec check`` and the in-process harness.
Exit status (FPS-CHK-2): 0 every supported output matches; 1 some mismatch;
2 usage or I/O error (bad shape or dtype included); 3 integrity error (pack
hash or schema, results made against another pack); 4 incomplete (declared
outputs missing).  When several apply, the order is 3, 2, 1, 4.
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Mapping
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from ..errors import FpspecError
from ..formats import FORMATS, get_format
from ..io import load_npz, write_text
from .declare import Declaration
from .pack import IntegrityError, Pack, VectorSet
from .schema import RESULT_PACK_ENTRY, tag_names, TAGS, decode_meta

__all__ = ["EXIT_PASS", "EXIT_MISMATCH", "EXIT_USAGE", "EXIT_INTEGRITY", "EXIT_INCOMPLETE",
           "OutputResult", "Mismatch", "CheckReport", "check", "ResultsDir", "field_text",
           "code_distance", "write_json", "write_junit", "format_text"]

EXIT_PASS, EXIT_MISMATCH, EXIT_USAGE, EXIT_INTEGRITY, EXIT_INCOMPLETE = 0, 1, 2, 3, 4


# ------------------------------------------------------------ bit decoding
def _fmt_for_bits(fmt: str | None, dtype: np.dtype):
    if fmt and fmt in FORMATS:
        return get_format(fmt)
    return None


def field_text(code: int, fmt_name: str | None) -> str:
    """'s=0 e=0111 m=101 = 0.8125' for a code of a known format, else the hex alone."""
    f = _fmt_for_bits(fmt_name, np.dtype(np.uint32))
    if f is None:
        return f"0x{code:x}"
    if not 0 <= code < f.num_codes:
        return f"0x{code:x} (out of range for {f.name})"
    s, e, m = f.split(code)
    v = f.decode_exact(code)
    if isinstance(v, Fraction):
        neg0 = v == 0 and f.signed and s
        val = "-0" if neg0 else (str(v) if v.denominator == 1 else f"{float(v):.9g} ({v})"
                                 if v.denominator < 1 << 20 else f"{float(v):.9g}")
    else:
        val = "NaN" if math.isnan(v) else ("-Inf" if v < 0 else "Inf")
    sign = f"s={s} " if f.signed else ""
    man = f" m={m:0{f.man_bits}b}" if f.man_bits else ""
    width = (f.bits + 3) // 4
    return f"0x{code:0{width}x} {f.name} {sign}e={e:0{f.exp_bits}b}{man} = {val}"


def _ordinal(code: int, f) -> int | None:
    if f.kind(code).value == "nan":
        return None
    if f.signed and code & f.sign_mask:
        return -(code & f.magnitude_mask)
    return code


def code_distance(expected: int, got: int, fmt_name: str | None) -> int | None:
    """Signed number of codes between expected and got in value order (None for NaN / unknown)."""
    f = _fmt_for_bits(fmt_name, np.dtype(np.uint32))
    if f is None or not (0 <= got < f.num_codes and 0 <= expected < f.num_codes):
        return None
    a, b = _ordinal(expected, f), _ordinal(got, f)
    return None if a is None or b is None else b - a


def _nan_mask(codes: np.ndarray, fmt: str) -> np.ndarray:
    f = get_format(fmt)
    if not f.has_nan:
        return np.zeros(codes.shape, dtype=bool)
    if f.bits <= 16:
        table = np.array([f.kind(c).value == "nan" for c in range(f.num_codes)])
        c = codes.astype(np.int64)
        ok = (c >= 0) & (c < f.num_codes)
        return ok & table[np.where(ok, c, 0)]
    u = codes.astype(np.uint64)
    exp = (u >> np.uint64(f.man_bits)) & np.uint64(f.exp_max_field)
    man = u & np.uint64(f.man_max_field)
    return (exp == f.exp_max_field) & (man != 0)


# ------------------------------------------------------------ results
class ResultsDir:
    """Results on disk: a folder of ``<set>.npz`` files or one .npz with ``<set>/out_<name>`` keys."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._single: dict[str, np.ndarray] | None = None
        if self.path.is_file():
            self._single = load_npz(self.path)
        elif not self.path.is_dir():
            raise FpspecError(f"{self.path}: no such results folder or .npz file")

    def get(self, set_name: str) -> dict[str, np.ndarray] | None:
        if self._single is not None:
            pre = f"{set_name}/"
            got = {k[len(pre):]: v for k, v in self._single.items() if k.startswith(pre)}
            return got or None
        p = self.path / f"{set_name}.npz"
        if not p.is_file():
            return None
        return load_npz(p)

    def names(self) -> set[str]:
        if self._single is not None:
            return {k.split("/", 1)[0] for k in self._single}
        return {p.stem for p in self.path.glob("*.npz")}


# ------------------------------------------------------------ report
@dataclass
class Mismatch:
    set: str
    output: str
    case: int
    key: int
    tags: list[str]
    element: list[int] | None
    expected: int
    got: int
    out_format: str | None
    inputs: dict[str, str]
    distance: int | None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["expected_text"] = field_text(self.expected, self.out_format)
        d["got_text"] = field_text(self.got, self.out_format)
        return d


@dataclass
class OutputResult:
    set: str
    output: str
    status: str  # pass, fail, not-supported, missing
    reason: str = ""
    cases: int = 0
    mismatched_cases: int = 0
    mismatched_elements: int = 0
    nan_equivalent: int = 0
    tag_counts: dict[str, int] = field(default_factory=dict)


@dataclass
class CheckReport:
    pack: str
    pack_id: str
    results: str
    declaration: Declaration
    outputs: list[OutputResult] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exit_code: int = EXIT_PASS

    def counts(self) -> dict[str, int]:
        c: dict[str, int] = {}
        for o in self.outputs:
            c[o.status] = c.get(o.status, 0) + 1
        return c

    def to_dict(self) -> dict[str, Any]:
        return {
            "pack": self.pack, "pack_id": self.pack_id, "results": self.results,
            "declaration": self.declaration.to_dict(), "exit_code": self.exit_code,
            "status": {0: "pass", 1: "mismatch", 2: "usage-error", 3: "integrity-error",
                       4: "incomplete"}[self.exit_code],
            "counts": self.counts(), "errors": self.errors, "notes": self.notes,
            "outputs": [o.__dict__ for o in self.outputs],
            "mismatches": [m.to_dict() for m in self.mismatches],
        }


def _input_text(vs: VectorSet, case: int, element: tuple[int, ...] | None) -> dict[str, str]:
    """Each input of a case; for array inputs the element that produced the output element."""
    out = {}
    op = vs.meta["operation"]
    params = vs.meta.get("params", {})
    for k, arr in vs.inputs.items():
        spec = vs.meta["inputs"][k]
        a = arr[case]
        fmt = spec.get("format")
        el = element
        if op == "quantize" and k == "x" and element is not None and params.get("columnwise"):
            el = tuple(reversed(element))  # outputs are in the view X^T
        if a.ndim == 0:
            out[k] = field_text(int(a), fmt)
        elif op == "gemm" and element is not None and len(element) == 2:
            row = element[0] if k.startswith("a") else element[1]
            out[k] = f"row {row} of {spec['dtype']}{list(a.shape)} ({fmt})"
        elif op == "quantize" and k == "x" and params.get("rht"):
            out[k] = f"array {spec['dtype']}{list(a.shape)} (Hadamard-transformed before quantization)"
        elif el is not None and len(el) == a.ndim and all(e < s for e, s in zip(el, a.shape)):
            out[k] = f"[{','.join(map(str, el))}] " + field_text(int(a[el]), fmt)
        else:
            out[k] = f"array {spec['dtype']}{list(a.shape)}"
    return out


def _check_output(vs: VectorSet, oname: str, got: np.ndarray, decl: Declaration, report: CheckReport,
                  max_report: int) -> OutputResult:
    spec = vs.meta["outputs"][oname]
    exp = vs.outputs[oname]
    res = OutputResult(vs.name, oname, "pass", cases=vs.cases)
    if got.dtype != exp.dtype or got.shape != exp.shape:
        raise FpspecError(f"results for {vs.name}/{oname}: got {got.dtype}{list(got.shape)}, "
                          f"the pack expects {exp.dtype}{list(exp.shape)}")
    diff = exp != got
    fmt = spec.get("format")
    # a decode output's NaNs belong to the source format's NaN codes
    nan_owner = spec.get("source_format") or fmt
    if decl.nan_any(nan_owner) and fmt in FORMATS:
        eq = _nan_mask(exp, fmt) & _nan_mask(got, fmt) & diff
        res.nan_equivalent = int(eq.sum())
        diff &= ~eq
    per_case = diff.reshape(diff.shape[0], -1).any(axis=1) if diff.ndim > 1 else diff
    res.mismatched_elements = int(diff.sum())
    res.mismatched_cases = int(per_case.sum())
    if res.mismatched_cases:
        res.status = "fail"
        bad_cases = np.flatnonzero(per_case)
        tags = vs.tags[bad_cases]
        for name, bit in TAGS.items():
            n = int(((tags >> np.uint32(bit)) & np.uint32(1)).sum())
            if n:
                res.tag_counts[name] = n
        res.tag_counts["untagged"] = int((tags == 0).sum())
        keys = vs.keys()
        room = max_report - len(report.mismatches)
        for c in bad_cases[:max(room, 0)]:
            element: tuple[int, ...] | None = None
            if diff.ndim > 1:
                element = tuple(int(i) for i in np.argwhere(diff[c])[0])
                e_code, g_code = int(exp[c][element]), int(got[c][element])
            else:
                e_code, g_code = int(exp[c]), int(got[c])
            report.mismatches.append(Mismatch(
                vs.name, oname, int(c), int(keys[c]), tag_names(int(vs.tags[c])),
                list(element) if element is not None else None, e_code, g_code, fmt,
                _input_text(vs, int(c), element), code_distance(e_code, g_code, fmt)))
    return res


def _check_pack_entry(vs: VectorSet, arrays: dict[str, np.ndarray], pack: Pack, where: str) -> None:
    if RESULT_PACK_ENTRY not in arrays:
        return
    info = decode_meta(arrays[RESULT_PACK_ENTRY], where)
    if info.get("pack_id") != pack.pack_id or info.get("set_sha256", vs.sha256) != vs.sha256:
        raise IntegrityError(f"{where}: results were made against pack {str(info.get('pack_id'))[:12]}..., "
                             f"this pack is {pack.pack_id[:12]}... (another pack version)")


def select_names(names: Iterable[str], select: str | None) -> list[str]:
    if not select:
        return sorted(names)
    globs = [g.strip() for g in select.split(",") if g.strip()]
    return sorted(n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs))


def check(pack: Pack | str | Path, results: ResultsDir | Mapping[str, Mapping[str, np.ndarray]] | str | Path,
          *, select: str | None = None, declaration: Declaration | None = None,
          max_report: int = 20) -> CheckReport:
    """Check results against a pack; never raises for mismatches (see the exit_code)."""
    decl = declaration or Declaration()
    rpath = str(results) if isinstance(results, (str, Path)) else ("<in-process>" if not isinstance(results, ResultsDir) else str(results.path))
    report = CheckReport(str(pack.root if isinstance(pack, Pack) else pack), "", rpath, decl)
    try:
        if not isinstance(pack, Pack):
            pack = Pack(pack)
        report.pack_id = pack.pack_id
        if isinstance(results, (str, Path)):
            results = ResultsDir(results)
        names = select_names(pack.names(), select)
        if select and not names:
            raise FpspecError(f"--select {select!r} matches no set of {pack.root}")
        missing_any = False
        for name in names:
            vs = pack.load(name)
            if isinstance(results, ResultsDir):
                arrays = results.get(name)
                where = f"{results.path}/{name}.npz" if results.path.is_dir() else f"{results.path}:{name}"
            else:
                arrays = dict(results[name]) if name in results else None
                where = f"results[{name}]"
            if arrays is not None:
                _check_pack_entry(vs, arrays, pack, where)
                unknown = sorted(set(arrays) - {f"out_{k}" for k in vs.outputs} - {RESULT_PACK_ENTRY})
                if unknown:
                    raise FpspecError(f"{where}: entries {unknown} are not outputs of set {name} "
                                      f"(expected some of {sorted('out_' + k for k in vs.outputs)})")
            for oname in sorted(vs.outputs):
                ok, why = decl.supports(vs.meta, oname) if decl.declared else (True, "")
                if not ok:
                    report.outputs.append(OutputResult(name, oname, "not-supported", why, vs.cases))
                    continue
                got = None if arrays is None else arrays.get(f"out_{oname}")
                if got is None:
                    missing_any = True
                    report.outputs.append(OutputResult(name, oname, "missing", "declared but not in the results",
                                                       vs.cases))
                    continue
                report.outputs.append(_check_output(vs, oname, got, decl, report, max_report))
        if isinstance(results, ResultsDir):
            known = set(pack.names())
            strays = sorted(results.names() - known)
            if strays:
                report.notes.append(f"results for sets the pack does not have (ignored): {', '.join(strays[:10])}"
                                    + (" ..." if len(strays) > 10 else ""))
        failed = any(o.status == "fail" for o in report.outputs)
        report.exit_code = EXIT_MISMATCH if failed else (EXIT_INCOMPLETE if missing_any else EXIT_PASS)
    except IntegrityError as exc:
        report.errors.append(str(exc))
        report.exit_code = EXIT_INTEGRITY
    except (FpspecError, OSError) as exc:
        report.errors.append(str(exc))
        report.exit_code = EXIT_USAGE
    return report


# ------------------------------------------------------------ writers
def format_text(report: CheckReport, max_report: int = 20) -> str:
    """The human report: first mismatches decoded field by field, per-set summary, tag counts."""
    lines = [f"fpspec check: pack {report.pack} (id {report.pack_id[:12]}), results {report.results}, "
             f"declaration {report.declaration.name}"]
    for e in report.errors:
        lines.append(f"ERROR: {e}")
    for n in report.notes:
        lines.append(f"NOTE: {n}")
    for m in report.mismatches[:max_report]:
        where = f" element {m.element}" if m.element is not None else ""
        lines.append(f"MISMATCH {m.set}/{m.output} case {m.case} key 0x{m.key:x}{where} "
                     f"tags [{','.join(m.tags)}]")
        for k, v in m.inputs.items():
            lines.append(f"    in  {k:<9} {v}")
        lines.append(f"    expected      {field_text(m.expected, m.out_format)}")
        dist = "" if m.distance is None else f"   (code distance {m.distance:+d})"
        lines.append(f"    got           {field_text(m.got, m.out_format)}{dist}")
    if report.outputs:
        lines.append("")
        lines.append(f"{'set/output':<52} {'status':<13} {'cases':>7} {'bad':>7}  detail")
    for o in report.outputs:
        detail = o.reason
        if o.status == "fail":
            detail = ", ".join(f"{k}:{v}" for k, v in sorted(o.tag_counts.items()))
        elif o.nan_equivalent:
            detail = f"{o.nan_equivalent} NaN codes accepted as equivalent (declared nan_payloads)"
        lines.append(f"{o.set + '/' + o.output:<52} {o.status:<13} {o.cases:>7} {o.mismatched_cases:>7}  {detail}")
    totals: dict[str, int] = {}
    for o in report.outputs:
        for k, v in o.tag_counts.items():
            totals[k] = totals.get(k, 0) + v
    if totals:
        lines.append("mismatched cases by tag: " + ", ".join(f"{k}={v}" for k, v in sorted(totals.items())))
    c = report.counts()
    lines.append("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) +
                 f"; exit {report.exit_code}")
    return "\n".join(lines)


def write_json(report: CheckReport, path: str | Path) -> None:
    """The report as JSON, written atomically (FPS-CLI-4)."""
    write_text(path, json.dumps(report.to_dict(), indent=1, sort_keys=True) + "\n")


def write_junit(report: CheckReport, path: str | Path) -> None:
    """JUnit XML: one testcase per set/output; not-supported outputs are skipped, not failed."""
    c = report.counts()
    cases = []
    for o in report.outputs:
        name = quoteattr(f"{o.set}/{o.output}")
        body = ""
        if o.status == "fail":
            first = [m for m in report.mismatches if m.set == o.set and m.output == o.output][:5]
            text = "\n".join(f"case {m.case} key 0x{m.key:x}: expected {field_text(m.expected, m.out_format)}, "
                             f"got {field_text(m.got, m.out_format)}" for m in first)
            body = (f"<failure message={quoteattr(f'{o.mismatched_cases} of {o.cases} cases differ')}>"
                    f"{escape(text)}</failure>")
        elif o.status == "not-supported":
            body = f"<skipped message={quoteattr('not supported: ' + o.reason)}/>"
        elif o.status == "missing":
            body = f"<failure message={quoteattr('declared but missing from the results')}/>"
        cases.append(f'  <testcase classname="fpspec.vectors" name={name}>{body}</testcase>')
    for e in report.errors:
        cases.append(f'  <testcase classname="fpspec.vectors" name="pack"><error message={quoteattr(e)}/></testcase>')
    xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="fpspec-check" tests="{len(cases)}" '
           f'failures="{c.get("fail", 0) + c.get("missing", 0)}" errors="{len(report.errors)}" '
           f'skipped="{c.get("not-supported", 0)}">\n' + "\n".join(cases) + "\n</testsuite>\n")
    write_text(path, xml)
