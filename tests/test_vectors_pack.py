"""The committed level-1 pack: layout, manifest, integrity and byte-identical regeneration (FPS-VEC-*)."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fpspec import SPEC_VERSION
from fpspec.cli import main
from fpspec.vectors.generate import generate
from fpspec.vectors.pack import IntegrityError, Pack
from fpspec.vectors.schema import TAG_DOC, TAGS, SCHEMA_VERSION

PACK = Path(__file__).resolve().parent.parent / "vectors" / "v1"


@pytest.fixture(scope="module")
def pack() -> Pack:
    return Pack(PACK)


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("regen")
    generate(out, 1, progress=None)
    return out


@pytest.mark.slow
def test_regeneration_is_byte_identical(regenerated, pack):
    """FPS-VEC-10: regenerating level 1 gives the committed files, byte for byte."""
    fresh = json.loads((regenerated / "MANIFEST.json").read_text())
    assert fresh["pack_id"] == pack.pack_id
    assert (regenerated / "MANIFEST.json").read_bytes() == (PACK / "MANIFEST.json").read_bytes()
    for e in pack.manifest["sets"]:
        data = (regenerated / e["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == e["sha256"], e["name"]


def test_manifest_fields(pack):
    """FPS-VEC-5: schema, spec and generator versions, per-set hash, counts, choices."""
    m = pack.manifest
    assert m["schema_version"] == SCHEMA_VERSION and m["spec_version"] == SPEC_VERSION and m["level"] == 1
    assert {k: v["bit"] for k, v in m["tags"].items()} == TAGS
    ops = {e["operation"] for e in m["sets"]}
    assert ops == {"decode", "encode", "quantize", "gemm"}
    for e in m["sets"]:
        assert len(e["sha256"]) == 64 and e["cases"] > 0 and e["coverage_model"] in m["coverage_models"]
        assert e["requirements"], e["name"]
    sr = next(e for e in m["sets"] if e["name"] == "sr-fp32-e2m1-sr-midpoint-8")
    assert "sr:sr-midpoint/8" in sr["depends_on"] and "nan-policy:e2m1=zero" in sr["depends_on"]
    q = next(e for e in m["sets"] if e["name"] == "quantize-ue5m3-seed-fp32-1x16")
    assert {"profile:ue5m3/seed-fp32", "zero-scale-rule:on", "target:448"} <= set(q["depends_on"])


def test_level1_size_budget():
    """FPS-VEC-12: the committed level-1 pack stays under 24 MB."""
    total = sum(p.stat().st_size for p in PACK.iterdir())
    assert total < 24e6


def test_sets_are_plain_npz_readable_without_fpspec(pack):
    """FPS-VEC-1: uncompressed zip of .npy 1.0 entries, fixed timestamps, loadable by np.load without pickle."""
    path = PACK / "decode-e2m1.npz"
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    assert [i.filename for i in infos] == ["__meta__.npy", "tags.npy", "in_code.npy", "out_value.npy"]
    assert all(i.compress_type == zipfile.ZIP_STORED and i.date_time == (1980, 1, 1, 0, 0, 0) for i in infos)
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(z["__meta__"].tobytes())
        codes, vals = z["in_code"], z["out_value"]
    assert meta["operation"] == "decode" and meta["key"] == "input:code"
    assert codes.dtype == np.uint8 and vals.dtype == np.uint32
    # hand-checked E2M1 values: 0x3 = 1.5, 0x7 = 6, 0xF = -6, 0x8 = -0
    assert vals[3] == np.float32(1.5).view(np.uint32) and vals[7] == np.float32(6).view(np.uint32)
    assert vals[0xF] == np.float32(-6).view(np.uint32) and vals[8] == 0x80000000


def test_every_set_verifies_and_keys_are_unique(pack):
    """FPS-VEC-3, FPS-VEC-4: meta fields, tag table, unique per-case keys, bit-pattern dtypes."""
    for vs in pack:
        keys = vs.keys()
        assert len(np.unique(keys)) == vs.cases, vs.name
        assert vs.meta["tags"] == TAGS
        assert int(np.bitwise_or.reduce(vs.tags)) >> len(TAG_DOC) == 0
        for spec in vs.meta["outputs"].values():
            assert spec["dtype"] in ("uint8", "uint16", "uint32")


def test_exhaustive_sets_cover_every_pattern(pack):
    """FPS-VEC-8 exhaustive-16bit: every FP16/BF16 pattern (sign 0 for unsigned targets), five modes."""
    vs = pack.load("encode-fp16-e2m1-exhaustive")
    assert np.array_equal(vs.inputs["x"], np.arange(65536, dtype=np.uint16))
    # five modes, and ml_dtypes' NaN policy as a named alternative output (vectors/declarations/)
    assert set(vs.outputs) == {"rne", "rtz", "rna", "up", "down", "rne_nan_flipped_zero"}
    assert [int(vs.outputs["rne_nan_flipped_zero"][b]) for b in (0x7E00, 0xFE00, 0x4100)] == [0x8, 0x0, 4]
    # 0x4100 = 2.5 is a tie: RNE -> 2 (0x4), RNA -> 3 (0x5), RTZ -> 2, up -> 3, down -> 2
    i = 0x4100
    assert [int(vs.outputs[m][i]) for m in ("rne", "rna", "rtz", "up", "down")] == [4, 5, 4, 5, 4]
    assert vs.tags[i] & (1 << TAGS["tie"])
    # -2.5 (0xC100): down goes away from zero -> -3 (0xD)
    assert int(vs.outputs["down"][0xC100]) == 0xD and int(vs.outputs["up"][0xC100]) == 0xC
    u = pack.load("encode-bf16-ue5m3-exhaustive")
    assert u.cases == 32768
    # bf16 61440 = 0x4770 -> max code 0xF7; 65536 (0x4780) saturates to 0xF7 too
    assert int(u.outputs["rne"][0x4770]) == 0xF7 and int(u.outputs["rne"][0x4780]) == 0xF7
    assert u.tags[0x4780] & (1 << TAGS["overflow"])


def test_boundary_and_sr_tags_hand_checked(pack):
    """FPS-VEC-4, FPS-VEC-8: ties, guard/sticky and SR threshold cases are where the tags say."""
    vs = pack.load("encode-fp32-e2m1-boundary")
    x = vs.inputs["x"].view(np.float32)
    idx = {float(v): i for i, v in enumerate(x) if np.isfinite(v)}
    t5 = vs.tags[idx[5.0]]
    assert t5 & (1 << TAGS["tie"]) and t5 & (1 << TAGS["guard"]) and not t5 & (1 << TAGS["sticky"])
    assert int(vs.outputs["rne"][idx[5.0]]) == 0x6 and int(vs.outputs["rna"][idx[5.0]]) == 0x7
    above = float(np.nextafter(np.float32(5.0), np.float32(6)))
    assert vs.tags[idx[above]] & (1 << TAGS["sticky"]) and int(vs.outputs["rne"][idx[above]]) == 0x7
    sr = pack.load("sr-fp32-e2m1-sr-midpoint-8")
    x, r, out = sr.inputs["x"].view(np.float32), sr.inputs["r"], sr.outputs["code"]
    # x = 2.5 (delta 1/2 between 2 and 3): midpoint rule goes up iff 1/2 + (2r+1)/512 >= 1, i.e. r >= 128
    sel = np.flatnonzero(x == np.float32(2.5))
    got = {int(r[i]): int(out[i]) for i in sel}
    assert got[127] == 0x4 and got[128] == 0x5 and got[0] == 0x4 and got[255] == 0x5
    assert all(sr.tags[i] & (1 << TAGS["sr_threshold"]) for i in sel if int(r[i]) in (127, 128, 129))


def test_verify_cli_and_tampering(tmp_path, capsys):
    """FPS-VEC-5, FPS-VEC-6: verify passes on the pack; a flipped byte, an edited manifest, a stray
    file or a path escaping the pack folder is an integrity error (exit 3)."""
    assert main(["vectors", "verify", str(PACK), "--quiet"]) == 0
    names = ["decode-e2m1", "decode-e4m3"]
    small = tmp_path / "p"
    small.mkdir()
    m = json.loads((PACK / "MANIFEST.json").read_text())
    m["sets"] = [e for e in m["sets"] if e["name"] in names]
    from fpspec.vectors.pack import pack_id_of
    m["pack_id"] = pack_id_of(m["sets"])
    for n in names:
        shutil.copy(PACK / f"{n}.npz", small / f"{n}.npz")
    (small / "MANIFEST.json").write_text(json.dumps(m))
    assert main(["vectors", "verify", str(small)]) == 0
    # flip one byte of an output
    data = bytearray((small / "decode-e2m1.npz").read_bytes())
    data[-5] ^= 1
    (small / "decode-e2m1.npz").write_bytes(bytes(data))
    assert main(["vectors", "verify", str(small)]) == 3
    assert "sha256" in capsys.readouterr().err
    shutil.copy(PACK / "decode-e2m1.npz", small / "decode-e2m1.npz")
    # a manifest whose path escapes the folder
    bad = json.loads(json.dumps(m))
    bad["sets"][0]["file"] = "../decode-e2m1.npz"
    (small / "MANIFEST.json").write_text(json.dumps(bad))
    with pytest.raises(IntegrityError, match="escapes"):
        Pack(small)
    assert main(["vectors", "verify", str(small)]) == 3
    # an edited hash without a matching pack id
    bad = json.loads(json.dumps(m))
    bad["sets"][0]["sha256"] = "0" * 64
    (small / "MANIFEST.json").write_text(json.dumps(bad))
    assert main(["vectors", "verify", str(small)]) == 3
    (small / "MANIFEST.json").write_text(json.dumps(m))
    (small / "extra.npz").write_bytes(b"")
    assert main(["vectors", "verify", str(small)]) == 3
    assert "not listed" in capsys.readouterr().err


def test_pickled_entry_is_refused(tmp_path):
    """FPS-VEC-6: loading never executes code: an object array in a set is refused, not unpickled."""
    names = ["decode-e2m1"]
    m = json.loads((PACK / "MANIFEST.json").read_text())
    m["sets"] = [e for e in m["sets"] if e["name"] in names]
    bad = tmp_path / "decode-e2m1.npz"
    np.savez(bad, __meta__=np.array([object()], dtype=object), tags=np.zeros(16, np.uint32))
    m["sets"][0]["sha256"] = hashlib.sha256(bad.read_bytes()).hexdigest()
    from fpspec.vectors.pack import pack_id_of
    m["pack_id"] = pack_id_of(m["sets"])
    (tmp_path / "MANIFEST.json").write_text(json.dumps(m))
    with pytest.raises(IntegrityError, match="pickle"):
        Pack(tmp_path).load("decode-e2m1")


def test_set_names_and_files(pack):
    """FPS-VEC-2: set names are lowercase words, the file is <name>.npz directly in the pack folder."""
    from fpspec.vectors.schema import SET_NAME
    for e in pack.manifest["sets"]:
        assert SET_NAME.match(e["name"]) and e["file"] == f"{e['name']}.npz"
    assert sorted(p.name for p in PACK.glob("*.npz")) == sorted(e["file"] for e in pack.manifest["sets"])


def test_vector_policies_are_named_in_each_output(pack):
    """FPS-VEC-9: where a format's default policy is 'error', the vectors use a named choice,
    recorded in each output's policies and depends_on."""
    vs = pack.load("encode-fp16-e2m1-exhaustive")
    assert vs.meta["outputs"]["rne"]["policies"]["nan"] == "zero"
    nan = 0x7E00
    assert int(vs.outputs["rne"][nan]) == 0x0 and vs.tags[nan] & (1 << TAGS["profile_dependent"])
    u = pack.load("encode-fp32-ue8m0-boundary")
    assert u.meta["outputs"]["rne"]["policies"] == {"overflow": "nonfinite", "nan": "nan",
                                                    "negative": "nan", "zero": "nan"}
    assert u.meta["outputs"]["rna_zero_min"]["policies"]["zero"] == "min"
    i = int(np.flatnonzero(u.inputs["x"] == 0)[0])
    assert int(u.outputs["rne"][i]) == 0xFF and int(u.outputs["rna_zero_min"][i]) == 0x00


def test_e2m1_codes_one_per_byte(pack):
    """FPS-VEC-11: E2M1 codes are stored one per byte in the low nibble; no packed form in v1."""
    q = pack.load("quantize-nvfp4-te-fp32-1x16")
    assert q.outputs["codes"].dtype == np.uint8 and int(q.outputs["codes"].max()) <= 0xF
    assert q.meta["outputs"]["codes"]["layout"].startswith("one E2M1 code per byte (low nibble)")
    assert q.outputs["codes"].shape[1:] == (16, 32) and q.outputs["scales"].shape[1:] == (16, 2)


def test_generate_refuses_a_folder_of_foreign_npz(tmp_path):
    """FPS-VEC-10: generate replaces a previous pack's sets but never deletes unrelated .npz files."""
    (tmp_path / "mine.npz").write_bytes(b"keep me")
    assert main(["vectors", "generate", "--out", str(tmp_path), "--quiet"]) == 2
    assert (tmp_path / "mine.npz").read_bytes() == b"keep me"
