"""The checker: compare an implementation's outputs with a pack, bit for bit (FPS-CHK-*).

:func:`check` is shared by ``fpspec check`` and the in-process harness.
Exit status (FPS-CHK-2): 0 every supported output matches; 1 some mismatch;
2 usage or I/O error (bad shape or dtype included); 3 integrity error (pack
hash or schema, results made against another pack); 4 incomplete (declared
outputs missing, a ``--select`` or declaration ``sets`` glob that matches no
set, or nothing checked at all: FPS-CNF-3 asks X(D) to be non-empty).  When
several apply, the order is 3, 2, 1, 4.

For a failing set the report adds, where fpspec can compute them
(:mod:`fpspec.vectors.explain`), the intermediate values of a failing block
(quantize sets) and the named choice the submitted outputs equal.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from ..errors import FpspecError
from ..formats import FORMATS, get_format
from ..io import load_npz, write_text
from .declare import Declaration, load_declaration
from .fields import code_distance, field_text
from .pack import IntegrityError, Pack, VectorSet
from .schema import RESULT_PACK_ENTRY, tag_names, TAGS, decode_meta

__all__ = ["EXIT_PASS", "EXIT_MISMATCH", "EXIT_USAGE", "EXIT_INTEGRITY", "EXIT_INCOMPLETE",
           "OutputResult", "Mismatch", "CheckReport", "check", "ResultsDir", "field_text",
           "code_distance", "write_json", "write_junit", "format_text", "select_names", "split_globs",
           "empty_selections"]

EXIT_PASS, EXIT_MISMATCH, EXIT_USAGE, EXIT_INTEGRITY, EXIT_INCOMPLETE = 0, 1, 2, 3, 4


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
    #: quantize sets: the intermediate values of the failing block (:func:`fpspec.vectors.explain.quantize_trace`)
    trace: list[str] = field(default_factory=list)

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
    operation: str = ""


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
    #: why the check is incomplete besides missing outputs: a glob matching no set, nothing checked
    incomplete: list[str] = field(default_factory=list)
    #: set name -> the named choice its submitted outputs equal (:func:`fpspec.vectors.explain.explain_mismatch`)
    explanations: dict[str, str] = field(default_factory=dict)
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
            "incomplete": self.incomplete, "explanations": self.explanations,
            "outputs": [o.__dict__ for o in self.outputs],
            "mismatches": [m.to_dict() for m in self.mismatches],
        }


def _input_text(vs: VectorSet, case: int, element: tuple[int, ...] | None, oname: str = "") -> dict[str, str]:
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
        elif op == "quantize" and k == "x" and oname == "scales" and element is not None:
            out[k] = f"array {spec['dtype']}{list(a.shape)}, block {list(element)} of its scale grid"
        elif op == "quantize" and k == "x" and params.get("rht"):
            out[k] = f"array {spec['dtype']}{list(a.shape)} (Hadamard-transformed before quantization)"
        elif el is not None and len(el) == a.ndim and all(e < s for e, s in zip(el, a.shape)):
            out[k] = f"[{','.join(map(str, el))}] " + field_text(int(a[el]), fmt)
        else:
            out[k] = f"array {spec['dtype']}{list(a.shape)}"
    return out


def _check_output(vs: VectorSet, oname: str, got: np.ndarray, decl: Declaration, report: CheckReport,
                  max_report: int, submitted: Mapping[str, np.ndarray]) -> OutputResult:
    spec = vs.meta["outputs"][oname]
    exp = vs.outputs[oname]
    res = OutputResult(vs.name, oname, "pass", cases=vs.cases, operation=vs.meta["operation"])
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
                _input_text(vs, int(c), element, oname), code_distance(e_code, g_code, fmt),
                _trace(vs, submitted, oname, int(c), element)))
    return res


def _trace(vs: VectorSet, submitted: Mapping[str, np.ndarray], oname: str, case: int,
           element: tuple[int, ...] | None) -> list[str]:
    """The failing block's intermediate values, for quantize sets (FPS-CHK-4); [] elsewhere."""
    if vs.meta["operation"] != "quantize":
        return []
    from .explain import quantize_trace  # loaded only when a quantize output fails
    return quantize_trace(vs.meta, vs.inputs, vs.outputs, submitted, oname, case, element)


def _explain(vs: VectorSet, arrays: Mapping[str, np.ndarray], report: CheckReport) -> None:
    """For a failing set: the named choice its submitted outputs equal, where one exists."""
    from .explain import explain_mismatch  # loaded only when a set fails
    sentence = explain_mismatch(vs.meta, vs.inputs, arrays, expected=vs.outputs)
    if sentence:
        report.explanations[vs.name] = sentence


def _check_pack_entry(vs: VectorSet, arrays: dict[str, np.ndarray], pack: Pack, where: str) -> None:
    if RESULT_PACK_ENTRY not in arrays:
        return
    info = decode_meta(arrays[RESULT_PACK_ENTRY], where)
    if info.get("pack_id") != pack.pack_id or info.get("set_sha256", vs.sha256) != vs.sha256:
        raise IntegrityError(f"{where}: results were made against pack {str(info.get('pack_id'))[:12]}..., "
                             f"this pack is {pack.pack_id[:12]}... (another pack version)")


def split_globs(select: str | None) -> list[str]:
    """The globs of a comma-separated ``--select`` value."""
    return [g.strip() for g in (select or "").split(",") if g.strip()]


def select_names(names: Iterable[str], select: str | None) -> list[str]:
    """The names that match one of the globs of ``select`` (every name when there is none), sorted."""
    globs = split_globs(select)
    if not globs:
        return sorted(names)
    return sorted(n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs))


def _unmatched(names: list[str], globs: Iterable[str]) -> list[str]:
    return [g for g in globs if not any(fnmatch.fnmatchcase(n, g) for n in names)]


def empty_selections(pack: Pack, select: str | None, decl: Declaration) -> list[str]:
    """Each ``--select`` glob and each declaration ``sets`` glob that matches no set of the pack: a
    check that checks nothing for it is incomplete, not a pass (FPS-CHK-2, FPS-CNF-3)."""
    names = pack.names()
    out = [f"--select {g!r} matches no set of {pack.root}" for g in _unmatched(names, split_globs(select))]
    out += [f"declaration {decl.name}: sets {g!r} matches no set of {pack.root}"
            for g in _unmatched(names, decl.sets or ())]
    return out


def _results_for(results: ResultsDir | Mapping[str, Mapping[str, np.ndarray]],
                 name: str) -> tuple[dict[str, np.ndarray] | None, str]:
    """One set's results arrays (None: the results have none) and where they came from."""
    if isinstance(results, ResultsDir):
        where = f"{results.path}/{name}.npz" if results.path.is_dir() else f"{results.path}:{name}"
        return results.get(name), where
    return (dict(results[name]) if name in results else None), f"results[{name}]"


def _check_set(vs: VectorSet, arrays: dict[str, np.ndarray] | None, where: str, pack: Pack,
               decl: Declaration, report: CheckReport, max_report: int, explain: bool) -> bool:
    """Check every output of one set into ``report``; True when a declared output is missing."""
    name = vs.name
    if arrays is not None:
        _check_pack_entry(vs, arrays, pack, where)
        unknown = sorted(set(arrays) - {f"out_{k}" for k in vs.outputs} - {RESULT_PACK_ENTRY})
        if unknown:
            raise FpspecError(f"{where}: entries {unknown} are not outputs of set {name} "
                              f"(expected some of {sorted('out_' + k for k in vs.outputs)})")
    missing = failed = False
    op = vs.meta["operation"]
    for oname in sorted(vs.outputs):
        ok, why = decl.supports(vs.meta, oname) if decl.declared else (True, "")
        if not ok:
            report.outputs.append(OutputResult(name, oname, "not-supported", why, vs.cases, operation=op))
            continue
        got = None if arrays is None else arrays.get(f"out_{oname}")
        if got is None:
            missing = True
            report.outputs.append(OutputResult(name, oname, "missing", "declared but not in the results",
                                               vs.cases, operation=op))
            continue
        res = _check_output(vs, oname, got, decl, report, max_report, arrays or {})
        failed |= res.status == "fail"
        report.outputs.append(res)
    if failed and explain and arrays is not None:
        _explain(vs, arrays, report)
    return missing


def check(pack: Pack | str | Path, results: ResultsDir | Mapping[str, Mapping[str, np.ndarray]] | str | Path,
          *, select: str | None = None, declaration: Declaration | str | Path | None = None,
          max_report: int = 20, explain: bool = True) -> CheckReport:
    """Check results against a pack (FPS-CHK-1..7); never raises for mismatches (see the exit_code).

    ``declaration`` is a :class:`Declaration` or the path of a YAML / JSON declaration file
    (FPS-CHK-5); None checks every output of the selected sets.  ``explain``: for failing sets,
    name the choice the submitted outputs equal (:mod:`fpspec.vectors.explain`).
    """
    decl = declaration if isinstance(declaration, Declaration) else Declaration()
    rpath = (str(results) if isinstance(results, (str, Path)) else
             str(results.path) if isinstance(results, ResultsDir) else "<in-process>")
    report = CheckReport(str(pack.root if isinstance(pack, Pack) else pack), "", rpath, decl)
    try:
        if not isinstance(declaration, Declaration):
            decl = report.declaration = load_declaration(declaration)
        if not isinstance(pack, Pack):
            pack = Pack(pack)
        report.pack_id = pack.pack_id
        if isinstance(results, (str, Path)):
            results = ResultsDir(results)
        names = select_names(pack.names(), select)
        report.incomplete += empty_selections(pack, select, decl)
        missing_any = False
        for name in names:
            vs = pack.load(name)
            arrays, where = _results_for(results, name)
            missing_any |= _check_set(vs, arrays, where, pack, decl, report, max_report, explain)
        if names and all(o.status == "not-supported" for o in report.outputs):
            report.incomplete.append(f"declaration {decl.name} supports no output of the {len(names)} selected "
                                     "set(s): nothing was checked (FPS-CNF-3: X(D) must not be empty)")
        if isinstance(results, ResultsDir):
            known = set(pack.names())
            strays = sorted(results.names() - known)
            if strays:
                report.notes.append(f"results for sets the pack does not have (ignored): {', '.join(strays[:10])}"
                                    + (" ..." if len(strays) > 10 else ""))
        failed = any(o.status == "fail" for o in report.outputs)
        incomplete = missing_any or bool(report.incomplete)
        report.exit_code = EXIT_MISMATCH if failed else (EXIT_INCOMPLETE if incomplete else EXIT_PASS)
    except IntegrityError as exc:
        report.errors.append(str(exc))
        report.exit_code = EXIT_INTEGRITY
    except (FpspecError, OSError) as exc:
        report.errors.append(str(exc))
        report.exit_code = EXIT_USAGE
    return report


# ------------------------------------------------------------ writers
def _mismatch_lines(m: Mismatch) -> list[str]:
    where = f" element {m.element}" if m.element is not None else ""
    lines = [f"MISMATCH {m.set}/{m.output} case {m.case} key 0x{m.key:x}{where} tags [{','.join(m.tags)}]"]
    lines += [f"    in  {k:<9} {v}" for k, v in m.inputs.items()]
    lines.append(f"    expected      {field_text(m.expected, m.out_format)}")
    dist = "" if m.distance is None else f"   (code distance {m.distance:+d})"
    lines.append(f"    got           {field_text(m.got, m.out_format)}{dist}")
    lines += [f"    {t}" for t in m.trace]
    return lines


def _table_lines(report: CheckReport) -> list[str]:
    """The full table: one line per set and output (``--verbose``)."""
    lines = ["", f"{'set/output':<52} {'status':<13} {'cases':>7} {'bad':>7}  detail"]
    for o in report.outputs:
        detail = o.reason
        if o.status == "fail":
            detail = ", ".join(f"{k}:{v}" for k, v in sorted(o.tag_counts.items()))
        elif o.nan_equivalent:
            detail = f"{o.nan_equivalent} NaN codes accepted as equivalent (declared nan_payloads)"
        lines.append(f"{o.set + '/' + o.output:<52} {o.status:<13} {o.cases:>7} {o.mismatched_cases:>7}  {detail}")
    return lines


#: failing or missing outputs an operation's summary line names before it says "..."
_NAMED_PER_OPERATION = 3


def _operation_lines(report: CheckReport) -> list[str]:
    """One line per operation: its outputs by status, the failing and missing ones named."""
    ops: dict[str, list[OutputResult]] = {}
    for o in report.outputs:
        ops.setdefault(o.operation, []).append(o)
    lines = [""] if ops else []
    for op, outs in ops.items():
        counts: dict[str, int] = {}
        for o in outs:
            counts[o.status] = counts.get(o.status, 0) + 1
        sets = len({o.set for o in outs})
        text = f"{op:<9} {sets} set(s), {len(outs)} output(s): " + ", ".join(f"{k} {v}" for k, v in
                                                                          sorted(counts.items()))
        bad = [o for o in outs if o.status in ("fail", "missing")]
        named = [f"{o.set}/{o.output} ({o.mismatched_cases} of {o.cases} cases)" if o.status == "fail"
                 else f"{o.set}/{o.output} (missing from the results)" for o in bad[:_NAMED_PER_OPERATION]]
        if named:
            text += "; " + ", ".join(named) + (f", ... {len(bad) - len(named)} more" if len(bad) > len(named) else "")
        nan_eq = sum(o.nan_equivalent for o in outs)
        if nan_eq:
            text += f"; {nan_eq} NaN codes accepted as equivalent (declared nan_payloads)"
        lines.append(text)
    return lines


def format_text(report: CheckReport, max_report: int = 20, verbose: bool = False) -> str:
    """The human report (FPS-CHK-4): the first mismatches decoded field by field (with the failing
    block's intermediates for quantize sets), what each failing set's outputs equal, one summary
    line per operation (``verbose``: the full table of sets and outputs as well), the counts by
    tag and the exit status."""
    lines = [f"fpspec check: pack {report.pack} (id {report.pack_id[:12]}), results {report.results}, "
             f"declaration {report.declaration.name}"]
    lines += [f"ERROR: {e}" for e in report.errors]
    lines += [f"NOTE: {n}" for n in report.notes]
    lines += [f"INCOMPLETE: {n}" for n in report.incomplete]
    for m in report.mismatches[:max_report]:
        lines += _mismatch_lines(m)
    lines += [f"EXPLAIN {name}: {text}" for name, text in report.explanations.items()]
    if verbose and report.outputs:
        lines += _table_lines(report)
    lines += _operation_lines(report)
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
    for why in report.incomplete:  # a selection that checks nothing fails the suite, never passes it
        cases.append(f'  <testcase classname="fpspec.vectors" name="selection"><failure message={quoteattr(why)}/>'
                     '</testcase>')
    failures = c.get("fail", 0) + c.get("missing", 0) + len(report.incomplete)
    xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="fpspec-check" tests="{len(cases)}" '
           f'failures="{failures}" errors="{len(report.errors)}" '
           f'skipped="{c.get("not-supported", 0)}">\n' + "\n".join(cases) + "\n</testsuite>\n")
    write_text(path, xml)
