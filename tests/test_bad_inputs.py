"""Bad, hostile and edge inputs, table-driven (FPS-CLI-2, FPS-CLI-3, FPS-CLI-4, FPS-CLI-5).

Every case runs one ``fpspec`` command line in-process and asserts three things:
the exit status (docs/cli.rst: 2 bad input or usage, the checker's 3 for an
integrity error), that the last line of stderr names the problem and the file or
index (a regex per case; the message never blames pickle unless the file really
holds Python objects; no traceback), and that nothing was written: every file in
the work folder is byte-identical afterwards and no new file (temporary files
included) appears, so an existing output (``existing.npy``) is never changed.

Inputs that are valid though unusual (big-endian arrays, a uint16 ``--rbits`` whose
values fit ``--nbits``) are rows of status 0: the command succeeds, prints nothing
on stderr, its stdout matches the regex, and it writes exactly its ``--out``
(``existing.npy`` or ``existing.npz``, restored afterwards) and nothing else.  Rows
of status 141 run with a stdout whose reader has gone (every write raises
BrokenPipeError, as ``| head`` does): the command stops quietly, nothing on stderr.
The API side follows the table: :data:`API_CASES` (bad arguments, one FpspecError
each) and the big-endian results compared bit for bit with the native-order ones.

Left out on purpose (fixed in parallel by other tasks, added after merging):
NVFP4 profiles turning a finite 3.4e38 into NaN, float64 input beyond the
float32 range, ``encode --nan zero`` into ue8m0, a float ``nbits``, an absurd
GEMM group size (``--set G=2^40``) or negative window.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import fpspec
from fpspec.bounds import SCALE_FORMATS, range_bounds
from fpspec.cli import BROKEN_PIPE_STATUS, main
from fpspec.convert import decode, encode
from fpspec.errors import FpspecError
from fpspec.formats import get_format
from fpspec.io import load_npy, load_npz
from fpspec.quantization import dequantize, quantize
from fpspec.quantized import QuantizedTensor
from fpspec.vectors.pack import MANIFEST, pack_id_of
from fpspec.vectors.results import run_reference

PACK = Path(__file__).resolve().parent.parent / "vectors" / "v1"
MINI_SETS = ("decode-e2m1", "decode-e4m3", "encode-fp32-e2m1-boundary", "gemm-exact-e4m3-wide")


# ------------------------------------------------------------------ the work folder
def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _npy_with_header(header: str, data: bytes = b"", version: bytes = b"\x01\x00") -> bytes:
    h = header.encode("latin1")
    h += b" " * ((-(10 + len(h) + 1)) % 64) + b"\n"
    return b"\x93NUMPY" + version + len(h).to_bytes(2, "little") + h + data


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for k, v in members.items():
            zf.writestr(k, v)
    return buf.getvalue()


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


#: Files that are not a loadable .npy: name -> (bytes, regex of the message after the path).
def _bad_npy() -> dict[str, tuple[bytes | None, str]]:
    good = _npy_bytes(np.ones((4, 32), np.float32))
    return {
        "empty": (b"", r"empty file \(0 bytes\)"),
        "text": (b"1.0, 2.0, 3.0\n4.0, 5.0\n", r"not a \.npy array: a text file"),
        "garbage": (bytes(np.random.default_rng(7).integers(0, 256, 200, dtype=np.uint8)),
                    r"not a \.npy array: unknown content"),
        "zipped": (_zip({"a.npy": good}), r"is an \.npz archive, expected a single \.npy array"),
        "objects": (None, r"holds Python objects .*pickle"),
        "hdr-list": (_npy_with_header("[1, 2, 3]"), r"bad \.npy header"),
        "hdr-descr": (_npy_with_header("{'descr': '<Z9', 'fortran_order': False, 'shape': (2,), }"),
                      r"bad \.npy header"),
        "hdr-nokey": (_npy_with_header("{'descr': '<f4', 'shape': (2,), }"), r"bad \.npy header"),
        "hdr-syntax": (_npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,"),
                       r"bad \.npy header"),
        "hdr-negshape": (_npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }"),
                         r"bad \.npy header"),
        "hdr-version": (_npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                         version=b"\x09\x00"), r"\.npy format version 9\.0 is not supported"),
        "hdr-cut": (good[:30], r"bad \.npy header"),
        "magic-only": (b"\x93NUMPY", r"bad \.npy header"),
        "truncated": (good[:-9], r"truncated \.npy: the header promises \(4, 32\) float32 \(512 bytes"),
        "huge": (_npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }",
                                  b"\0" * 64), r"truncated \.npy: the header promises \(1000000, 1000000\)"),
        "folder": (None, r"is a folder, expected a \.npy array"),
        "missing": (None, r"no such file"),
    }


def _bad_npz() -> dict[str, tuple[bytes | None, str]]:
    q = quantize(np.ones((4, 32), np.float32), "ue5m3")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for k, v in {"codes": q.codes, "scales": q.scales}.items():
            zf.writestr(f"{k}.npy", _npy_bytes(v))
    good = buf.getvalue()
    crc = bytearray(good)
    crc[good.index(b"\x93NUMPY") + 140] ^= 0x55  # inside the codes data
    return {
        "empty": (b"", r"not an \.npz archive: empty file \(0 bytes\)"),
        "text": (b"codes,scales\n1,2\n", r"not an \.npz archive: a text file"),
        "garbage": (bytes(np.random.default_rng(8).integers(0, 256, 300, dtype=np.uint8)),
                    r"not an \.npz archive: unknown content"),
        "npy": (_npy_bytes(np.ones(3, np.float32)), r"is a \.npy array, expected an \.npz archive"),
        "trunc-head": (good[:40], r"damaged or truncated \.npz archive"),
        "trunc-half": (good[:len(good) // 2], r"damaged or truncated \.npz archive"),
        "trunc-tail": (good[:-5], r"damaged or truncated \.npz archive"),
        "crc": (bytes(crc), r"member codes\.npy is damaged \(Bad CRC-32"),
        "member-txt": (_zip({"codes.txt": b"hello"}), r"member codes\.txt is not a \.npy array"),
        "member-hdr": (_zip({"codes.npy": _npy_with_header("[1]")}), r"member codes\.npy: bad \.npy header"),
        "member-trunc": (_zip({"codes.npy": _npy_bytes(np.zeros((4, 32), np.uint8))[:-10]}),
                         r"member codes\.npy: truncated \.npy"),
        "member-objects": (None, r"member codes\.npy: holds Python objects .*pickle"),
        "folder": (None, r"is a folder, expected an \.npz archive"),
        "missing": (None, r"no such file"),
    }


def _tampered(base: dict[str, np.ndarray], meta: dict) -> dict[str, tuple[dict[str, np.ndarray], str]]:
    """name -> (arrays of a quantized .npz with one thing changed, regex of the refusal)."""

    def with_meta(**kw: object) -> dict[str, np.ndarray]:
        m = json.loads(json.dumps(meta))
        for k, v in kw.items():
            m[k] = v
        return dict(base, meta=np.array(json.dumps(m)))

    def with_params(**kw: object) -> dict[str, np.ndarray]:
        params = dict(meta["params"])
        for k, v in kw.items():
            if v is _DROP:
                params.pop(k, None)
            else:
                params[k] = v
        return with_meta(params=params)

    def without(key: str) -> dict[str, np.ndarray]:
        return {k: v for k, v in base.items() if k != key}

    codes16 = base["codes"].copy()
    codes16[1, 2] = 16
    codes255 = base["codes"].copy()
    codes255[3, 31] = 255
    nan_scale = base["scales"].copy()
    nan_scale[2, 1] = 0xF8  # a ue5m3 NaN code
    return {
        "block-0": (with_meta(block=0), r"block must be a positive integer, got 0"),
        "block-neg": (with_meta(block=-16), r"block must be a positive integer, got -16"),
        "block-str": (with_meta(block="16"), r"block must be a positive integer, got '16'"),
        "block-bool": (with_meta(block=True), r"block must be a positive integer, got True"),
        "block-8": (with_meta(block=8), r"scales shape \(4, 2\) does not match .* expected \(4, 4\)"),
        "block-32": (with_meta(block=32), r"scales shape \(4, 2\) does not match .* expected \(4, 1\)"),
        "tile": (with_meta(tile="2xB"), r"tile must be '1xB' or 'BxB', got '2xB'"),
        "tile-BxB": (with_meta(tile="BxB"), r"shape \(4, 32\) is not a multiple of the BxB tile with B=16"),
        "no-target": (with_params(target=_DROP), r"ue5m3/exact needs the target T"),
        "target-null": (with_params(target=None), r"needs the target T"),
        "target-0": (with_params(target="0"), r"target T must be positive"),
        "target-neg": (with_params(target="-448"), r"target T must be positive"),
        "target-abc": (with_params(target="abc"), r"target T must be a number, got 'abc'"),
        "target-1e39": (with_params(target="1e39"), r"target T must be positive and at most FLT_MAX"),
        "target-third": (with_params(target="1/3"), r"target T 1/3 is not exactly a binary32 value"),
        "rounding": (with_params(rounding="fastest"), r"unknown rounding mode 'fastest'"),
        "zero-rule": (with_params(zero_scale_rule="maybe"), r"params\.zero_scale_rule must be true or false, got 'maybe'"),
        "rht": (with_params(rht=1), r"params\.rht must be true or false, got 1"),
        "amax-neg": (dict(base, amax=np.float32(-1)), r"amax must be finite and non-negative, got -1\.0"),
        "amax-nan": (dict(base, amax=np.float32("nan")), r"amax must be finite and non-negative, got nan"),
        "amax-inf": (dict(base, amax=np.float32("inf")), r"amax must be finite and non-negative, got inf"),
        "amax-array": (dict(base, amax=np.ones(3, np.float32)), r"amax must be one float32 number, got float32 "
                       r"array of shape \(3,\)"),
        "amax-f64": (dict(base, amax=np.float64(1.0)), r"amax must be one float32 number, got float64"),
        "amax-str": (dict(base, amax=np.array("1.0")), r"amax must be one float32 number"),
        "encode-nan": (dict(base, encode_scale=np.float32("nan")), r"encode_scale must be non-negative, got nan"),
        "decode-neg": (dict(base, decode_scale=np.float32(-2)), r"decode_scale must be non-negative, got -2\.0"),
        "codes-16": (dict(base, codes=codes16), r"payload code 0x10 out of range for e2m1 \(first at index \[1, 2\]\)"),
        "codes-255": (dict(base, codes=codes255), r"payload code 0xff out of range for e2m1 \(first at index \[3, 31\]\)"),
        "codes-float": (dict(base, codes=base["codes"].astype(np.float32)), r"codes must be a 2-D uint8 array, "
                        r"got float32 array"),
        "codes-3d": (dict(base, codes=base["codes"][None]), r"codes must be a 2-D uint8 array, got uint8 array "
                     r"of shape \(1, 4, 32\)"),
        "codes-int8": (dict(base, codes=base["codes"].astype(np.int8)), r"codes must be a 2-D uint8 array"),
        "scales-shape": (dict(base, scales=np.zeros((4, 3), np.uint8)), r"scales shape \(4, 3\) does not match"),
        "scales-dtype": (dict(base, scales=base["scales"].astype(np.uint16)), r"scales must be uint8, got uint16"),
        "scales-nan": (dict(base, scales=nan_scale), r"block scale code 0xf8 is NaN or out of range for ue5m3 "
                       r"\(first at index \[2, 1\]\)"),
        "payload": (with_meta(payload_format="e4m3"), r"payload format 'e4m3' is not one fpspec writes"),
        "payload-int": (with_meta(payload_format=4), r"payload format 4 is not one fpspec writes"),
        "scheme": (with_meta(scheme="fp4x"), r"unknown profile 'exact' for scheme 'fp4x'"),
        "scheme-null": (with_meta(scheme=None), r"scheme must be a name, got None"),
        "profile": (with_meta(profile="fastest"), r"unknown profile 'fastest' for scheme 'ue5m3'"),
        "profile-null": (with_meta(profile=None), r"profile must be a name, got None"),
        "scale-format": (with_meta(scale_format="ue9m9"), r"unknown format 'ue9m9'"),
        "scale-format-int": (with_meta(scale_format=7), r"a format is a name .* got int 7"),
        "scale-format-other": (with_meta(scale_format="ue8m0"), r"scale format 'ue8m0' is not accepted by ue5m3/exact"),
        "columnwise": (with_meta(columnwise="yes"), r"columnwise must be true or false, got 'yes'"),
        "params-list": (with_meta(params=[1, 2]), r"params must be a mapping, got list"),
        "source-shape": (with_meta(source_shape=[3, 3, 32]), r"source_shape \[3, 3, 32\] does not give the view "
                         r"shape \[4, 32\]"),
        "source-shape-neg": (with_meta(source_shape=[-4, 32]), r"source_shape must list at least two sizes"),
        "source-shape-1d": (with_meta(source_shape=[128]), r"source_shape must list at least two sizes"),
        "view-shape": (with_params(view_shape=[100, 32]), r"view_shape \[100, 32\] does not fit codes"),
        "meta-json": (dict(base, meta=np.array("{not json")), r"meta is not JSON"),
        "meta-list": (dict(base, meta=np.array("[1, 2]")), r"meta must be a JSON object, got list"),
        "meta-key": (with_meta(evil=1), r"meta has unknown keys \['evil'\]"),
        "meta-int": (dict(base, meta=np.array(5)), r"meta must be one JSON string, got int64"),
        "no-codes": (without("codes"), r"(not|neither) an fpspec quantized tensor,? \(?missing \['codes'\]"),
        "no-meta": (without("meta"), r"missing \['meta'\]"),
        "no-amax": (without("amax"), r"missing \['amax'\]"),
    }


_DROP = object()


@pytest.fixture(scope="module")
def w(tmp_path_factory) -> Path:
    """The work folder every case reads (and must leave unchanged)."""
    d = tmp_path_factory.mktemp("bad-inputs")
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((4, 32)) * 3).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "x3.npy", x.reshape(2, 2, 32))
    np.save(d / "codes.npy", encode(x, "e2m1"))
    np.save(d / "r8.npy", rng.integers(0, 256, (4, 32), dtype=np.uint8))
    np.save(d / "r16.npy", rng.integers(0, 1 << 16, (4, 32), dtype=np.uint16))
    np.save(d / "a8.npy", encode(rng.standard_normal((4, 64)), "e4m3"))
    np.save(d / "b8.npy", encode(rng.standard_normal((3, 64)), "e4m3"))
    np.save(d / "existing.npy", np.arange(5, dtype=np.int64))
    for name, arr in {"ints": np.arange(64, dtype=np.int32).reshape(2, 32), "vec": np.ones(32, np.float32),
                      "scalar": np.float32(1.0), "nan": np.where(np.eye(2, 32) > 0, np.nan, 1).astype(np.float32),
                      "inf": np.full((2, 32), np.inf, np.float32), "cplx": np.ones((2, 32), np.complex64),
                      "bools": np.ones((2, 32), bool), "strs": np.full((2, 32), "ab"),
                      "k24": np.ones((2, 24), np.float32), "m8": np.ones((8, 16), np.float32),
                      "f16codes": np.ones((4, 32), np.float16), "negcodes": np.full((2, 4), -1, np.int8),
                      "r-shape": np.zeros((3, 3), np.uint8), "r-int16": np.zeros((4, 32), np.int16),
                      "r-f32": np.zeros((4, 32), np.float32), "a8-k48": np.zeros((4, 48), np.uint8)}.items():
        np.save(d / f"{name}.npy", arr)
    big = np.ones((4, 32), np.float32)
    big[1, 3] = 3.4e38  # finite, but TE's dequantization formula overflows on its block
    np.save(d / "big.npy", big)
    x64 = np.ones((4, 32))
    x64[2, 5] = 1e39  # a float64 value beyond binary32
    np.save(d / "x64big.npy", x64)
    q = quantize(x, "ue5m3")
    q.to_npz(d / "q.npz")
    quantize(x, "mxfp4", block=32).to_npz(d / "qmx.npz")
    quantize(x.reshape(2, 2, 32), "ue5m3").to_npz(d / "existing.npz")
    # valid data in unusual dress: big-endian arrays, wide random values that fit --nbits 8
    np.save(d / "x-be4.npy", x.astype(">f4"))
    np.save(d / "x-be8.npy", x.astype(">f8"))
    np.save(d / "x-fortran-be4.npy", np.asfortranarray(x.astype(">f4")))
    np.save(d / "codes16-be.npy", encode(x, "fp16").astype(">u2"))
    np.save(d / "a16-be.npy", encode(rng.standard_normal((4, 64)), "fp16").astype(">u2"))
    np.save(d / "b16-be.npy", encode(rng.standard_normal((3, 64)), "fp16").astype(">u2"))
    small = rng.integers(0, 256, (4, 32), dtype=np.uint16)
    np.save(d / "r16-fits.npy", small)
    np.save(d / "r16-fits-be.npy", small.astype(">u2"))
    with np.load(d / "q.npz", allow_pickle=False) as z:
        arrays = {k: z[k].astype(z[k].dtype.newbyteorder(">")) for k in z.files}
    with open(d / "q-be.npz", "wb") as fh:
        np.savez(fh, **arrays)
    # bad .npy files
    bad = d / "bad"
    bad.mkdir()
    for name, (data, _) in _bad_npy().items():
        p = bad / f"{name}.npy"
        if name == "objects":
            np.save(p, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
        elif name == "folder":
            p.mkdir()
        elif data is not None:
            _write(p, data)
    for name, (data, _) in _bad_npz().items():
        p = bad / f"{name}.npz"
        if name == "member-objects":
            buf = io.BytesIO()
            np.save(buf, np.array([object()], dtype=object), allow_pickle=True)
            _write(p, _zip({"codes.npy": buf.getvalue()}))
        elif name == "folder":
            p.mkdir()
        elif data is not None:
            _write(p, data)
    # tampered quantized tensors
    with np.load(d / "q.npz", allow_pickle=False) as z:
        base = {k: z[k] for k in z.files}
    meta = json.loads(str(base["meta"]))
    tam = d / "tampered"
    tam.mkdir()
    for name, (arrays, _) in _tampered(base, meta).items():
        with open(tam / f"q-{name}.npz", "wb") as fh:
            np.savez(fh, **arrays)
    mx = d / "tampered-mx"
    mx.mkdir()
    with np.load(d / "qmx.npz", allow_pickle=False) as z:
        mbase = {k: z[k] for k in z.files}
    mmeta = json.loads(str(mbase["meta"]))
    nan = mbase["scales"].copy()
    nan[1, 0] = 0xFF
    for name, arrays in {"zero-rule": dict(mbase, meta=np.array(json.dumps(dict(mmeta, params=dict(
                            mmeta["params"], zero_scale_rule=True))))),
                         "block-16": dict(mbase, meta=np.array(json.dumps(dict(mmeta, block=16)))),
                         "scale-nan": dict(mbase, scales=nan)}.items():
        with open(mx / f"q-{name}.npz", "wb") as fh:
            np.savez(fh, **arrays)
    # a small pack (a subset of vectors/v1), fpspec's results for it, and damaged variants
    pack = d / "pack"
    pack.mkdir()
    manifest = json.loads((PACK / MANIFEST).read_text())
    manifest["sets"] = [e for e in manifest["sets"] if e["name"] in MINI_SETS]
    manifest["pack_id"] = pack_id_of(manifest["sets"])
    (pack / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for n in MINI_SETS:
        shutil.copy(PACK / f"{n}.npz", pack / f"{n}.npz")
    run_reference(pack, d / "res", progress=None)
    broken = d / "broken-pack"
    shutil.copytree(pack, broken)
    data = bytearray((broken / "decode-e2m1.npz").read_bytes())
    data[-100] ^= 1
    (broken / "decode-e2m1.npz").write_bytes(bytes(data))
    other = d / "other-pack"
    shutil.copytree(pack, other)
    (other / "stray.txt").write_text("not a pack file\n")
    res_trunc = d / "res-trunc"
    shutil.copytree(d / "res", res_trunc)
    (res_trunc / "decode-e2m1.npz").write_bytes((d / "res" / "decode-e2m1.npz").read_bytes()[:50])
    (d / "report.json").write_text("{}\n")
    decl = d / "decl"
    decl.mkdir()
    for name, text in {"op.yaml": "operations: [decod]\n", "ops-str.yaml": "operations: decode, encode\n",
                       "profile.yaml": "profiles: [ue5m3/fastest]\n", "scheme.yaml": "schemes: [fp4x]\n",
                       "format.yaml": "formats: [e2m1, e9m9]\n", "model.yaml": "models: [no-such-preset]\n",
                       "rounding.yaml": "rounding: [rne, fastest]\n", "rbits.yaml": "rounding: [sr-add/99]\n",
                       "rne-bits.yaml": "rounding: [rne/8]\n", "rfmt.yaml": "rounding: {e9m9: [rne]}\n",
                       "policy.yaml": "policies: {e4m3: {overflow: clamp}}\n",
                       "policy-kind.yaml": "policies: {e4m3: {rounding: rne}}\n",
                       "policy-fmt.yaml": "policies: {e9m9: {overflow: sat}}\n",
                       "nanp.yaml": "nan_payloads: [e4m4]\n", "key.yaml": "operation: [decode]\n",
                       "list.yaml": "- decode\n- encode\n", "scalar.yaml": "just text\n",
                       "unparsable.yaml": "operations: [decode\n", "tabs.yaml": "a:\n\t- b\n",
                       "bad.json": "{\"operations\": [\"decode\",]}\n", "name.yaml": "name: [1, 2]\n",
                       "binary.yaml": None}.items():
        if text is None:
            (decl / name).write_bytes(b"\xff\xfe\x00garbage\x80")
        else:
            (decl / name).write_text(text)
    return d


# ------------------------------------------------------------------------ the table
def _loading_cases() -> list[tuple[str, list[str], int, str]]:
    """Every bad .npy class through every command argument that reads a .npy."""
    cases = []
    for name, (_, msg) in _bad_npy().items():
        f = f"{{w}}/bad/{name}.npy"
        where = re.escape(f"bad/{name}.npy")
        cases += [
            (f"encode-in-{name}", ["encode", f, "--to", "e2m1", "--out", "{w}/o.npy"], 2, f"{where}: {msg}"),
            (f"encode-rbits-{name}", ["encode", "{w}/x.npy", "--to", "e2m1", "--rounding", "sr", "--rbits", f,
                                      "--out", "{w}/o.npy"], 2, f"{where}: {msg}"),
            (f"decode-in-{name}", ["decode", f, "--from", "e2m1", "--out", "{w}/o.npy"], 2, f"{where}: {msg}"),
            (f"quantize-in-{name}", ["quantize", f, "--scheme", "ue5m3", "--out", "{w}/o.npz"], 2, f"{where}: {msg}"),
            (f"gemm-a-{name}", ["gemm", f, "{w}/b8.npy", "--operand-format", "e4m3", "--model", "exact",
                                "--out", "{w}/o.npy"], 2, f"{where}: {msg}"),
        ]
        if name in ("empty", "text", "zipped", "objects", "truncated", "huge", "missing"):
            cases.append((f"quantize-rbits-{name}", ["quantize", "{w}/x.npy", "--scheme", "ue5m3", "--rounding", "sr",
                                                     "--rbits", f, "--out", "{w}/o.npz"], 2, f"{where}: {msg}"))
    for name, (_, msg) in _bad_npz().items():
        f = f"{{w}}/bad/{name}.npz"
        where = re.escape(f"bad/{name}.npz")
        cases += [
            (f"dequantize-{name}", ["dequantize", f, "--out", "{w}/o.npy"], 2, f"{where}: ?{msg}"),
            (f"gemm-npz-{name}", ["gemm", f, "{w}/q.npz", "--model", "exact", "--out", "{w}/o.npy"], 2,
             f"{where}: ?{msg}"),
        ]
    return cases


def _tamper_cases() -> list[tuple[str, list[str], int, str]]:
    cases = []
    for name, (_, msg) in _tampered({"codes": np.zeros((4, 32), np.uint8), "scales": np.zeros((4, 2), np.uint8)},
                                    {"params": {}}).items():
        f = f"{{w}}/tampered/q-{name}.npz"
        where = re.escape(f"q-{name}.npz")
        cases.append((f"dequantize-tampered-{name}", ["dequantize", f, "--out", "{w}/o.npy"], 2, f"{where}: .*{msg}"))
        if name in ("block-0", "no-target", "target-0", "amax-neg", "amax-nan", "amax-array", "codes-16",
                    "payload", "scales-nan", "scheme", "profile", "meta-key", "source-shape"):
            cases.append((f"gemm-tampered-{name}", ["gemm", f, "{w}/q.npz", "--model", "exact", "--out",
                                                    "{w}/o.npy"], 2, f"{where}: .*{msg}"))
    for name, msg in {"zero-rule": r"zero-scale rule does not apply to mxfp4",
                      "block-16": r"scales shape \(4, 1\) does not match|mxfp4 uses blocks of 32",
                      "scale-nan": r"scale code 0xff is NaN or out of range for ue8m0 .*\[1, 0\]"}.items():
        cases.append((f"dequantize-mx-{name}", ["dequantize", f"{{w}}/tampered-mx/q-{name}.npz", "--out",
                                                "{w}/o.npy"], 2, f"q-{name}\\.npz: .*{msg}"))
    return cases


E, Q, D = ["encode", "{w}/x.npy", "--to", "e2m1"], ["quantize", "{w}/x.npy", "--scheme", "ue5m3"], \
    ["decode", "{w}/codes.npy", "--from", "e2m1"]
PROBE = ["probe", "--gemm", "numpy", "--operand-format", "e4m3"]

CASES: list[tuple[str, list[str], int, str]] = [
    # ---- --out: one rule for every command (FPS-CLI-4)
    *[(f"out-missing-folder-{c[0]}", [*c, "--out", f"{{w}}/nowhere/o{s}"], 2,
       rf"--out .*nowhere/o\{s}: folder .*nowhere does not exist") for c, s in ((E, ".npy"), (Q, ".npz"), (D, ".npy"))],
    *[(f"out-is-folder-{c[0]}", [*c, "--out", f"{{w}}/bad/folder{s}"], 2, rf"--out .*folder\{s}: is a folder")
      for c, s in ((E, ".npy"), (Q, ".npz"), (D, ".npy"))],
    ("out-suffix-bin", [*E, "--out", "{w}/o.bin"], 2, r"--out .*o\.bin: the name must end in \.npy"),
    # the refusal says what to do and does not contradict itself (it once added "fpspec writes
    # exactly the name given" to a refusal of the name given)
    ("out-suffix-bin-message", [*E, "--out", "{w}/codes.bin"], 2,
     r"^(?!.*exactly the name given).*--out .*codes\.bin: the name must end in \.npy, the suffix of what this "
     r"command writes \(fpspec never adds or changes a suffix; e\.g\. codes\.npy\)$"),
    ("out-suffix-npz-message", [*Q, "--out", "{w}/q.bin"], 2,
     r"q\.bin: the name must end in \.npz, the suffix of what this command writes \(.*e\.g\. q\.npz\)$"),
    ("out-suffix-none", [*E, "--out", "{w}/o"], 2, r"--out .*/o: the name must end in \.npy"),
    ("out-suffix-npz-for-npy", [*E, "--out", "{w}/o.npz"], 2, r"must end in \.npy"),
    ("out-suffix-npy-for-npz", [*Q, "--out", "{w}/o.npy"], 2, r"--out .*o\.npy: the name must end in \.npz"),
    ("out-suffix-dequantize", ["dequantize", "{w}/q.npz", "--out", "{w}/o.txt"], 2, r"must end in \.npy"),
    ("out-suffix-gemm", ["gemm", "{w}/q.npz", "{w}/q.npz", "--model", "exact", "--out", "{w}/o.npz"], 2,
     r"must end in \.npy"),
    ("out-is-input-encode", ["encode", "{w}/x.npy", "--to", "e2m1", "--out", "{w}/x.npy"], 2,
     r"--out .*x\.npy: is also an input"),
    ("out-is-input-rbits", [*E, "--rounding", "sr", "--rbits", "{w}/r8.npy", "--out", "{w}/r8.npy"], 2,
     r"r8\.npy: is also an input"),
    ("out-is-input-decode", ["decode", "{w}/codes.npy", "--from", "e2m1", "--out", "{w}/codes.npy"], 2,
     r"codes\.npy: is also an input"),
    ("out-is-input-dotted", ["decode", "{w}/codes.npy", "--from", "e2m1", "--out", "{w}/bad/../codes.npy"], 2,
     r"is also an input"),
    ("out-is-input-gemm", ["gemm", "{w}/a8.npy", "{w}/b8.npy", "--operand-format", "e4m3", "--model", "exact",
                           "--out", "{w}/b8.npy"], 2, r"b8\.npy: is also an input"),
    ("out-is-input-dequantize", ["dequantize", "{w}/existing.npz", "--out", "{w}/existing.npz"], 2,
     r"must end in \.npy"),
    ("out-is-device", [*E, "--out", "/dev/null"], 2, r"must end in \.npy"),
    # ---- an existing output survives a failed command
    ("existing-kept-encode", ["encode", "{w}/nan.npy", "--to", "e2m1", "--out", "{w}/existing.npy"], 2,
     r"NaN input to e2m1 .*index \[0, 0\]"),
    ("existing-kept-quantize", ["quantize", "{w}/nan.npy", "--scheme", "ue5m3", "--out", "{w}/existing.npz"], 2,
     r"non-finite input value .*nan.*index \[0, 0\]"),
    ("existing-kept-decode", ["decode", "{w}/codes.npy", "--from", "e2m1", "--impl", "exact",
                              "--out", "{w}/existing.npy"], 0, r"^$"),
    # ---- encode / decode vocabulary (FPS-CLI-5)
    ("encode-no-to", ["encode", "{w}/x.npy", "--out", "{w}/o.npy"], 2, r"fpspec encode: error: --to is required"),
    ("decode-no-from", ["decode", "{w}/codes.npy", "--out", "{w}/o.npy"], 2, r"fpspec decode: error: --from is required"),
    ("encode-bad-format", ["encode", "{w}/x.npy", "--to", "e9m9", "--out", "{w}/o.npy"], 2,
     r"argument --to: invalid choice: 'e9m9'"),
    ("encode-bad-format-alias", ["encode", "{w}/x.npy", "--format", "e9m9", "--out", "{w}/o.npy"], 2,
     r"argument --format: invalid choice: 'e9m9'"),
    ("encode-ints", ["encode", "{w}/ints.npy", "--to", "e2m1", "--out", "{w}/o.npy"], 2, r"float array"),
    ("encode-strings", ["encode", "{w}/strs.npy", "--to", "e2m1", "--out", "{w}/o.npy"], 2, r"float array"),
    ("encode-nbits-sr-0", [*E, "--rounding", "sr", "--rbits", "{w}/r8.npy", "--nbits", "0", "--out", "{w}/o.npy"], 2,
     r"nbits must be in 1\.\.32, got 0"),
    ("encode-nbits-sr-99", [*E, "--rounding", "sr", "--rbits", "{w}/r8.npy", "--nbits", "99", "--out", "{w}/o.npy"],
     2, r"nbits must be in 1\.\.32, got 99"),
    ("encode-impl", [*E, "--impl", "slow", "--out", "{w}/o.npy"], 2, r"argument --impl: invalid choice: 'slow'"),
    ("decode-floats", ["decode", "{w}/x.npy", "--from", "e2m1", "--out", "{w}/o.npy"], 2,
     r"x\.npy: codes must be an unsigned integer array, got float32"),
    ("decode-out-of-range", ["decode", "{w}/r8.npy", "--from", "e2m1", "--out", "{w}/o.npy"], 2,
     r"r8\.npy: code \d+ out of range for e2m1 \(4 bits\) \(first at index \[\d+, \d+\]\)"),
    ("decode-out-of-range-exact", ["decode", "{w}/r8.npy", "--from", "e2m1", "--impl", "exact", "--out",
                                   "{w}/o.npy"], 2, r"r8\.npy: code \d+ out of range for e2m1 \(4 bits\) \(first at index"),
    ("decode-negative", ["decode", "{w}/negcodes.npy", "--from", "e2m1", "--out", "{w}/o.npy"], 2,
     r"negcodes\.npy: code -1 out of range for e2m1 .*index \[0, 0\]"),
    ("decode-f16", ["decode", "{w}/f16codes.npy", "--from", "fp16", "--out", "{w}/o.npy"], 2,
     r"must be an unsigned integer array, got float16"),
    # ---- quantize: input, --target, --amax, --tile, --nbits, --rbits
    ("quantize-1d", ["quantize", "{w}/vec.npy", "--scheme", "ue5m3", "--out", "{w}/o.npz"], 2,
     r"at least 2 dimensions \(M, K\), got shape \(32,\)"),
    ("quantize-0d", ["quantize", "{w}/scalar.npy", "--scheme", "ue5m3", "--out", "{w}/o.npz"], 2,
     r"at least 2 dimensions"),
    ("quantize-ints", ["quantize", "{w}/ints.npy", "--scheme", "ue5m3", "--out", "{w}/o.npz"], 2,
     r"input must be a float array .* got int32"),
    ("quantize-bools", ["quantize", "{w}/bools.npy", "--scheme", "ue5m3", "--out", "{w}/o.npz"], 2,
     r"got bool"),
    ("quantize-complex", ["quantize", "{w}/cplx.npy", "--scheme", "ue5m3", "--out", "{w}/o.npz"], 2,
     r"got complex64"),
    ("quantize-strings", ["quantize", "{w}/strs.npy", "--scheme", "ue5m3", "--out", "{w}/o.npz"], 2, r"got <U2"),
    ("quantize-nan", ["quantize", "{w}/nan.npy", "--scheme", "nvfp4", "--out", "{w}/o.npz"], 2,
     r"non-finite input value .*nan.*index \[0, 0\]"),
    ("quantize-inf", ["quantize", "{w}/inf.npy", "--scheme", "mxfp4", "--out", "{w}/o.npz"], 2,
     r"non-finite input value .*inf"),
    ("quantize-k24", ["quantize", "{w}/k24.npy", "--scheme", "ue5m3", "--out", "{w}/o.npz"], 2,
     r"K = 24 is not a multiple of the block 16"),
    ("quantize-bxb-m", ["quantize", "{w}/x.npy", "--scheme", "ue5m3", "--tile", "BxB", "--out", "{w}/o.npz"], 2,
     r"M = 4 is not a multiple of the 16x16 tile"),
    *[(f"target-{t}", [*Q, "--target", t, "--out", "{w}/o.npz"], 2, rf"--target {re.escape(t)}{m}")
      for t, m in (("0", r" must be positive"), ("-448", " must be positive"), ("1e39", " is beyond the binary32 range"),
                   ("1e400", " is beyond the binary32 range"), ("2^200", " is beyond the binary32 range"),
                   ("1/3", " is not exactly a binary32 value"), ("0.1", " is not exactly a binary32 value"),
                   ("2^-200", " is not exactly a binary32 value"), ("16777217", " is not exactly a binary32 value"))],
    *[(f"target-word-{t}", [*Q, "--target", t, "--out", "{w}/o.npz"], 2, rf"--target must be a number .*got {re.escape(repr(t))}")
      for t in ("abc", "nan", "inf", "", "1/0", "0x10", "448,0")],
    ("target-mxfp4", ["quantize", "{w}/x.npy", "--scheme", "mxfp4", "--target", "448", "--out", "{w}/o.npz"], 2,
     r"mxfp4 has no tensor scale"),
    *[(f"amax-{a}", [*Q, "--amax", a, "--out", "{w}/o.npz"], 2, m)
      for a, m in (("-1", r"given amax must be finite and positive, or 0 \(a held zero amax\), and stay so in "
                           r"binary32, got -1"), ("nan", r"finite and positive"),
                   ("inf", r"finite and positive"), ("1e39", r"finite and positive"),
                   ("1e-50", r"finite and positive"), ("abc", r"--amax must be a number, got 'abc'"))],
    *[(f"tile-{t}", [*Q, "--tile", t, "--out", "{w}/o.npz"], 2, rf"--tile must be one of 1xB, BxB, 1x16, 16x16, 1x32, "
       rf"32x32, got {re.escape(repr(t))}") for t in ("2x16", "16x1", "1x8", "64x64", "row", "", "1xb16")],
    ("tile-vs-block", [*Q, "--tile", "1x16", "--block", "32", "--out", "{w}/o.npz"], 2,
     r"--tile 1x16 means blocks of 16, but --block is 32"),
    ("tile-vs-block-bxb", [*Q, "--tile", "32x32", "--block", "16", "--out", "{w}/o.npz"], 2,
     r"--tile 32x32 means blocks of 32, but --block is 16"),
    ("tile-nvfp4-32", ["quantize", "{w}/x.npy", "--scheme", "nvfp4", "--tile", "1x32", "--out", "{w}/o.npz"], 2,
     r"nvfp4 uses blocks of 16"),
    *[(f"nvfp4-near-flt-max-{p}", ["quantize", "{w}/big.npy", "--scheme", "nvfp4", "--profile", p, "--out",
                                   "{w}/o.npz"], 2, r"TransformerEngine's formula .* overflows in s \* g")
      for p in ("te-fp32", "te-kernel")],
    ("float64-beyond-binary32", [*Q[:1], "{w}/x64big.npy", *Q[2:], "--out", "{w}/o.npz"], 2,
     r"input value 1e\+39 is beyond the binary32 range .*\(first at index \[2, 5\]\)"),
    ("encode-ue8m0-nan-zero", ["encode", "{w}/x.npy", "--to", "ue8m0", "--nan", "zero", "--out", "{w}/o.npy"], 2,
     r"NaN policy 'zero' is impossible for ue8m0: it has no zero"),
    ("encode-nbits-float", ["encode", "{w}/x.npy", "--to", "e2m1", "--rounding", "sr", "--rbits", "{w}/r8.npy",
                            "--nbits", "2.5", "--out", "{w}/o.npy"], 2, r"argument --nbits: invalid int value: '2\.5'"),
    *[(f"gemm-set-{name}", ["gemm", "{w}/a8.npy", "{w}/b8.npy", "--operand-format", "e4m3", "--model", "km-h100-fp8",
                            "--set", setting, "--out", "{w}/o.npy"], 2, m)
      for name, setting, m in (("window-negative", "F=-100", r"window_bits=-100: must lie in -60\.\.200"),
                               ("group-zero", "G=0", r"group_size=0: must be a positive integer or None"),
                               ("group-float", "G=1.5", r"group_size='1\.5': must be an integer or None"))],
    ("tile-mxfp4-16", ["quantize", "{w}/x.npy", "--scheme", "mxfp4", "--tile", "1x16", "--out", "{w}/o.npz"], 2,
     r"mxfp4 uses blocks of 32"),
    ("tile-mxfp4-bxb", ["quantize", "{w}/x.npy", "--scheme", "mxfp4", "--tile", "32x32", "--out", "{w}/o.npz"], 2,
     r"mxfp4 allows tiles 1xB .*got 'BxB'"),
    ("payload-format-unknown", ["quantize", "{w}/x.npy", "--scheme", "mxfp8", "--payload-format", "e3m4", "--out",
                                "{w}/o.npz"], 2, r"mxfp8 payloads are e4m3 or e5m2, got payload format 'e3m4'"),
    ("payload-format-e2m1-mxfp8", ["quantize", "{w}/x.npy", "--scheme", "mxfp8", "--payload-format", "e2m1", "--out",
                                   "{w}/o.npz"], 2, r"mxfp8 payloads are e4m3 or e5m2, got payload format 'e2m1'"),
    ("payload-format-fp8-nvfp4", ["quantize", "{w}/x.npy", "--scheme", "nvfp4", "--payload-format", "e4m3", "--out",
                                  "{w}/o.npz"], 2, r"nvfp4 payloads are e2m1, got payload format 'e4m3'"),
    ("payload-format-e5m2-mxfp4", ["quantize", "{w}/x.npy", "--scheme", "mxfp4", "--payload-format", "e5m2",
                                   "--out", "{w}/o.npz"], 2, r"mxfp4 payloads are e2m1, got payload format 'e5m2'"),
    ("tile-mxfp8-16", ["quantize", "{w}/x.npy", "--scheme", "mxfp8", "--tile", "1x16", "--out", "{w}/o.npz"], 2,
     r"mxfp8 uses blocks of 32"),
    ("block-8", [*Q, "--block", "8", "--out", "{w}/o.npz"], 2, r"argument --block: invalid choice: 8"),
    ("scheme-unknown", ["quantize", "{w}/x.npy", "--scheme", "fp4x", "--out", "{w}/o.npz"], 2,
     r"argument --scheme: invalid choice: 'fp4x'"),
    ("profile-unknown", [*Q, "--profile", "fastest", "--out", "{w}/o.npz"], 2,
     r"unknown profile 'fastest' for scheme 'ue5m3'"),
    *[(f"profile-empty-{i}", [*Q[:3], scheme, "--profile", text, "--out", "{w}/o.npz"], 2, m)
      for i, (scheme, text, m) in enumerate((
          ("ue5m3", "", r"--profile must name a profile of ue5m3 \(exact, seed-fp32, .*\), got ''; leave it out for "
                        r"the default, exact$"),
          ("ue5m3", "  ", r"--profile must name a profile of ue5m3 .*, got ' +'"),  # (the line folds spaces)
          ("nvfp4", "", r"--profile must name a profile of nvfp4 \(te-fp32, .*\), got ''; .*default, te-fp32$")))],
    ("scale-format-unknown", [*Q, "--scale-format", "ue9m9", "--out", "{w}/o.npz"], 2,
     r"scale format 'ue9m9' is not accepted by ue5m3/exact"),
    ("zero-rule-mxfp4", ["quantize", "{w}/x.npy", "--scheme", "mxfp4", "--zero-scale-rule", "on", "--out",
                         "{w}/o.npz"], 2, r"zero-scale rule does not apply to mxfp4"),
    ("rounding-unknown", [*Q, "--rounding", "fastest", "--out", "{w}/o.npz"], 2, r"unknown rounding mode 'fastest'"),
    ("sr-no-rbits", [*Q, "--rounding", "sr", "--out", "{w}/o.npz"], 2, r"needs random bits"),
    ("rbits-shape", [*Q, "--rounding", "sr", "--rbits", "{w}/r-shape.npy", "--out", "{w}/o.npz"], 2,
     r"rbits must be uint8, uint16 or uint32 of shape \(4, 32\) .*got uint8 \(3, 3\)"),
    ("rbits-int16", [*Q, "--rounding", "sr", "--rbits", "{w}/r-int16.npy", "--out", "{w}/o.npz"], 2,
     r"r-int16\.npy: random values must be unsigned integers, got int16"),
    ("rbits-float", [*Q, "--rounding", "sr", "--rbits", "{w}/r-f32.npy", "--out", "{w}/o.npz"], 2,
     r"r-f32\.npy: random values must be unsigned integers, got float32"),
    ("rbits-too-big-for-nbits", [*Q, "--rounding", "sr", "--rbits", "{w}/r16.npy", "--nbits", "8", "--out",
                                 "{w}/o.npz"], 2, r"random value 45008 is not below 2\^8 \(nbits = 8\) \(first at index \[0, 0\]\)"),
    ("rbits-too-big-for-nbits-encode", [*E, "--rounding", "sr", "--rbits", "{w}/r16.npy", "--nbits", "8", "--out",
                                        "{w}/o.npy"], 2,
     r"fpspec encode: error: random value 45008 is not below 2\^8 \(nbits = 8\) \(first at index \[0, 0\]\)$"),
    ("rbits-too-big-for-nbits-exact", [*E, "--rounding", "sr", "--rbits", "{w}/r16.npy", "--nbits", "8", "--impl",
                                       "exact", "--out", "{w}/o.npy"], 2, r"random value 45008 is not below 2\^8"),
    ("rbits-too-big-for-nbits-12", [*E, "--rounding", "sr", "--rbits", "{w}/r16.npy", "--nbits", "12", "--out",
                                    "{w}/o.npy"], 2, r"random value 45008 is not below 2\^12 .*\[0, 0\]"),
    # a wider dtype whose values all fit --nbits is taken (docs/cli.rst, FPS-CLI-7)
    ("rbits-uint16-fits-quantize", [*Q, "--rounding", "sr", "--rbits", "{w}/r16-fits.npy", "--nbits", "8", "--out",
                                    "{w}/existing.npz"], 0, r"^$"),
    ("rbits-uint16-fits-encode", [*E, "--rounding", "sr", "--rbits", "{w}/r16-fits.npy", "--nbits", "8", "--out",
                                  "{w}/existing.npy"], 0, r"^$"),
    ("rbits-uint16-big-endian", [*Q, "--rounding", "sr", "--rbits", "{w}/r16-fits-be.npy", "--out",
                                 "{w}/existing.npz"], 0, r"^$"),
    # ---- big-endian arrays are valid data, converted where they enter (FPS-CLI-7)
    *[(f"big-endian-{n}", argv, 0, r"^$") for n, argv in (
        ("encode-f4", ["encode", "{w}/x-be4.npy", "--to", "e2m1", "--out", "{w}/existing.npy"]),
        ("encode-f8-exact", ["encode", "{w}/x-be8.npy", "--to", "e4m3", "--impl", "exact", "--out",
                             "{w}/existing.npy"]),
        ("quantize-f4", ["quantize", "{w}/x-be4.npy", "--scheme", "ue5m3", "--out", "{w}/existing.npz"]),
        ("quantize-f8", ["quantize", "{w}/x-be8.npy", "--scheme", "nvfp4", "--out", "{w}/existing.npz"]),
        ("quantize-fortran", ["quantize", "{w}/x-fortran-be4.npy", "--scheme", "mxfp4", "--out", "{w}/existing.npz"]),
        ("decode-u2", ["decode", "{w}/codes16-be.npy", "--from", "fp16", "--out", "{w}/existing.npy"]),
        ("gemm-u2", ["gemm", "{w}/a16-be.npy", "{w}/b16-be.npy", "--operand-format", "fp16", "--model", "exact",
                     "--out", "{w}/existing.npy"]),
        ("dequantize-npz", ["dequantize", "{w}/q-be.npz", "--out", "{w}/existing.npy"]))],
    *[(f"nbits-{n}", [*Q, "--rounding", "sr", "--rbits", "{w}/r8.npy", "--nbits", n, "--out", "{w}/o.npz"], 2, m)
      for n, m in (("0", r"--nbits must be between 1 and 32, got 0"), ("33", r"--nbits must be between 1 and 32"),
                   ("-8", r"--nbits must be between 1 and 32"), ("abc", r"--nbits must be an integer, got 'abc'"))],
    # ---- gemm operands
    ("gemm-npy-without-format", ["gemm", "{w}/a8.npy", "{w}/b8.npy", "--model", "exact", "--out", "{w}/o.npy"], 2,
     r"a8\.npy: expected an \.npz \(from 'fpspec quantize', or a plain operand file\) or give --operand-format"),
    ("gemm-k-mismatch", ["gemm", "{w}/a8.npy", "{w}/a8-k48.npy", "--operand-format", "e4m3", "--model", "exact",
                         "--out", "{w}/o.npy"], 2, r"a8\.npy, .*a8-k48\.npy: .*K"),
    ("gemm-bad-operand-format", ["gemm", "{w}/a8.npy", "{w}/b8.npy", "--operand-format", "e2m1", "--model", "exact",
                                 "--out", "{w}/o.npy"], 2, r"argument --operand-format: invalid choice: 'e2m1'"),
    ("gemm-model-unknown", ["gemm", "{w}/q.npz", "{w}/q.npz", "--model", "fastest", "--out", "{w}/o.npy"], 2,
     r"fastest"),
    # ---- bounds (FPS-CLI-5: the same --target parser)
    *[(f"bounds-target-{t}", ["bounds", "--scale-format", "ue5m3", "--target", t], 2, rf"--target .*{m}")
      for t, m in (("1e400", "beyond the binary32 range"), ("1e39", "beyond the binary32 range"),
                   ("0", "must be positive"), ("-1", "must be positive"), ("abc", "must be a number"),
                   ("1/3", "not exactly a binary32 value"), ("nan", "must be a number"), ("2^-200", "not exactly"))],
    ("bounds-scale-format", ["bounds", "--scale-format", "e9m9"], 2, r"argument --scale-format: invalid choice"),
    ("bounds-target-inf", ["bounds", "--scale-format", "ue5m3", "--target", "inf"], 2,
     r"--target must be a number .*got 'inf'"),
    # the headroom line carries its explanation for every scale format (an f-string conditional
    # once swallowed it for the small headrooms, U/T < 1e6)
    *[(f"bounds-headroom-line-{f}", ["bounds", "--scale-format", f], 0,
       rf"(?m)^  headroom U/T {{10}}= {h} \(every block unsaturated iff T\*rho <= U, rho = block amax / tensor amax\)$")
      for f, h in (("ue5m3", r"960/7 = 137\.14x"), ("ue5m3fnu", r"256 = 256\.00x"), ("ue4m3", r"1 = 1\.00x"),
                   ("e4m3", r"1 = 1\.00x"), ("ue8m0", r"3\.79779e\+35x"))],
    # ---- a reader that closes stdout early (| head): quiet, status 141 (docs/cli.rst, exit status)
    *[(f"broken-pipe-{n}", argv, BROKEN_PIPE_STATUS, r"^$") for n, argv in (
        ("codebook", ["codebook", "fp16"]), ("codebook-json", ["codebook", "e4m3", "--json"]),
        ("formats", ["formats"]), ("bounds", ["bounds", "--scale-format", "ue5m3"]),
        ("bounds-json", ["bounds", "--scale-format", "ue8m0", "--json"]),
        ("vectors-list", ["vectors", "list", "{w}/pack"]))],
    # ---- probe sizes and options (checked before any GEMM runs)
    *[(f"probe-k-{k}", [*PROBE, "--k", k], 2, m)
      for k, m in (("1e8", r"--k must be between 1 and 131072, got 1e8"), ("100000000", r"--k must be between 1 and"),
                   ("2^40", r"--k must be between 1 and 131072, got 2\^40"), ("0", r"--k must be between 1"),
                   ("-5", r"--k must be between 1"), ("abc", r"--k must be an integer, got 'abc'"),
                   ("1.5", r"--k must be an integer, got '1\.5'"))],
    *[(f"probe-accept-outputs-{n}", [*PROBE, "--accept-outputs", n], 2, m)
      for n, m in (("0", r"--accept-outputs must be between 1 and 100000000, got 0"),
                   ("-1", r"--accept-outputs must be between 1"), ("1e12", r"--accept-outputs must be between 1"),
                   ("many", r"--accept-outputs must be an integer"),
                   ("50000000", r"50000000 outputs exceed what the default shapes hold"))],
    *[(f"probe-shape-{s}", [*PROBE, "--shape", s], 2, m)
      for s, m in (("0x256", r"M and N must be between 1 and 65536"), ("100000x4", r"M and N must be between 1"),
                   ("65536x65536", r"outputs exceed 67108864"), ("axb", r"--shape expects MxN, got 'axb'"),
                   ("256", r"--shape expects MxN"))],
    ("probe-shape-k", [*PROBE, "--shape", "4096x4096", "--k", "131072"], 2, r"an operand of 536870912 codes exceeds"),
    ("probe-scan-k", [*PROBE, "--scan-k", "0"], 2, r"--scan-k must be between 1 and 131072"),
    ("probe-seed", [*PROBE, "--seed", "-1"], 2, r"--seed must be between 0 and 4294967295"),
    *[(f"probe-accept-shapes-{i}", [*PROBE, "--accept-shapes", s], 2, m)
      for i, (s, m) in enumerate((("64x64", r"bad shape '64x64': expected MxNxK"),
                                  ("1x1x100000000", r"acceptance shape 1x1x100000000: K must be between 1 and 131072"),
                                  ("100000x8x8", r"M and N must be between 1 and 65536"),
                                  ("8x8x16:16x16", r"need 0 < R <= M"), ("8x8x0", r"need 0 < R <= M, 0 < C <= N, K > 0"),
                                  ("4096x4096x131072", r"an operand of .* codes exceeds 67108864")))],
    ("probe-no-accept-contradiction", [*PROBE, "--no-accept", "--accept-outputs", "10"], 2,
     r"--no-accept contradicts"),
    ("probe-both-accepts", [*PROBE, "--accept-outputs", "10", "--accept-shapes", "8x8x16"], 2,
     r"give --accept-shapes or --accept-outputs, not both"),
    ("probe-no-gemm", ["probe", "--operand-format", "e4m3"], 2, r"fpspec probe: error: --gemm is required"),
    ("probe-unknown-gemm", ["probe", "--gemm", "cublas-magic"], 2, r"unknown probe target 'cublas-magic'"),
    ("probe-py-bad", ["probe", "--gemm", "py:nomodule"], 2, r"--gemm py:MODULE:FACTORY expected"),
    ("probe-py-missing", ["probe", "--gemm", "py:no_such_module_xyz:make"], 2, r"cannot load 'py:no_such_module_xyz"),
    ("probe-format-mismatch", ["probe", "--gemm", "torch-bf16", "--operand-format", "e4m3"], 2,
     r"torch-bf16 takes bf16 operands, not e4m3"),
    ("probe-report-folder", [*PROBE, "--report", "{w}/bad"], 2, r"--report .*bad: is a folder"),
    ("probe-report-nowhere", [*PROBE, "--report", "{w}/nowhere/r.json"], 2, r"folder .*nowhere does not exist"),
    # ---- fpspec check (FPS-CHK-2 exit codes) and --declare validation
    *[(f"declare-{n}", ["check", "{w}/pack", "{w}/res", "--declare", f"{{w}}/decl/{n}"], 2, m)
      for n, m in (("op.yaml", r"op\.yaml: operations: unknown name 'decod'; known: decode, encode, quantize, gemm"),
                   ("ops-str.yaml", r"operations: unknown name 'decode, encode'"),
                   ("profile.yaml", r"profile\.yaml: profiles: unknown name 'ue5m3/fastest'"),
                   ("scheme.yaml", r"schemes: unknown name 'fp4x'"),
                   ("format.yaml", r"formats: unknown name 'e9m9'"),
                   ("model.yaml", r"models: unknown name 'no-such-preset'"),
                   ("rounding.yaml", r"rounding: unknown rounding mode 'fastest'"),
                   ("rbits.yaml", r"rounding: 'sr-add/99': the width must be 1\.\.32"),
                   ("rne-bits.yaml", r"rounding: 'rne/8': only a stochastic mode names a bit width"),
                   ("rfmt.yaml", r"rounding \(format\): unknown name 'e9m9'"),
                   ("policy.yaml", r"policies\.e4m3\.overflow: unknown name 'clamp'"),
                   ("policy-kind.yaml", r"policies\.e4m3: unknown name 'rounding'"),
                   ("policy-fmt.yaml", r"policies \(format\): unknown name 'e9m9'"),
                   ("nanp.yaml", r"nan_payloads: unknown name 'e4m4'"),
                   ("key.yaml", r"key\.yaml: unknown keys \['operation'\]"),
                   ("list.yaml", r"list\.yaml: a declaration must be a mapping"),
                   ("scalar.yaml", r"scalar\.yaml: a declaration must be a mapping"),
                   ("unparsable.yaml", r"unparsable\.yaml: not valid YAML"),
                   ("tabs.yaml", r"tabs\.yaml: not valid YAML"),
                   ("bad.json", r"bad\.json: not valid JSON"),
                   ("name.yaml", r"name\.yaml: name must be a string"),
                   ("binary.yaml", r"binary\.yaml: cannot read declaration \(not UTF-8 text"),
                   ("missing.yaml", r"missing\.yaml: no such declaration file"))],
    ("check-no-pack", ["check", "{w}/nopack", "{w}/res"], 2, r"nopack: not a folder"),
    ("check-not-a-pack", ["check", "{w}/bad", "{w}/res"], 2, r"MANIFEST\.json: no such file \(not a vector pack\)"),
    ("check-no-results", ["check", "{w}/pack", "{w}/nores"], 2, r"nores: no such results folder or \.npz file"),
    ("check-select-nothing", ["check", "{w}/pack", "{w}/res", "--select", "nomatch*"], 4,
     r"incomplete: --select 'nomatch\*' matches no set of"),
    ("check-results-truncated", ["check", "{w}/pack", "{w}/res-trunc"], 2,
     r"res-trunc/decode-e2m1\.npz: damaged or truncated \.npz archive"),
    ("check-results-npy", ["check", "{w}/pack", "{w}/x.npy"], 2, r"x\.npy: is a \.npy array, expected an \.npz archive"),
    ("check-broken-pack", ["check", "{w}/broken-pack", "{w}/res"], 3,
     r"decode-e2m1\.npz: sha256 .* differs from MANIFEST\.json"),
    ("check-report-folder", ["check", "{w}/pack", "{w}/res", "--report", "{w}/bad"], 2, r"--report .*bad: is a folder"),
    ("check-junit-nowhere", ["check", "{w}/pack", "{w}/res", "--junit", "{w}/nowhere/r.xml"], 2,
     r"--junit .*nowhere/r\.xml: folder .*nowhere does not exist"),
    ("check-report-is-declare", ["check", "{w}/pack", "{w}/res", "--declare", "{w}/decl/op.yaml", "--report",
                                 "{w}/decl/op.yaml"], 2, r"--report .*op\.yaml: is also an input"),
    ("check-report-is-results", ["check", "{w}/pack", "{w}/q.npz", "--report", "{w}/q.npz"], 2, r"is also an input"),
    ("check-report-same-as-junit", ["check", "{w}/pack", "{w}/res", "--report", "{w}/r.out", "--junit", "{w}/r.out"],
     2, r"--report and --junit name the same file"),
    ("check-max-report", ["check", "{w}/pack", "{w}/res", "--max-report", "-1"], 2, r"--max-report must be 0 or more"),
    # ---- fpspec vectors
    ("run-reference-into-pack", ["vectors", "run-reference", "{w}/pack", "--out", "{w}/pack", "--quiet"], 2,
     r"--out .*pack: is also an input"),
    ("run-reference-into-other-pack", ["vectors", "run-reference", "{w}/pack", "--out", "{w}/broken-pack"], 2,
     r"broken-pack: is a vector pack folder \(it holds MANIFEST\.json\)"),
    ("run-reference-select-nothing", ["vectors", "run-reference", "{w}/pack", "--out", "{w}/newres", "--select",
                                      "nomatch*"], 2, r"--select 'nomatch\*' matches no set of"),
    ("run-reference-out-file", ["vectors", "run-reference", "{w}/pack", "--out", "{w}/x.npy"], 2,
     r"--out .*x\.npy: exists and is not a folder"),
    ("run-reference-out-nowhere", ["vectors", "run-reference", "{w}/pack", "--out", "{w}/nowhere/res"], 2,
     r"--out .*nowhere/res: folder .*nowhere does not exist"),
    ("run-reference-broken-pack", ["vectors", "run-reference", "{w}/broken-pack", "--out", "{w}/newres"], 3,
     r"integrity error: .*decode-e2m1\.npz: sha256"),
    ("run-reference-no-pack", ["vectors", "run-reference", "{w}/nopack", "--out", "{w}/newres"], 2,
     r"nopack: not a folder"),
    ("generate-out-file", ["vectors", "generate", "--out", "{w}/x.npy", "--quiet"], 2,
     r"--out .*x\.npy: exists and is not a folder"),
    ("generate-out-nowhere", ["vectors", "generate", "--out", "{w}/nowhere/pack", "--quiet"], 2,
     r"folder .*nowhere does not exist"),
    ("generate-foreign-files", ["vectors", "generate", "--out", "{w}/other-pack", "--quiet"], 2,
     r"--out .*other-pack: holds files that belong to no pack \(stray\.txt\)"),
    ("generate-foreign-folder", ["vectors", "generate", "--out", "{w}/bad", "--quiet"], 2,
     r"--out .*bad: holds files that belong to no pack"),
    ("generate-level", ["vectors", "generate", "--out", "{w}/newpack", "--level", "3"], 2,
     r"argument --level: invalid choice: 3"),
    ("verify-broken", ["vectors", "verify", "{w}/broken-pack"], 3, r"integrity error: .*sha256"),
    ("list-select-nothing", ["vectors", "list", "{w}/pack", "--select", "nomatch*"], 2,
     r"--select 'nomatch\*' matches no set"),
    *_loading_cases(),
    *_tamper_cases(),
]


class _GoneReader(io.TextIOBase):
    """A stdout whose reader has gone (``fpspec ... | head`` after head exits): every write and
    flush raises BrokenPipeError, and there is no file descriptor to redirect."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def test_a_huge_group_size_is_one_group(w):
    """FPS-GEMM-1: G larger than K means one group of all K products; G = 2^40 allocates
    nothing of that size and equals G = None."""
    from fpspec.matmul import gemm

    rng = np.random.default_rng(13)  # operands the model's contract takes: E2M1 with UE5M3 scales
    a, b = quantize(rng.standard_normal((4, 64)), "ue5m3"), quantize(rng.standard_normal((3, 64)), "ue5m3")
    huge = gemm(a, b, "seed-probe-matched-nosnap", group_size=1 << 40)
    one = gemm(a, b, "seed-probe-matched-nosnap", group_size=None)
    assert huge.view(np.uint32).tolist() == one.view(np.uint32).tolist()
    grouped = gemm(a, b, "seed-probe-matched-nosnap")
    assert huge.shape == grouped.shape == (4, 3)


def test_at_least_150_cases():
    """The campaign is table-driven and large (issue 12 sec. 3)."""
    assert len(CASES) >= 150, len(CASES)
    assert len({c[0] for c in CASES}) == len(CASES), "case ids must be unique"
    headroom = {c[0] for c in CASES if c[0].startswith("bounds-headroom-line-")}
    assert headroom == {f"bounds-headroom-line-{f}" for f in SCALE_FORMATS}, "a headroom row per scale format"


@pytest.mark.parametrize("argv, status, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(w, capsys, monkeypatch, argv, status, message):
    """FPS-CLI-2, FPS-CLI-3, FPS-CLI-4, FPS-CLI-5: documented exit status, one line naming the
    problem and the file or index, no traceback, nothing written, no existing output changed."""
    out_name = argv[argv.index("--out") + 1].replace("{w}/", "") if "--out" in argv else None
    argv = [a.replace("{w}", str(w)) for a in argv]
    before = _snapshot(w)
    kept = (w / out_name).read_bytes() if status == 0 and out_name else None
    if status == BROKEN_PIPE_STATUS:
        monkeypatch.setattr(sys, "stdout", _GoneReader())
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == status, err
    assert "Traceback" not in err
    if status == BROKEN_PIPE_STATUS:
        assert err == "", err  # the reader chose to stop: nothing to report
    elif status != 0:
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"fpspec {argv[0]}" if argv[0] != "vectors" else f"fpspec vectors {argv[1]}"), err
        assert re.search(message, last), last
        if "pickle" not in message:
            assert "pickle" not in last.lower()
        if not last.startswith(f"fpspec {argv[0]}: error: argument") and "usage:" not in err:
            assert len(err.strip().splitlines()) == 1, err
    if code != 0:
        assert _snapshot(w) == before, "a failed command changed or created files"
    else:  # a successful case writes exactly its --out (an existing.* file), atomically, nothing else
        assert err == "" and re.search(message, out), (err, out)
        after = _snapshot(w)
        assert {k for k in after if after[k] != before.get(k)} == ({out_name} if out_name else set())
        if out_name:
            assert out_name in ("existing.npy", "existing.npz"), "a successful row writes over an existing.* file"
            (w / out_name).write_bytes(kept)


# ------------------------------------------------------------------ the API side
@pytest.mark.parametrize("name, message", [
    (5, r"a format is a name .* got int 5"), (None, r"got NoneType None"), (["e2m1"], r"got list"),
    (2.5, r"got float 2\.5"), ("e9m9", r"unknown format 'e9m9'; known: e2m1"), ("", r"unknown format ''"),
])
def test_get_format_refuses_with_fpspec_error(name, message):
    """FPS-CLI-2: an unknown format, given as a name of the wrong type too, is an FpspecError."""
    with pytest.raises(FpspecError, match=message):
        get_format(name)


#: Bad arguments through the API: id -> (a call, regex of its FpspecError).  Each was once an
#: AttributeError, OverflowError or TypeError, or silently taken (issue 28, item 5).
_X = np.ones((4, 32), np.float32)
_R16 = np.full((4, 32), 7, np.uint16)
_R16[2, 5] = 300
API_CASES: dict[str, tuple[object, str]] = {
    "dequantize-none": (lambda: dequantize(None), r"dequantize takes a QuantizedTensor \(from fpspec\.quantize, or "
                        r"QuantizedTensor\.from_npz for a file\), got NoneType None$"),
    "dequantize-ndarray": (lambda: dequantize(_X),
                           r"takes a QuantizedTensor .*got a float32 array of shape \(4, 32\)$"),
    "dequantize-path": (lambda: dequantize("q.npz"), r"QuantizedTensor\.from_npz for a file\), got str 'q\.npz'$"),
    "dequantize-dict": (lambda: dequantize({"codes": _X}), r"takes a QuantizedTensor .*got dict \{'codes'"),
    **{f"range-bounds-{name}": (lambda t=t: range_bounds("ue5m3", target=t), m) for name, t, m in (
        ("inf", float("inf"), r"target T must be finite, got inf$"),
        ("minus-inf", float("-inf"), r"target T must be finite, got -inf$"),
        ("nan", float("nan"), r"target T must be a finite number, got nan$"),
        ("np-inf", np.float32("inf"), r"target T must be finite, got (np\.float32\()?inf\)?$"),
        ("none", None, r"target T must be a finite number, got None$"),
        ("bool", True, r"target T must be a number, got True$"),
        ("zero", 0, r"target T must be positive, got 0$"))},
    "range-bounds-inf-ue8m0": (lambda: range_bounds("ue8m0", float("inf")), r"target T must be finite, got inf"),
    **{f"quantize-block-{name}": (lambda b=b, s=s: quantize(_X, s, block=b), m) for name, s, b, m in (
        ("8.0", "ue5m3", 8.0,
         r"block must be an integer \(16 or 32\) or None \(the scheme's default\), got float 8\.0$"),
        ("16.0", "ue5m3", 16.0, r"block must be an integer \(16 or 32\) .*got float 16\.0$"),
        ("32.0-mxfp4", "mxfp4", 32.0, r"block must be an integer \(32\) .*got float 32\.0$"),
        ("str", "nvfp4", "16", r"block must be an integer \(16\) .*got str '16'$"),
        ("bool", "ue5m3", True, r"block must be an integer .*got bool True$"),
        ("array", "ue5m3", np.array([16]), r"block must be an integer .*got ndarray array\(\[16\]\)$"),
        ("int-8", "ue5m3", 8, r"ue5m3 uses blocks of 16 or 32, got 8$"))},
    **{f"quantize-profile-{name}": (lambda p=p: quantize(_X, "ue5m3", profile=p), m) for name, p, m in (
        ("empty", "", r"profile must be a profile name of 'ue5m3' or None \(the default\), got ''$"),
        ("blank", " ", r"got ' '$"), ("int", 3, r"got 3$"))},
    "encode-rbits-above-nbits": (lambda: encode(_X, "e2m1", "sr", rbits=_R16, nbits=8),
                                 r"random value 300 is not below 2\^8 \(nbits = 8\) \(first at index \[2, 5\]\)$"),
    "encode-rbits-above-nbits-exact": (lambda: encode(_X, "e2m1", "sr", rbits=_R16, nbits=8, impl="exact"),
                                       r"random value 300 is not below 2\^8 .*\[2, 5\]"),
    "encode-rbits-big-endian-above": (lambda: encode(_X, "e2m1", "sr", rbits=_R16.astype(">u2"), nbits=8),
                                      r"random value 300 is not below 2\^8 .*\[2, 5\]"),
    "quantize-rbits-above-nbits": (lambda: quantize(_X, "ue5m3", rounding="sr", rbits=_R16, nbits=8),
                                   r"random value 300 is not below 2\^8 \(nbits = 8\) \(first at index \[2, 5\]\)$"),
}


@pytest.mark.parametrize("call, message", API_CASES.values(), ids=API_CASES.keys())
def test_api_bad_input(call, message):
    """FPS-CLI-2: a bad argument of the public API is one FpspecError that names what was
    given and what is expected."""
    with pytest.raises(FpspecError, match=message):
        call()


def test_wide_random_values_that_fit_nbits_are_taken_as_they_are():
    """FPS-CLI-7: a uint16 or uint32 rbits whose values are all below 2^nbits gives the codes of
    the same values as uint8 (docs/cli.rst), in encode and quantize, on both paths."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, 32)) * 3).astype(np.float32)
    r8 = rng.integers(0, 256, x.shape, dtype=np.uint8)
    want = encode(x, "e2m1", "sr", rbits=r8, nbits=8)
    q8 = quantize(x, "ue5m3", rounding="sr", rbits=r8, nbits=8)
    assert want.tolist() != encode(x, "e2m1").tolist()  # the random values matter on this input
    for dt in (np.uint16, np.uint32, ">u2", ">u4"):
        r = r8.astype(dt)
        assert encode(x, "e2m1", "sr", rbits=r, nbits=8).tolist() == want.tolist(), dt
        assert encode(x, "e2m1", "sr", rbits=r, nbits=8, impl="exact").tolist() == want.tolist(), dt
        q = quantize(x, "ue5m3", rounding="sr", rbits=r, nbits=8)
        assert q.codes.tolist() == q8.codes.tolist() and q.scales.tolist() == q8.scales.tolist(), dt


# ------------------------------------------------------------- big-endian arrays, bit for bit
def _bits(a: np.ndarray) -> list:
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")).tolist() if a.dtype.kind == "f" else a.tolist()


def _same_tensor(got: QuantizedTensor, want: QuantizedTensor) -> None:
    for field in ("codes", "scales", "amax", "encode_scale", "decode_scale"):
        g, e = np.asarray(getattr(got, field)), np.asarray(getattr(want, field))
        assert g.dtype == e.dtype and g.dtype.isnative and _bits(g) == _bits(e), field
    for field in ("scheme", "profile", "block", "tile", "columnwise", "params", "source_shape"):
        assert getattr(got, field) == getattr(want, field), field
    assert _bits(dequantize(got)) == _bits(dequantize(want))


_BE_X = (np.random.default_rng(21).standard_normal((32, 32)) * 4).astype(np.float32)


@pytest.mark.parametrize("dt", [">f4", ">f8"])
@pytest.mark.parametrize("scheme, kw", [
    ("ue5m3", {}), ("ue5m3", {"profile": "seed-fp32", "columnwise": True}), ("ue5m3", {"tile": "BxB"}),
    ("nvfp4", {}), ("nvfp4", {"rht": True}), ("mxfp4", {}), ("mxfp8", {}),
    ("ue5m3", {"impl": "exact"}), ("mxfp4", {"impl": "exact"}),
])
def test_big_endian_quantize_equals_native(dt, scheme, kw):
    """FPS-CLI-7: quantize of a big-endian array (C or Fortran order) gives the tensor of the
    native-order array of the same values, bit for bit (once a Numba TypingError)."""
    native = _BE_X.astype(dt.replace(">", "="))
    want = quantize(native, scheme, **kw)
    for arr in (_BE_X.astype(dt), np.asfortranarray(_BE_X.astype(dt))):
        assert not arr.dtype.isnative
        _same_tensor(quantize(arr, scheme, **kw), want)


@pytest.mark.parametrize("dt", [">f2", ">f4", ">f8"])
@pytest.mark.parametrize("impl", ["fast", "exact"])
def test_big_endian_encode_equals_native(dt, impl):
    """FPS-CLI-7: encode of a big-endian array, with big-endian random values too, gives the
    codes of the native-order arrays, bit for bit."""
    x = _BE_X[:4]
    r = np.random.default_rng(3).integers(0, 1 << 12, x.shape, dtype=np.uint16)
    for fmt, rounding, rbits in (("e2m1", "rne", None), ("e4m3", "rne", None), ("bf16", "rne", None),
                                 ("e2m1", "sr", r), ("e5m2", "sr-add", r)):
        want = encode(x.astype(dt.replace(">", "=")), fmt, rounding, rbits=rbits, nbits=12, impl=impl)
        got = encode(x.astype(dt), fmt, rounding, nbits=12, impl=impl,
                     rbits=None if rbits is None else rbits.astype(">u2"))
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), (fmt, rounding)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3", "fp32"])
def test_big_endian_decode_equals_native(fmt):
    """FPS-CLI-7: decode of big-endian codes gives the native codes' values, bit for bit."""
    codes = encode(_BE_X[:4], fmt)
    for impl in ("fast", "exact"):
        want = decode(codes, fmt, impl=impl)
        got = decode(codes.astype(codes.dtype.newbyteorder(">")), fmt, impl=impl)
        assert got.dtype == want.dtype == np.float64 and _bits(got) == _bits(want), impl


@pytest.mark.parametrize("fmt, model", [("fp16", "exact"), ("bf16", "exact"), ("fp16", "sm90-f16"),
                                        ("bf16", "km-h100-bf16"), ("e4m3", "km-h100-fp8")])
def test_big_endian_gemm_operands_equal_native(fmt, model):
    """FPS-CLI-7: gemm of big-endian code arrays gives the native arrays' product, bit for bit
    (once refused as 'must be uint16, got >u2')."""
    rng = np.random.default_rng(8)
    a, bt = encode(rng.standard_normal((5, 64)), fmt), encode(rng.standard_normal((3, 64)), fmt)
    want = fpspec.gemm(a, bt, model, fmt=fmt)
    got = fpspec.gemm(a.astype(a.dtype.newbyteorder(">")), bt.astype(bt.dtype.newbyteorder(">")), model, fmt=fmt)
    assert got.dtype == np.float32 and _bits(got) == _bits(want)


def test_big_endian_files_are_read_by_value(w, tmp_path):
    """FPS-CLI-7, FPS-CLI-3: the .npy and .npz readers return big-endian data in native order
    with the same values; the CLI's results from big-endian files equal those from native
    files byte for byte (encode, quantize, decode, gemm, dequantize)."""
    be = load_npy(w / "x-be4.npy")
    assert be.dtype == np.float32 and be.dtype.isnative and _bits(be) == _bits(load_npy(w / "x.npy"))
    assert load_npy(w / "x-fortran-be4.npy").tolist() == be.tolist()
    z = load_npz(w / "q-be.npz")
    assert all(v.dtype.isnative for v in z.values()) and z["amax"].dtype == np.float32
    np.save(tmp_path / "x-le8.npy", load_npy(w / "x-be8.npy"))
    np.save(tmp_path / "codes16.npy", load_npy(w / "codes16-be.npy"))
    np.save(tmp_path / "a16.npy", load_npy(w / "a16-be.npy"))
    np.save(tmp_path / "b16.npy", load_npy(w / "b16-be.npy"))
    pairs = [
        (["encode", "{be}/x-be4.npy", "--to", "e2m1"], ["encode", "{w}/x.npy", "--to", "e2m1"], ".npy"),
        (["quantize", "{be}/x-be4.npy", "--scheme", "ue5m3"], ["quantize", "{w}/x.npy", "--scheme", "ue5m3"], ".npz"),
        (["quantize", "{be}/x-be8.npy", "--scheme", "nvfp4"], ["quantize", "{t}/x-le8.npy", "--scheme", "nvfp4"],
         ".npz"),
        (["decode", "{be}/codes16-be.npy", "--from", "fp16"], ["decode", "{t}/codes16.npy", "--from", "fp16"], ".npy"),
        (["gemm", "{be}/a16-be.npy", "{be}/b16-be.npy", "--operand-format", "fp16", "--model", "exact"],
         ["gemm", "{t}/a16.npy", "{t}/b16.npy", "--operand-format", "fp16", "--model", "exact"], ".npy"),
        (["dequantize", "{be}/q-be.npz"], ["dequantize", "{w}/q.npz"], ".npy"),
    ]
    for i, (big, native, suffix) in enumerate(pairs):
        outs = []
        for j, argv in enumerate((big, native)):
            out = tmp_path / f"out-{i}-{j}{suffix}"
            argv = [a.replace("{be}", str(w)).replace("{w}", str(w)).replace("{t}", str(tmp_path)) for a in argv]
            assert main([*argv, "--out", str(out)]) == 0, argv
            outs.append(out.read_bytes() if suffix == ".npy" else  # (a zip member carries its write time)
                        {k: (v.dtype.str, _bits(v)) for k, v in load_npz(out).items()})
        assert outs[0] == outs[1], big[0]


@pytest.mark.slow
def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    """docs/cli.rst (exit status 141): ``fpspec codebook fp16 | head -1`` in a real pipe: the
    command exits with 128 + SIGPIPE and writes nothing on stderr (once 'error: [Errno 32]
    Broken pipe'), and the interpreter's last flush does not complain either."""
    proc = subprocess.Popen([sys.executable, "-m", "fpspec", "codebook", "fp16"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"fp16: ")
    proc.stdout.close()  # the reader goes away, as head does after its first line
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) == BROKEN_PIPE_STATUS == 141, err
    assert err == b"", err


def test_big_endian_outputs_submitted_to_the_harness_are_taken_by_value(w):
    """FPS-CLI-7: the in-process harness takes big-endian outputs (bit patterns '>u4', or
    floats '>f4' viewed as their bits) by value: fpspec's own outputs, byte-swapped, pass (once
    '>f4' was read as swapped bits, a false mismatch, and '>u4' was refused)."""
    from fpspec.vectors.harness import Harness

    h = Harness(w / "pack")
    checked = 0
    for s in h.sets():
        outs = {}
        for k, v in s.vs.outputs.items():
            floats = v.dtype == np.uint32 and k == "value"
            outs[k] = v.view(np.float32).astype(">f4") if floats else v.astype(v.dtype.newbyteorder(">"))
            checked += floats
        h.submit(s.name, outs)
    report = h.report()
    assert report.exit_code == 0 and not report.mismatches, h.text()
    assert checked >= 1 and len(h.results) == len(MINI_SETS)
