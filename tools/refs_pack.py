"""Run a public reference quantizer over a vector pack's quantize sets and write its outputs as results.

Shared by the ``tools.compare_*`` modules (torchao, microxcaling, TransformerEngine,
the seed's portable reference).  Each script turns one case of a ``quantize`` set
(docs/vectors.rst: inputs ``x`` (M, K) FP32 bits, ``amax`` FP32 bits, optional ``r``)
into the four outputs ``codes``, ``scales``, ``decode_scale`` and ``dequant`` of
that set and hands them to :func:`write_set`; ``python3 -m fpspec check PACK
RESULTS --declare DECL`` then judges the reference (docs/checker.rst, FPS-CHK-1).

Nothing here knows a reference: it only reads the pack, slices the cases and
writes ``RESULTS/<set>.npz`` through :func:`fpspec.vectors.results.write_results`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from fpspec.vectors.checker import select_names
from fpspec.vectors.pack import Pack, VectorSet
from fpspec.vectors.results import write_results

__all__ = ["Case", "pack_arguments", "quantize_sets", "cases", "write_set", "e2m1_codes_of_values",
           "scale_codes_of_values", "fp4x2_codes", "run_pack", "f32_bits"]


@dataclass
class Case:
    """One case of a quantize set, in the form a reference takes it."""

    index: int
    x: np.ndarray            # float32 (M, K), the tensor X (not yet transposed)
    amax: np.float32          # the tensor amax g handed to the quantizer; 0 only for an all-zero tensor
    r: np.ndarray | None      # uint8 random bits of the quantized view (stochastic sets)
    params: dict              # the set's params (scheme, profile, tile, block, target, rounding, ...)

    @property
    def view(self) -> np.ndarray:
        """The quantized view V: X, or X^T for a columnwise set (before any Hadamard transform)."""
        return np.ascontiguousarray(self.x.T if self.params["columnwise"] else self.x)

    @property
    def given_amax(self) -> np.float32:
        """g when the set gives one, else max |V| (what fpspec measures for g = +0)."""
        return self.amax if self.amax != 0 else np.float32(np.max(np.abs(self.x)))


def pack_arguments(ap: argparse.ArgumentParser, default_select: str) -> None:
    ap.add_argument("pack", help="vector pack folder (e.g. vectors/v1)")
    ap.add_argument("--out", required=True, help="results folder to write <set>.npz into")
    ap.add_argument("--select", default=default_select,
                    help=f"comma-separated set-name globs (default {default_select!r})")


def quantize_sets(pack: Pack, select: str | None, accept: Callable[[dict], str | None]) -> Iterator[VectorSet]:
    """The pack's quantize sets matching ``select`` that ``accept(params)`` takes.

    ``accept`` returns None to take a set or a one-line reason to skip it (printed).
    """
    for name in select_names(pack.names(), select):
        vs = pack.load(name)
        if vs.meta["operation"] != "quantize":
            continue
        why = accept(vs.meta["params"])
        if why:
            print(f"skip {name}: {why}")
            continue
        yield vs


def cases(vs: VectorSet) -> Iterator[Case]:
    xs = vs.inputs["x"].view(np.float32)
    g = vs.inputs["amax"].view(np.float32) if "amax" in vs.inputs else np.zeros(xs.shape[0], np.float32)
    r = vs.inputs.get("r")
    for i in range(xs.shape[0]):
        yield Case(i, np.array(xs[i]), np.float32(g[i]), None if r is None else np.array(r[i]), vs.meta["params"])


def f32_bits(a: object) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def write_set(out: str | Path, pack: Pack, vs: VectorSet, per_case: list[dict[str, np.ndarray]]) -> Path:
    """Stack the per-case outputs (``codes`` uint8, ``scales`` uint8, ``decode_scale`` and ``dequant``
    float32 values) in the set's dtypes and write ``out/<set>.npz``."""
    outs = {}
    for k in ("codes", "scales", "decode_scale", "dequant"):
        arr = np.stack([np.asarray(c[k]) for c in per_case])
        outs[k] = f32_bits(arr) if k in ("decode_scale", "dequant") else arr.astype(np.uint8)
        want = vs.meta["outputs"][k]["shape"]
        if list(outs[k].shape[1:]) != list(want):
            raise SystemExit(f"{vs.name}: {k} has shape {outs[k].shape[1:]}, the set wants {want}")
    return write_results(out, pack, vs, outs)


_E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def e2m1_codes_of_values(v: np.ndarray) -> np.ndarray:
    """E2M1 codes of exact E2M1 values (any float dtype), the sign bit from the sign bit of v
    (so -0.0 is code 0x8).  Exits when a value is not an E2M1 value."""
    v = np.asarray(v)
    mag = np.abs(v.astype(np.float64))
    idx = np.searchsorted(_E2M1, mag)
    ok = (idx < 8) & (_E2M1[np.minimum(idx, 7)] == mag)
    if not ok.all():
        bad = np.argwhere(~ok)[0]
        raise SystemExit(f"value {v[tuple(bad)]!r} at {tuple(int(i) for i in bad)} is not an E2M1 value")
    return (idx | (np.signbit(v).astype(np.int64) << 3)).astype(np.uint8)


def fp4x2_codes(packed) -> np.ndarray:
    """One E2M1 code per element from a reference's packed fp4x2 bytes (M, K/2), the even column in the
    low nibble (torchao's and TransformerEngine's packing)."""
    b = np.asarray(packed).astype(np.uint8)
    out = np.empty((b.shape[0], b.shape[1] * 2), dtype=np.uint8)
    out[:, 0::2] = b & 0xF
    out[:, 1::2] = b >> 4
    return out


def scale_codes_of_values(v: np.ndarray, fmt: str) -> np.ndarray:
    """Codes of exact values of an unsigned scale format (ue5m3, ue4m3, ...)."""
    from fpspec.fast.rounding import decode_table

    table = decode_table(fmt)
    v = np.asarray(v, dtype=np.float64)
    out = np.empty(v.shape, dtype=np.uint8)
    for idx, val in np.ndenumerate(v):
        hits = np.nonzero(table == val)[0]
        if len(hits) == 0:
            raise SystemExit(f"{val!r} is not a {fmt} value")
        out[idx] = hits[0]
    return out


def run_pack(args: argparse.Namespace, accept: Callable[[dict], str | None],
             run_case: Callable[[Case], dict[str, np.ndarray]]) -> int:
    """Run ``run_case`` on every case of every accepted set and write the results; returns 0."""
    pack = Pack(args.pack)
    n = 0
    for vs in quantize_sets(pack, args.select, accept):
        per_case = [run_case(c) for c in cases(vs)]
        path = write_set(args.out, pack, vs, per_case)
        n += 1
        print(f"wrote {path} ({len(per_case)} cases)")
    if n == 0:
        print("no set was run (check --select)")
    return 0
