"""Structure of the committed MMA-Sim reference outputs (vectors/provenance/mmasim, issue 15).

Only the files' shape is checked here: every preset of issue 15 is present, arrays have
the shapes, dtypes and meta the README promises, the manifest's hashes and counts match.
Whether fpspec's instruction presets reproduce the outputs bit for bit is tested with
the models themselves.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1] / "vectors" / "provenance" / "mmasim"

#: The presets issue 15 names, each with the operand variants the files must cover.
EXPECTED: dict[str, set[str]] = {
    "sm70-f16": {"fp16"},
    "sm75-f16": {"fp16"},
    "sm80-f16": {"fp16", "bf16"},
    "sm80-f16-f16acc": {"fp16"},
    "sm89-fp8": {"e4m3", "e5m2", "e4m3-e5m2"},
    "sm90-f16": {"fp16", "bf16"},
    "sm90-f16-f16acc": {"fp16"},
    "sm90-fp8": {"e4m3", "e5m2", "e4m3-e5m2"},
    "sm100-f16": {"fp16", "bf16"},
    "sm100-f8f6f4": {"e4m3", "e5m2", "e4m3-e5m2"},
    "sm100-mxf8f6f4": {"e4m3", "e5m2", "e4m3-e5m2"},
    "sm100-mxf4nvf4": {"nvfp4-ue4m3-b16", "mxfp4-ue8m0-b32", "mxfp4-ue8m0-b16"},
    "sm120-f8f6f4": {"e4m3", "e5m2", "e4m3-e5m2"},
    "sm120-mxf8f6f4": {"e4m3", "e5m2", "e4m3-e5m2"},
    "sm120-mxf4nvf4": {"nvfp4-ue4m3-b16", "mxfp4-ue8m0-b32", "mxfp4-ue8m0-b16"},
    "cdna3-f16": {"fp16", "bf16"},
    "cdna3-fp8": {"e4m3fnuz", "e5m2fnuz", "e4m3fnuz-e5m2fnuz"},
    # TF32 operands, which MMA-Sim also models (not presets of issue 15)
    "sm80-tf32": {"tf32"},
    "sm90-tf32": {"tf32"},
    "sm100-tf32": {"tf32"},
}

META_KEYS = {
    "set", "preset", "variant", "source", "mmasim_commit", "mmasim_call", "instruction", "arch",
    "m", "n", "k", "M", "N", "K", "steps", "a_format", "b_format", "c_format", "d_format",
    "scale_format", "block_size", "seed", "generator_version", "torch_version", "chain",
    "layout", "nan_bits_defined", "row_classes", "col_classes", "counts", "notes",
}

STORAGE = {"fp16": "uint16", "bf16": "uint16", "tf32": "uint32", "e4m3": "uint8", "e5m2": "uint8",
           "e4m3fnuz": "uint8", "e5m2fnuz": "uint8", "e2m1": "uint8"}

FILES = sorted(ROOT.glob("*.npz"))


def _load(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    return arrays, meta


def test_every_preset_and_variant_is_present() -> None:
    found: dict[str, set[str]] = {}
    for path in FILES:
        preset, variant = path.stem.split("__")
        found.setdefault(preset, set()).add(variant)
    assert found == EXPECTED


def test_manifest_matches_files() -> None:
    manifest = json.loads((ROOT / "MANIFEST.json").read_text())
    assert manifest["mmasim_commit"].startswith("c785138")
    assert set(manifest["sets"]) == {p.stem for p in FILES}
    for path in FILES:
        entry = manifest["sets"][path.stem]
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest(), path.name
        assert entry["bytes"] == path.stat().st_size


def test_readme_names_the_command_and_commit() -> None:
    text = (ROOT / "README.md").read_text()
    assert "python3 -m tools.mmasim_vectors" in text and "c785138" in text and "verify" in text


def test_total_size_stays_small() -> None:
    assert sum(p.stat().st_size for p in FILES) < 6 * 2**20


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_set_structure(path: Path) -> None:
    arrays, meta = _load(path)
    assert META_KEYS <= set(meta), META_KEYS - set(meta)
    assert meta["set"] == path.stem
    assert f"{meta['preset']}__{meta['variant']}" == path.stem
    M, N, K, m, n, k = (meta[x] for x in ("M", "N", "K", "m", "n", "k"))
    assert K == 256 and K % k == 0 and meta["steps"] == K // k
    assert M % m == 0 and N % n == 0
    assert M * N >= 4096  # several thousand outputs per set
    assert arrays["a"].shape == (M, K) and arrays["a"].dtype == STORAGE[meta["a_format"]]
    assert arrays["b"].shape == (K, N) and arrays["b"].dtype == STORAGE[meta["b_format"]]
    d_dtype = "uint16" if meta["d_format"] == "fp16" else "uint32"
    for name in ("d_first", "d"):
        assert arrays[name].shape == (M, N) and arrays[name].dtype == d_dtype
    expected_names = {"a", "b", "d_first", "d"}
    if meta["scale_format"]:
        bs = meta["block_size"]
        assert bs in (16, 32) and meta["scale_format"] in ("ue4m3", "ue8m0")
        assert arrays["a_scale"].shape == (M, K // bs) and arrays["a_scale"].dtype == np.uint8
        assert arrays["b_scale"].shape == (K // bs, N) and arrays["b_scale"].dtype == np.uint8
        expected_names |= {"a_scale", "b_scale"}
    assert set(arrays) == expected_names
    if meta["a_format"] == "e2m1":  # one code per byte, low nibble
        assert int(arrays["a"].max()) < 16 and int(arrays["b"].max()) < 16
    assert len(meta["row_classes"]) == M and len(meta["col_classes"]) == N


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_counts_in_meta_match_outputs(path: Path) -> None:
    arrays, meta = _load(path)
    f16 = meta["d_format"] == "fp16"
    x = arrays["d"].view(np.float16 if f16 else np.float32)
    c = meta["counts"]
    assert c["outputs"] == x.size
    assert c["nan"] == int(np.isnan(x).sum()) and c["inf"] == int(np.isinf(x).sum())
    assert c["zero"] == int((x == 0).sum())
    # most outputs stay finite and nonzero; specials only in some rows and columns
    assert c["finite_nonzero"] >= 0.75 * x.size
    assert 0 < c["nan"] <= 0.2 * x.size


@pytest.mark.parametrize("path", [p for p in FILES if not p.stem.startswith("cdna3")], ids=lambda p: p.stem)
def test_nvidia_nan_output_is_all_ones(path: Path) -> None:
    """MMA-Sim writes NaN as 0x7FFFFFFF (0x7FFF for an FP16 D) on every NVIDIA instruction."""
    arrays, meta = _load(path)
    f16 = meta["d_format"] == "fp16"
    for name in ("d_first", "d"):
        bits = arrays[name]
        x = bits.view(np.float16 if f16 else np.float32)
        assert set(np.unique(bits[np.isnan(x)]).tolist()) <= {0x7FFF if f16 else 0x7FFFFFFF}
        assert meta["nan_bits_defined"] is True
