"""The checker: exit codes, reports, declarations, results layouts, harness (FPS-CHK-*)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.vectors.checker import check, format_text
from fpspec.vectors.declare import Declaration
from fpspec.vectors.harness import Harness
from fpspec.vectors.ops import compute
from fpspec.vectors.pack import Pack, write_npz
from fpspec.vectors.pytest_helper import assert_set, vector_sets
from fpspec.vectors.results import write_results

PACK = Path(__file__).resolve().parent.parent / "vectors" / "v1"
SMALL = "decode-e2m1,decode-e4m3,encode-fp32-e2m1-boundary,sr-fp32-e2m1-sr-add-8"
#: One or more sets of every operation and coverage model.  (That the fast path gives every
#: committed output is also shown by tests/test_vectors_pack.py: the generator uses it.)
REPRESENTATIVE = ",".join([SMALL, "decode-bf16", "encode-bf16-ue8m0-exhaustive", "encode-fp32-ue5m3-boundary",
                           "sr-fp32-e4m3-sr-unbiased-8", "quantize-ue5m3-seed-fp32-16x16",
                           "quantize-nvfp4-te-fp32-1x16-colwise-rht", "quantize-mxfp4-even-1x32",
                           "bounds-ue5m3-exact-1x16-t2048", "gemm-order-independent-ue5m3",
                           "gemm-km-h100-bf16-bf16-wide"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """fpspec's fast path as the implementation under test, through the CLI (FPS-CHK-6)."""
    out = tmp_path_factory.mktemp("ref")
    assert main(["vectors", "run-reference", str(PACK), "--out", str(out), "--quiet",
                 "--select", REPRESENTATIVE]) == 0
    return out


@pytest.fixture()
def small(reference, tmp_path) -> Path:
    out = tmp_path / "res"
    out.mkdir()
    for n in SMALL.split(","):
        shutil.copy(reference / f"{n}.npz", out / f"{n}.npz")
    return out


def _rewrite(path: Path, **changes: np.ndarray) -> None:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    write_npz(path, list(arrays.items()))


def test_reference_passes_end_to_end(reference, tmp_path, capsys):
    """FPS-CHK-6, FPS-CHK-1: fpspec's fast path passes; JSON and JUnit reports are written."""
    rep, junit = tmp_path / "r.json", tmp_path / "r.xml"
    assert main(["check", str(PACK), str(reference), "--select", REPRESENTATIVE,
                 "--report", str(rep), "--junit", str(junit)]) == 0
    out = capsys.readouterr().out
    assert "summary: pass" in out and "fail" not in out.split("summary:")[1]
    data = json.loads(rep.read_text())
    sel = set(REPRESENTATIVE.split(","))
    n_outputs = sum(len(e["outputs"]) for e in Pack(PACK).manifest["sets"] if e["name"] in sel)
    assert data["status"] == "pass" and data["counts"] == {"pass": n_outputs}
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == str(n_outputs) and suite.get("failures") == "0"


def test_mismatch_is_reported_field_by_field(small, capsys, tmp_path):
    """FPS-CHK-2, FPS-CHK-3, FPS-CHK-4: one flipped code -> exit 1, decoded report, tag counts."""
    vs = Pack(PACK).load("encode-fp32-e2m1-boundary")
    x = vs.inputs["x"].view(np.float32)
    i = int(np.flatnonzero(x == np.float32(2.5))[0])  # a tie: RNE gives 2 (0x4)
    with np.load(small / "encode-fp32-e2m1-boundary.npz") as z:
        rne = z["out_rne"].copy()
    assert rne[i] == 0x4
    rne[i] = 0x5  # what ties-away would give
    _rewrite(small / "encode-fp32-e2m1-boundary.npz", out_rne=rne)
    rep = tmp_path / "r.json"
    code = main(["check", str(PACK), str(small), "--select", SMALL, "--report", str(rep)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"MISMATCH encode-fp32-e2m1-boundary/rne case {i} key 0x40200000" in out
    assert "in  x         0x40200000 fp32 s=0 e=10000000 m=01000000000000000000000 = 2.5 (5/2)" in out
    assert "expected      0x4 e2m1 s=0 e=10 m=0 = 2" in out
    assert "got           0x5 e2m1 s=0 e=10 m=1 = 3   (code distance +1)" in out
    assert "encode-fp32-e2m1-boundary/rne" in out and " fail " in out
    assert "mismatched cases by tag:" in out and "tie=1" in out
    data = json.loads(rep.read_text())
    assert data["exit_code"] == 1 and data["mismatches"][0]["expected"] == 4 and data["mismatches"][0]["got"] == 5


def test_max_report_limits_printed_mismatches(small, capsys):
    """FPS-CHK-4: --max-report N prints at most N decoded mismatches; counts stay complete."""
    with np.load(small / "decode-e4m3.npz") as z:
        v = z["out_value"].copy()
    v[:50] ^= np.uint32(1)
    _rewrite(small / "decode-e4m3.npz", out_value=v)
    assert main(["check", str(PACK), str(small), "--select", SMALL, "--max-report", "3", "--verbose"]) == 1
    out = capsys.readouterr().out
    assert out.count("MISMATCH ") == 3
    assert "decode-e4m3/value" in out and "     50  " in out
    assert "decode    2 set(s), 2 output(s): fail 1, pass 1; decode-e4m3/value (50 of 256 cases)" in out


def test_wrong_dtype_or_shape_is_a_usage_error(small, capsys):
    """FPS-CHK-2: a results array of the wrong dtype or shape exits 2 with the expected layout."""
    with np.load(small / "decode-e2m1.npz") as z:
        v = z["out_value"]
    _rewrite(small / "decode-e2m1.npz", out_value=v.astype(np.int64))
    assert main(["check", str(PACK), str(small), "--select", SMALL]) == 2
    assert "expects uint32[16]" in capsys.readouterr().out
    _rewrite(small / "decode-e2m1.npz", out_value=v[:8])
    assert main(["check", str(PACK), str(small), "--select", SMALL]) == 2
    _rewrite(small / "decode-e2m1.npz", out_value=v, out_bogus=v)
    assert main(["check", str(PACK), str(small), "--select", SMALL]) == 2
    assert "not outputs of set decode-e2m1" in capsys.readouterr().out


def test_usage_errors(small, tmp_path, capsys):
    """FPS-CHK-2: no such results, a bad declaration: exit 2."""
    assert main(["check", str(PACK), str(tmp_path / "nope")]) == 2
    bad = tmp_path / "d.yaml"
    bad.write_text("formats: [e2m1]\nflavour: vanilla\n")
    assert main(["check", str(PACK), str(small), "--declare", str(bad)]) == 2
    assert "unknown keys ['flavour']" in capsys.readouterr().err


def test_results_from_another_pack_are_refused(small, capsys):
    """FPS-CHK-7: a __pack__ stamp naming another pack id is an integrity error (exit 3)."""
    from fpspec.vectors.schema import encode_meta
    _rewrite(small / "decode-e2m1.npz",
             __pack__=encode_meta({"pack_id": "0" * 64, "set": "decode-e2m1", "set_sha256": "x"}))
    assert main(["check", str(PACK), str(small), "--select", SMALL]) == 3
    assert "another pack version" in capsys.readouterr().out


def test_tampered_pack_is_an_integrity_error(small, tmp_path, capsys):
    """FPS-CHK-7, FPS-VEC-5: checking against a modified pack exits 3."""
    pack = tmp_path / "pack"
    pack.mkdir()
    m = json.loads((PACK / "MANIFEST.json").read_text())
    names = SMALL.split(",")
    for n in names:
        shutil.copy(PACK / f"{n}.npz", pack / f"{n}.npz")
    m["sets"] = [e for e in m["sets"] if e["name"] in names]
    from fpspec.vectors.pack import pack_id_of
    m["pack_id"] = pack_id_of(m["sets"])
    (pack / "MANIFEST.json").write_text(json.dumps(m))
    with np.load(pack / "decode-e2m1.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["out_value"] = arrays["out_value"].copy()
    arrays["out_value"][3] = 0
    write_npz(pack / "decode-e2m1.npz", list(arrays.items()))
    assert main(["check", str(pack), str(small)]) == 3
    assert "corrupted or tampered" in capsys.readouterr().out


def test_declaration_scopes_the_check(small, tmp_path, capsys):
    """FPS-CHK-5: undeclared outputs are not-supported (not failures); declared but missing -> exit 4."""
    decl = tmp_path / "impl.yaml"
    decl.write_text("name: e2m1-rne-only\noperations: [encode]\nformats: [e2m1, fp32]\n"
                    "rounding: {e2m1: [rne, rtz]}\n")
    assert main(["check", str(PACK), str(small), "--select", SMALL, "--declare", str(decl), "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "encode-fp32-e2m1-boundary/rne " in out and "encode-fp32-e2m1-boundary/rna " in out
    assert "rounding rna not declared" in out and "operation decode not declared" in out
    assert "rounding sr-add/8 not declared" in out
    (small / "encode-fp32-e2m1-boundary.npz").unlink()
    assert main(["check", str(PACK), str(small), "--select", SMALL, "--declare", str(decl)]) == 4
    assert "encode-fp32-e2m1-boundary/rne (missing from the results)" in capsys.readouterr().out
    # no declaration: everything in the selection is expected
    assert main(["check", str(PACK), str(small), "--select", SMALL]) == 4


def test_nan_payloads_only_by_declaration(small, tmp_path):
    """FPS-CHK-3: another NaN code fails bit equality unless the declaration names nan_payloads."""
    with np.load(small / "decode-e4m3.npz") as z:
        v = z["out_value"].copy()
    v[0x7F] = 0x7FC00001  # another quiet NaN
    _rewrite(small / "decode-e4m3.npz", out_value=v)
    strict = check(PACK, small, select="decode-e4m3")
    assert strict.exit_code == 1 and strict.mismatches[0].tags == ["nan_input"]
    lax = check(PACK, small, select="decode-e4m3", declaration=Declaration.from_mapping({"nan_payloads": ["e4m3"]}))
    assert lax.exit_code == 0 and lax.outputs[0].nan_equivalent == 1
    v[0x7F] = 0x3F800000  # 1.0 is not a NaN: still a failure
    _rewrite(small / "decode-e4m3.npz", out_value=v)
    lax = check(PACK, small, select="decode-e4m3", declaration=Declaration.from_mapping({"nan_payloads": ["e4m3"]}))
    assert lax.exit_code == 1


def test_single_npz_results(reference, tmp_path):
    """FPS-CHK-1: results may also be one .npz with <set>/out_<name> keys."""
    entries = []
    for n in SMALL.split(","):
        with np.load(reference / f"{n}.npz") as z:
            entries += [(f"{n}/{k}", z[k]) for k in z.files if k.startswith("out_")]
    path = tmp_path / "all.npz"
    write_npz(path, entries)
    assert main(["check", str(PACK), str(path), "--select", SMALL]) == 0


def test_harness_in_process():
    """FPS-CHK-8: iterate sets, feed inputs, submit outputs, get the checker's report."""
    h = Harness(PACK, select="encode-fp16-e2m1-exhaustive,decode-ue5m3")
    seen = []
    for s in h.sets():
        seen.append(s.name)
        outs = compute(s.meta, s.inputs, "fast")
        if s.name == "decode-ue5m3":
            outs["value"] = outs["value"].copy()
            outs["value"][0x10] ^= np.uint32(1 << 3)
        s.submit(outs)
    assert seen == ["decode-ue5m3", "encode-fp16-e2m1-exhaustive"]
    rep = h.report()
    assert rep.exit_code == 1 and len(rep.mismatches) == 1 and rep.mismatches[0].key == 0x10
    assert "MISMATCH decode-ue5m3/value case 16 key 0x10" in format_text(rep)


@vector_sets(PACK, select="decode-e*,sr-fp32-e2m1-sr-unbiased-16")
def test_pytest_helper_turns_sets_into_tests(vector_set):
    """FPS-CHK-8: each selected set is one test; fpspec's own outputs pass."""
    assert vector_set.outputs
    assert_set(vector_set, compute(vector_set.meta, vector_set.inputs, "fast"))


def test_pytest_helper_failure_message():
    """FPS-CHK-8: assert_set raises AssertionError carrying the decoded report."""
    h = Harness(PACK, select="decode-e2m1")
    s = next(h.sets())
    bad = compute(s.meta, s.inputs, "fast")["value"].copy()
    bad[1] = np.float32(0.75).view(np.uint32)
    with pytest.raises(AssertionError, match=r"MISMATCH decode-e2m1/value case 1 key 0x1"):
        assert_set(s, {"value": bad})


def test_results_writer_stamps_the_pack(tmp_path):
    """FPS-CHK-1, FPS-CHK-7: written results carry the pack id and set hash."""
    pack = Pack(PACK)
    vs = pack.load("decode-e2m1")
    p = write_results(tmp_path, pack, vs, compute(vs.meta, vs.inputs, "fast"))
    with np.load(p, allow_pickle=False) as z:
        stamp = json.loads(z["__pack__"].tobytes())
    assert stamp == {"pack_id": pack.pack_id, "set": "decode-e2m1", "set_sha256": vs.sha256}


def test_report_maps_elements_back_to_inputs():
    """FPS-CHK-4: a columnwise set's output element (i, j) came from input x[j, i]; a GEMM
    output (i, j) from row i of A and row j of BT."""
    pack = Pack(PACK)
    name = "quantize-ue5m3-seed-fp32-1x16-colwise"
    vs = pack.load(name)
    outs = compute(vs.meta, vs.inputs, "fast")
    outs["codes"] = outs["codes"].copy()
    outs["codes"][1, 2, 5] ^= 1
    rep = check(pack, {name: {f"out_{k}": v for k, v in outs.items()}}, select=name)
    m = rep.mismatches[0]
    assert m.element == [2, 5]
    x = int(vs.inputs["x"][1, 5, 2])
    assert m.inputs["x"].startswith(f"[5,2] 0x{x:08x} fp32")
    name = "gemm-km-h100-fp8-e4m3-wide"
    vs = pack.load(name)
    outs = compute(vs.meta, vs.inputs, "fast")
    outs["c"] = outs["c"].copy()
    outs["c"][0, 4, 5] ^= 1
    rep = check(pack, {name: {f"out_{k}": v for k, v in outs.items()}}, select=name)
    assert rep.mismatches[0].inputs == {"a": "row 4 of uint8[8, 256] (e4m3)", "bt": "row 5 of uint8[8, 256] (e4m3)"}
    assert rep.mismatches[0].distance == 1


def test_unknown_result_files_are_named(small, capsys):
    """FPS-CHK-4: results for sets the pack lacks (a typo in a set name) are listed, not silently dropped."""
    shutil.copy(small / "decode-e2m1.npz", small / "decode-e2m1-typo.npz")
    assert main(["check", str(PACK), str(small), "--select", SMALL]) == 0
    assert "NOTE: results for sets the pack does not have (ignored): decode-e2m1-typo" in capsys.readouterr().out


# ------------------------------------------------------------ a check that checks nothing (FPS-CNF-3)
EMPTY_SELECTIONS = [
    # (case id, --select, declaration text or None, expected stderr lines after "fpspec check: incomplete: ")
    ("select-typo", "no-such-*", None, [r"--select 'no-such-\*' matches no set of .*vectors/v1$"]),
    ("select-one-glob-of-two", "decode-e2m1,decod-e4m3", None, [r"--select 'decod-e4m3' matches no set of "]),
    ("declaration-sets-typo", "decode-e2m1", "name: typo\nsets: [decod-*]\n",
     [r"declaration typo: sets 'decod-\*' matches no set of ",
      r"declaration typo supports no output of the 1 selected set\(s\): nothing was checked "
      r"\(FPS-CNF-3: X\(D\) must not be empty\)"]),
    ("declaration-one-sets-glob-of-two", "decode-e2m1", "name: half\nsets: [decode-e2m1, quantiz-*]\n",
     [r"declaration half: sets 'quantiz-\*' matches no set of "]),
    ("declaration-selects-nothing", SMALL, "name: gemm-only\noperations: [gemm]\n",
     [r"declaration gemm-only supports no output of the 4 selected set\(s\): nothing was checked"]),
]


@pytest.mark.parametrize("select, declaration, messages", [c[1:] for c in EMPTY_SELECTIONS],
                         ids=[c[0] for c in EMPTY_SELECTIONS])
def test_a_pattern_that_matches_nothing_is_incomplete(small, tmp_path, capsys, select, declaration, messages):
    """FPS-CHK-2, FPS-CNF-3: a --select glob or a declaration sets glob that matches no set, and a
    declaration that selects no output, make the check incomplete (exit 4), never a pass; each is
    named on stderr and in the JSON report (status incomplete)."""
    import re

    argv = ["check", str(PACK), str(small), "--select", select, "--report", str(tmp_path / "r.json"),
            "--junit", str(tmp_path / "r.xml")]
    if declaration is not None:
        (tmp_path / "d.yaml").write_text(declaration)
        argv += ["--declare", str(tmp_path / "d.yaml")]
    assert main(argv) == 4
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == len(messages), err
    for line, pattern in zip(err, messages):
        assert line.startswith("fpspec check: incomplete: ") and re.search(pattern, line), line
    assert captured.out.count("INCOMPLETE: ") == len(messages)
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["status"] == "incomplete" and data["exit_code"] == 4 and len(data["incomplete"]) == len(messages)
    selection = [t for t in ET.parse(tmp_path / "r.xml").getroot() if t.get("name") == "selection"]
    assert [t.find("failure").get("message") for t in selection] == data["incomplete"]


def test_a_mismatch_outranks_an_empty_glob(small, capsys):
    """FPS-CHK-2: the order 3, 2, 1, 4: a wrong answer beside a glob matching nothing exits 1."""
    with np.load(small / "decode-e2m1.npz") as z:
        v = z["out_value"].copy()
    v[3] ^= np.uint32(1)
    _rewrite(small / "decode-e2m1.npz", out_value=v)
    assert main(["check", str(PACK), str(small), "--select", "decode-e2m1,no-such-*"]) == 1
    assert "INCOMPLETE: --select 'no-such-*' matches no set" in capsys.readouterr().out


def test_check_api_takes_a_declaration_path(small, tmp_path):
    """FPS-CHK-5, FPS-CHK-8: fpspec.check(pack, results, declaration=PATH) reads the file, as
    --declare does; a missing file is a usage error in the report (exit 2), not an exception."""
    import fpspec

    decl = tmp_path / "impl.yaml"
    decl.write_text("name: e2m1-rne\noperations: [encode]\nformats: [e2m1, fp32]\nrounding: {e2m1: [rne]}\n")
    for given in (decl, str(decl)):
        rep = fpspec.check(PACK, small, select=SMALL, declaration=given)
        assert rep.exit_code == 0 and rep.declaration.name == "e2m1-rne"
        assert [(o.set, o.output) for o in rep.outputs if o.status == "pass"] == [("encode-fp32-e2m1-boundary", "rne")]
    rep = fpspec.check(PACK, small, select=SMALL, declaration=tmp_path / "nope.yaml")
    assert rep.exit_code == 2 and rep.errors == [f"{tmp_path / 'nope.yaml'}: no such declaration file"]


def test_default_report_is_one_line_per_operation(small, tmp_path, capsys):
    """FPS-CHK-4: by default one summary line per operation; --verbose adds the table of every set
    and output; --report JSON holds every output either way."""
    argv = ["check", str(PACK), str(small), "--select", SMALL, "--report", str(tmp_path / "r.json")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "decode    2 set(s), 2 output(s): pass 2" in out.splitlines()
    assert "encode    2 set(s), 7 output(s): pass 7" in out.splitlines()
    assert "set/output" not in out and "decode-e2m1/value" not in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert len(data["outputs"]) == 9 and {o["operation"] for o in data["outputs"]} == {"decode", "encode"}
    assert main(argv + ["--verbose"]) == 0
    out = capsys.readouterr().out
    assert "set/output" in out and any(line.startswith("decode-e2m1/value ") and " pass " in line
                                       for line in out.splitlines())


# ------------------------------------------------------------ harness: numpy like torch, sets as objects
def _float_view(a: np.ndarray) -> np.ndarray:
    import ml_dtypes
    return a.view({1: ml_dtypes.float8_e4m3fn, 2: np.float16, 4: np.float32}[a.dtype.itemsize])


@pytest.mark.parametrize("convert, by_object", [
    (lambda a: a, False),                      # bit patterns, by name
    (lambda a: a, True),                       # bit patterns, by the set object
    (_float_view, False),                      # float arrays of the output's width: their bits
    (_float_view, True),
])
def test_harness_takes_numpy_floats_as_bits(convert, by_object):
    """FPS-CHK-8, FPS-CHK-9: a float32 array for an fp32 output (and any NumPy or ml_dtypes float of
    the output's width) is taken as its bit patterns, as torch tensors are; submit takes the set
    object as well as its name."""
    h = Harness(PACK, select="decode-e4m3,encode-fp32-e4m3-boundary")
    for s in h.sets():
        outs = {k: convert(v) for k, v in compute(s.meta, s.inputs, "fast").items()}
        h.submit(s if by_object else s.name, outs)
    rep = h.report()
    assert rep.exit_code == 0 and rep.counts() == {"pass": 7}


def test_harness_refuses_what_it_cannot_take():
    """FPS-CHK-8: a float of another width, an object that is not a set: one message each."""
    h = Harness(PACK, select="decode-e2m1")
    s = next(h.sets())
    value = compute(s.meta, s.inputs, "fast")["value"]
    with pytest.raises(FpspecError, match=r"decode-e2m1/value: a float64 array cannot hold the output's uint32 "
                                          r"bit patterns \(8 bytes per element, the output has 4\)"):
        s.submit({"value": value.view(np.float32).astype(np.float64)})
    with pytest.raises(FpspecError, match=r"submit takes a set name or a set of Harness\.sets\(\), got a "
                                          r"builtins\.int"):
        h.submit(5, {"value": value})
    with pytest.raises(FpspecError, match=r"no set named 'decode-e9m9'"):
        h.submit("decode-e9m9", {"value": value})
    h.submit(s.vs, {"value": value.view(np.float32)})  # the VectorSet itself is taken too
    assert h.report().exit_code == 0


def test_vector_sets_over_nothing_is_refused():
    """FPS-CHK-8, FPS-CNF-3: a pytest parametrization over no set is an error naming the glob."""
    with pytest.raises(FpspecError, match=r"no set of .* has an output the declaration undeclared supports "
                                          r"\(--select 'decod-\*' matches no set of"):
        vector_sets(PACK, select="decod-*")
