"""The checker on failing quantize and encode sets: the failing block's intermediates and the named
choice the submitted outputs equal (FPS-CHK-4, fpspec/vectors/explain.py)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from fpspec.cli import main
from fpspec.exact.blocks import block_trace_exact, quantize_view_exact
from fpspec.schemes import resolve_spec
from fpspec.vectors import explain
from fpspec.vectors.checker import check, format_text
from fpspec.vectors.explain import explain_mismatch
from fpspec.vectors.ops import compute
from fpspec.vectors.pack import Pack
from fpspec.vectors.results import write_results

from test_check import PACK

F32 = np.float32
CASE, ROW, COL = 10, 2, 21  # an element of block (2, 1) of case 10 (1x16 blocks): normal values and scales


@pytest.fixture(scope="module")
def pack() -> Pack:
    return Pack(PACK)


def _as_results(outs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {f"out_{k}": v for k, v in outs.items()}


def _flip_code(pack: Pack, name: str, element=(CASE, ROW, COL)):
    """fpspec's outputs of a set with one payload code changed (its neighbour: code ^ 1)."""
    vs = pack.load(name)
    outs = {k: v.copy() for k, v in compute(vs.meta, vs.inputs, "fast").items()}
    outs["codes"][element] ^= 1
    return vs, outs


def _line(text: str, start: str) -> str:
    return next(line.strip() for line in text.splitlines() if line.strip().startswith(start))


def test_binary32_profile_trace(pack):
    """FPS-CHK-4, FPS-BLK-8: a te-fp32 mismatch shows g, a_B, the binary32 unrounded scale with its
    bits, the scale code, and for the element x, the binary32 x * multiplier before payload
    rounding, the expected and submitted codes; each value recomputed here in NumPy binary32."""
    name = "quantize-nvfp4-te-fp32-1x16"
    vs, outs = _flip_code(pack, name)
    rep = check(pack, {name: _as_results(outs)}, select=name)
    assert rep.exit_code == 1
    text = format_text(rep)
    x = vs.inputs["x"][CASE].view(F32)
    g = vs.inputs["amax"][CASE].view(F32)
    a_b = np.abs(x[ROW, 16:32]).max()
    ge = min(F32(F32(6 * 448) / g), np.finfo(F32).max)
    sc = min(F32(a_b * F32(ge * F32(F32(1) / F32(6)))), F32(448))
    code = int(vs.outputs["scales"][CASE, ROW, 1])
    s = F32(np.array([code], np.uint8).view(ml_dtypes.float8_e4m3fn)[0])
    mult = F32(F32(1) / F32(s * F32(F32(1) / ge)))
    y = F32(x[ROW, COL] * mult)
    bits = lambda v: int(np.array(F32(v)).view(np.uint32))  # noqa: E731
    assert _line(text, "block [2, 1] of case 10") == (
        f"block [2, 1] of case 10: tensor amax g = {str(g)} (binary32 0x{bits(g):08x}), "
        f"block amax a_B = {float(Fraction(float(a_b))):.9g} (exactly {Fraction(float(a_b))})")
    assert _line(text, "unrounded scale").startswith(
        f"unrounded scale {str(sc)} (binary32 0x{bits(sc):08x}) -> scale code 0x{code:02x} ue4m3 ")
    assert f", submitted 0x{code:02x} ue4m3 " in _line(text, "unrounded scale")  # the scale itself is right
    xe = x[ROW, COL]
    assert _line(text, "element [2, 21]") == (f"element [2, 21]: x = {str(xe)} (binary32 0x{bits(xe):08x}), "
                                             f"scaled before payload rounding {str(y)} (binary32 0x{bits(y):08x})")
    want, got = int(vs.outputs["codes"][CASE, ROW, COL]), int(outs["codes"][CASE, ROW, COL])
    assert _line(text, "expected code").startswith(f"expected code 0x{want:x} e2m1 ")
    assert f", submitted 0x{got:x} e2m1 " in _line(text, "expected code")
    assert _line(text, "expected dequant").startswith("expected dequant 0x")


def test_exact_profile_trace_is_exact(pack):
    """FPS-CHK-4, FPS-BLK-2: for an exact profile the unrounded scale u_B = a_B T / g and the scaled
    element x G / s_B are printed as exact fractions."""
    name = "quantize-ue5m3-exact-1x16"
    vs, outs = _flip_code(pack, name)
    text = format_text(check(pack, {name: _as_results(outs)}, select=name))
    x = vs.inputs["x"][CASE].view(F32)
    g = Fraction(float(vs.inputs["amax"][CASE].view(F32)))
    a_b = max(abs(Fraction(float(v))) for v in x[ROW, 16:32])
    u_b = a_b * 448 / g
    assert _line(text, "unrounded scale").startswith(f"unrounded scale {float(u_b):.9g} (exactly {u_b}) -> ")
    code = int(vs.outputs["scales"][CASE, ROW, 1])
    s = Fraction(2) ** (((code >> 3) & 31) - 15) * (1 + Fraction(code & 7, 8))  # UE5M3, normal scales here
    scaled = Fraction(float(x[ROW, COL])) * 6 * 448 / g / s
    assert _line(text, "element [2, 21]").endswith(f"scaled before payload rounding {float(scaled):.9g} "
                                                 f"(exactly {scaled})")


def test_mx_profile_trace_names_the_exponent(pack):
    """FPS-CHK-4, FPS-BLK-12: an MX block's scale is its exponent e = floor(log2 a_B) - 2 (floor rule)."""
    name = "quantize-mxfp4-floor-1x32"
    vs, outs = _flip_code(pack, name, (CASE, ROW, 5))
    text = format_text(check(pack, {name: _as_results(outs)}, select=name))
    a_b = max(abs(Fraction(float(v))) for v in vs.inputs["x"][CASE].view(F32)[ROW])
    e = math.floor(math.log2(a_b)) - 2
    assert _line(text, "exponent e =").startswith(f"exponent e = {e} -> scale code 0x{e + 127:02x} ue8m0 ")
    assert "block [2, 0] of case 10: tensor amax g = " in text


def test_scale_mismatch_trace(pack):
    """FPS-CHK-4: a wrong scale code names its block (not an element of x), shows the expected and
    submitted scale codes, and the block's first element whose code differs."""
    name = "quantize-nvfp4-te-fp32-1x16"
    vs = pack.load(name)
    outs = {k: v.copy() for k, v in compute(vs.meta, vs.inputs, "fast").items()}
    outs["scales"][CASE, ROW, 1] += 1
    outs["codes"][CASE, ROW, 19] ^= 1
    rep = check(pack, {name: _as_results(outs)}, select=name)
    m = next(m for m in rep.mismatches if m.output == "scales")
    assert m.inputs["x"] == "array uint32[16, 32], block [2, 1] of its scale grid"
    want = int(vs.outputs["scales"][CASE, ROW, 1])
    assert f"-> scale code 0x{want:02x} ue4m3 " in m.trace[1] and f", submitted 0x{want + 1:02x} ue4m3 " in m.trace[1]
    assert m.trace[2].startswith("element [2, 19]: ")


def test_trace_is_the_quantizer():
    """FPS-BLK-15: block_trace_exact gives the codes, scales and dequantized values of
    quantize_view_exact, block by block, for every profile family."""
    x = np.random.default_rng(5).normal(size=(16, 32)).astype(np.float32) * 3
    g = float(np.abs(x).max())
    for scheme, profile, tile in (("ue5m3", "exact", "BxB"), ("ue5m3", "seed-fp32", "1xB"), ("nvfp4", "te-fp32", "1xB"),
                                  ("nvfp4", "torchao-0.18", "1xB"), ("mxfp4", "floor", "1xB"),
                                  ("mxfp4", "microxcaling", "1xB"), ("mxfp8", "rceil", "1xB")):
        spec = resolve_spec(scheme, profile, tile=tile)
        full = quantize_view_exact(x, spec, g)
        for block in np.ndindex(full.scales.shape):
            t = block_trace_exact(x, spec, g, block)
            assert t.scale_code == full.scales[block], (profile, block)
            assert all(el.code == full.codes[el.index] and el.value == full.dequant[el.index] for el in t.elements)
            assert len(t.elements) == spec.block * (spec.block if tile == "BxB" else 1)


# ------------------------------------------------------------ what the outputs equal
def _quantized_as(vs, **params) -> dict[str, np.ndarray]:
    meta = dict(vs.meta, params=dict(vs.meta["params"], **params))
    return compute(meta, vs.inputs, "fast")


def _encoded_as(vs, oname: str, source: str) -> dict[str, np.ndarray]:
    """fpspec's outputs of an encode set, with output ``oname`` replaced by output ``source``'s."""
    outs = dict(compute(vs.meta, vs.inputs, "fast"))
    outs[oname] = outs[source]
    return outs


EXPLAINED = [
    # (set, how the submitted outputs are made, the sentence)
    ("quantize-nvfp4-te-fp32-1x16", lambda vs: _quantized_as(vs, profile="te-kernel"),
     "your outputs match nvfp4/te-kernel"),
    ("quantize-ue5m3-seed-fp32-1x16", lambda vs: _quantized_as(vs, profile="seed-portable"),
     "your outputs match ue5m3/seed-portable"),
    ("quantize-ue5m3-exact-1x16", lambda vs: _quantized_as(vs, zero_scale_rule=False),
     "your outputs match ue5m3/exact with the zero-scale rule off"),
    ("quantize-ue5m3-exact-1x16", lambda vs: _quantized_as(vs, target=2048.0),
     "your outputs match ue5m3/exact with T = 2048 (not 448)"),
    ("quantize-ue5m3-exact-1x16", lambda vs: _quantized_as(vs, scale_format="ue5m3fnu"),
     "your outputs match ue5m3/exact with scale format ue5m3fnu"),
    ("quantize-mxfp4-floor-1x32", lambda vs: _quantized_as(vs, rounding="rna"),
     "your outputs match mxfp4/floor with payload rounding rna"),
    ("encode-fp32-e2m1-boundary", lambda vs: _encoded_as(vs, "rne", "rna"),
     "your rne output matches encode to e2m1 with rounding rna"),
    ("encode-fp32-e4m3-boundary", lambda vs: _encoded_as(vs, "rne", "rne_ovf_sat"),
     "your rne output matches encode to e4m3 rne with overflow=sat"),
]


@pytest.mark.parametrize("name, make, sentence", EXPLAINED, ids=[f"{c[0]}:{c[2][17:]}" for c in EXPLAINED])
def test_failing_outputs_are_named(pack, name, make, sentence):
    """FPS-CHK-4: the submitted outputs of a failing set, recomputed by fpspec under another named
    choice, are recognised bit for bit: other profile, zero-scale rule, T, scale format, payload
    rounding; for encode sets another rounding mode or policy."""
    vs = pack.load(name)
    outs = make(vs)
    assert explain_mismatch(vs.meta, vs.inputs, outs, expected=vs.outputs) == sentence
    assert explain_mismatch(vs.meta, vs.inputs, _as_results(outs)) == sentence  # out_ names; fpspec's expected
    rep = check(pack, {name: _as_results(outs)}, select=name)
    assert rep.exit_code == 1 and rep.explanations == {name: sentence}


def test_explanation_is_printed_after_the_mismatches_and_in_json(pack, tmp_path, capsys):
    """FPS-CHK-4: the sentence follows the first mismatches in the text report and is in --report."""
    name = "quantize-nvfp4-te-fp32-1x16"
    vs = pack.load(name)
    write_results(tmp_path / "res", pack, vs, _quantized_as(vs, profile="te-kernel"))
    assert main(["check", str(PACK), str(tmp_path / "res"), "--select", name, "--max-report", "2",
                 "--report", str(tmp_path / "r.json")]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = lines.index(f"EXPLAIN {name}: your outputs match nvfp4/te-kernel")
    assert max(i for i, line in enumerate(lines) if line.startswith("MISMATCH ")) < at
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["explanations"] == {name: "your outputs match nvfp4/te-kernel"}
    assert data["mismatches"][0]["trace"][0].startswith("block [")


def test_no_explanation_for_an_unnamed_fault(pack):
    """FPS-CHK-4: a code flipped at random equals no named choice: no sentence, no EXPLAIN line."""
    name = "quantize-nvfp4-te-fp32-1x16"
    vs, outs = _flip_code(pack, name)
    assert explain_mismatch(vs.meta, vs.inputs, outs, expected=vs.outputs) is None
    assert "EXPLAIN" not in format_text(check(pack, {name: _as_results(outs)}, select=name))
    # and a set that passes is never explained
    assert explain_mismatch(vs.meta, vs.inputs, compute(vs.meta, vs.inputs, "fast"), expected=vs.outputs) is None


def test_a_registered_provider_explains(pack, monkeypatch):
    """The extension point: a provider registered in CANDIDATE_PROVIDERS (as the mutant catalogue
    will) names outputs the built-in choices do not."""
    name = "quantize-nvfp4-te-fp32-1x16"
    vs, outs = _flip_code(pack, name)

    def provider(meta):
        if meta["name"] == name:
            yield "nvfp4/te-fp32 with one code off by one", lambda inputs: outs
    monkeypatch.setattr(explain, "CANDIDATE_PROVIDERS", list(explain.CANDIDATE_PROVIDERS))
    explain.register_candidates(provider)
    explain.register_candidates(provider)  # once only
    assert explain.CANDIDATE_PROVIDERS.count(provider) == 1
    assert explain_mismatch(vs.meta, vs.inputs, outs, expected=vs.outputs) == \
        "your outputs match nvfp4/te-fp32 with one code off by one"
