"""Mutation testing: the committed pack fails every mutant of the catalogue (FPS-MUT-1..4).

The acceptance test of the pack (issue 28): each plausible wrong implementation in
:data:`fpspec.mutants.CATALOGUE` runs on its sets of ``vectors/v1`` and must be killed, or carry a
written argument that it is the same function.  The harness itself is held to the spec first:
the binary32 step quantizer with the profiles' own steps reproduces every binary32 set, and a
choice left unchanged reproduces its sets, so a kill is a real difference, not a harness bug.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fpspec.cli import main
from fpspec.mutants import CATALOGUE, get_mutant, mutants_for_set, run_mutants
from fpspec.mutants.binary32 import Fp32Steps
from fpspec.mutants.run import first_difference
from fpspec.mutants.variations import EncodeChoice, Fp32Order, GemmChoice, QuantizeChoice
from fpspec.mutants.witness import search_witnesses
from fpspec.schemes import resolve_spec
from fpspec.vectors.pack import Pack

#: The whole module is in the slow lane (python3 -m pytest -m "not slow" leaves it out).
pytestmark = pytest.mark.slow

PACK = Path(__file__).resolve().parent.parent / "vectors" / "v1"
BINARY32_SETS = [n for n in Pack(PACK).names() if n.startswith(("quantize-ue5m3-seed-", "quantize-nvfp4-te-"))]


@pytest.fixture(scope="module")
def pack() -> Pack:
    return Pack(PACK)


@pytest.fixture(scope="module")
def report(pack):
    return run_mutants(pack)


# ------------------------------------------------------------------ the harness equals the spec
@pytest.mark.parametrize("name", BINARY32_SETS)
def test_binary32_steps_reproduce_every_binary32_set(pack, name):
    """FPS-MUT-2: the step quantizer with the profile's steps is a twin of the spec."""
    vs = pack.load(name)
    assert first_difference(pack, vs.name, Fp32Order(Fp32Steps()).outputs(vs.meta, vs.inputs)) == ""


@pytest.mark.parametrize("name", ["quantize-ue5m3-exact-1x16", "quantize-mxfp8-floor-1x32-e5m2",
                                  "encode-fp32-e4m3-boundary", "gemm-km-h100-fp8-e4m3-wide",
                                  "gemm-seed-probe-matched-ue5m3-wide"])
def test_unchanged_choices_reproduce_their_sets(pack, name):
    vs = pack.load(name)
    variation = {"quantize": QuantizeChoice({}), "encode": EncodeChoice(),
                 "gemm": GemmChoice({})}[vs.meta["operation"]]
    assert first_difference(pack, vs.name, variation.outputs(vs.meta, vs.inputs)) == ""


def test_rht_sign_view_with_te_signs_reproduces_the_rht_set(pack):
    """The RHT sign mutants transform a sign-flipped view; with TE's own signs that is the spec."""
    from fpspec.exact.blocks import RHT_SIGNS
    from fpspec.mutants.catalogue import _rht_view
    vs = pack.load("quantize-nvfp4-te-fp32-1x16-colwise-rht")
    variation = Fp32Order(Fp32Steps(), view=_rht_view(tuple(RHT_SIGNS)))
    assert first_difference(pack, vs.name, variation.outputs(vs.meta, vs.inputs)) == ""


# ------------------------------------------------------------------ the catalogue
def test_catalogue_size_and_names():
    """FPS-MUT-1: at least 150 mutants, unique names, every family the issue lists."""
    assert len(CATALOGUE) >= 150
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)
    families = {m.family for m in CATALOGUE}
    assert {"operation-order", "rounding-site", "named-choice", "layout", "stochastic", "mx-scale",
            "conversion", "decode", "gemm"} <= families
    assert get_mutant("nvfp4/te-fp32:divide-first-scale").family == "operation-order"
    assert "quantize-nvfp4-te-fp32-1x16-witness" in [
        n for n in Pack(PACK).names() if any(m.name == "nvfp4/te-fp32:divide-first-scale"
                                             for m in mutants_for_set(n))]


def test_every_mutant_is_killed_or_argued_equivalent(report):
    """FPS-MUT-3: the pack's acceptance test: kill rate 100 % of the mutants not argued equivalent."""
    c = report.counts()
    left = [(o.mutant.name, o.status) for o in report.outcomes if o.status in ("survived", "no-set")]
    assert left == []
    assert c["killed"] + c["equivalent"] == len(CATALOGUE)
    assert report.kill_rate == 1.0 and report.exit_code == 0
    for o in report.outcomes:
        if o.status == "equivalent":
            assert len(o.mutant.equivalent) > 40  # a written argument, not a flag
        if o.status == "killed":
            assert "refused" not in o.killed_by, (o.mutant.name, o.killed_by)


def test_the_issue_witnesses_are_killed_by_built_cases(report):
    """The two bugs the issue found passing (divide-first scale, a g/s multiplier) die only on the
    witness sets, as random cases never reach them (FPS-MUT-4)."""
    by_name = {o.mutant.name: o for o in report.outcomes}
    for name in ("ue5m3/seed-fp32:divide-first-scale", "nvfp4/te-fp32:divide-first-scale",
                 "ue5m3/seed-fp32:multiplier-ge-over-s", "nvfp4/te-fp32:multiplier-ge-over-s"):
        assert by_name[name].status == "killed"
        assert "-witness/" in by_name[name].killed_by


def test_issue_example_divide_first():
    """g = 1000, a_B = 111.60715 (the issue's witness): scale code 0x65 in te-fp32's order (as fpspec's
    quantizer gives it), 0x64 divide-first."""
    from fpspec.mutants.binary32 import quantize_view_fp32_steps
    spec = resolve_spec("nvfp4", "te-fp32")
    v = np.zeros((1, 16), np.float32)
    v[0, 0] = np.float32(111.60715)
    good = quantize_view_fp32_steps(v, spec, np.float32(1000))
    bad = quantize_view_fp32_steps(v, spec, np.float32(1000), steps=Fp32Steps(block_scale="divide-first"))
    assert int(good["scales"][0, 0]) == 0x65 and int(bad["scales"][0, 0]) == 0x64
    from fpspec.quantization import quantize
    assert int(quantize(v, "nvfp4", profile="te-fp32", amax=1000.0).scales[0, 0]) == 0x65


def test_witness_search_is_deterministic():
    spec = resolve_spec("ue5m3", "seed-fp32")
    steps = Fp32Steps(block_scale="divide-first")
    a = search_witnesses(spec, steps, seed=7, cases=1)
    b = search_witnesses(spec, steps, seed=7, cases=1)
    assert len(a) == 1 and a[0][1] == b[0][1] and np.array_equal(a[0][0].view(np.uint32), b[0][0].view(np.uint32))


# ------------------------------------------------------------------ the command
def test_cli_mutants_json_and_exit(tmp_path, capsys):
    out = tmp_path / "m.json"
    rc = main(["vectors", "mutants", str(PACK), "--mutant", "ue5m3/exact:*,encode-e2m1:*", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["counts"]["survived"] == 0 and data["kill_rate"] == 1.0
    assert {o["mutant"] for o in data["outcomes"]} >= {"ue5m3/exact:payload-ties-away", "encode-e2m1:rtz"}
    assert "kill rate 100.0%" in capsys.readouterr().out


def test_cli_mutants_survivor_exit_1(tmp_path, capsys):
    """A pack without the witness sets lets the divide-first scale through: exit 1, the survivor named."""
    small = tmp_path / "pack"
    small.mkdir()
    src = Pack(PACK)
    keep = [e for e in src.manifest["sets"] if not e["name"].endswith("-witness")]
    for e in keep:
        (small / e["file"]).write_bytes((PACK / e["file"]).read_bytes())
    from fpspec.vectors.pack import pack_id_of
    man = dict(src.manifest, sets=keep, pack_id=pack_id_of(keep))
    (small / "MANIFEST.json").write_text(json.dumps(man, indent=1, sort_keys=True))
    rc = main(["vectors", "mutants", str(small), "--mutant", "nvfp4/te-fp32:divide-first-scale"])
    assert rc == 1
    assert "survived   nvfp4/te-fp32:divide-first-scale" in capsys.readouterr().out


def test_cli_mutants_unknown_glob(capsys):
    assert main(["vectors", "mutants", str(PACK), "--mutant", "no-such-*"]) == 2
    assert "matches no mutant" in capsys.readouterr().err


def test_checker_reports_a_submission_with_scales_of_another_shape(pack):
    """A wrong block size gives a scale grid of another shape: the checker reports the codes'
    mismatch and the shape (exit 2), instead of failing inside the failing block's trace."""
    from fpspec.vectors.checker import EXIT_USAGE, check
    vs = pack.load("quantize-ue5m3-exact-1x16")
    outs = get_mutant("ue5m3/exact:block-32").variation.outputs(vs.meta, vs.inputs)
    assert outs["scales"].shape[1:] != vs.outputs["scales"].shape[1:]
    report = check(pack, {vs.name: {f"out_{k}": v for k, v in outs.items()}}, select=vs.name, explain=False)
    assert report.exit_code == EXIT_USAGE
    assert "scales" in report.errors[0] and "the pack expects uint8[18, 16, 2]" in report.errors[0]
