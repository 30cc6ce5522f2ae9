"""Vectorised evaluation of the fused block-FMA sub-family, for probing and acceptance.

The acceptance test (FPS-PRB-15) compares a black-box GEMM with a fitted model on
more than 10^5 FP32 outputs with K up to 16384: far too many for the Fraction
reference :mod:`fpspec.exact.accumulate`.  This module evaluates the models the
probe fits - fused truncating blocks (``fused=True``, a window) with or without
promotion, and the plain sequential FP32 chain (``group_size=1``, RNE) - on whole
arrays with float64 arithmetic that is provably exact (FPS-PRB-16):

* operands of e4m3 / e5m2 / fp16 / bf16 have at most 11 significant bits, so a
  product has at most 22 and is exact in float64;
* after alignment every kept term is an integer multiple of ``2^(E - F)`` below
  ``2^(F + 2)`` and the accumulator below ``2^(F + 1)``; a group of G <= 64 terms
  sums below ``2^(F + 9)``, exact for F <= 44;
* scaling by powers of two (``np.ldexp``), ``np.trunc``/``np.floor``/``np.rint`` of
  such values, and exponents from ``np.frexp`` (bit extraction) are exact;
* the FP32 promotion addition with RNE is numpy's float32 ``+`` (IEEE, correctly
  rounded).

It also models one thing :class:`~fpspec.models.GemmModel` does not (yet) name:
``accumulate_bits``, the fraction bits the block result keeps (Khattak & Mikaitis
use 23 + neab when neab < 0, i.e. 13 for Hopper FP8; FPS-PRB-7).  With the default
23 it is the FP32 rounding of :mod:`fpspec.exact.accumulate`, which the tests check
bit for bit against this module.
"""

from __future__ import annotations

import numpy as np

from ..errors import FpspecError
from ..formats import get_format
from ..models import GemmModel
from .operands import value_table

__all__ = ["supports", "operand_arrays", "simulate_gemm", "simulate_rowdot", "round_bits"]

_NEG = np.int64(-(1 << 30))  # the alignment exponent of a zero
FP32_EMIN = -126


def supports(model: GemmModel) -> str | None:
    """None when this module evaluates ``model`` exactly, else the reason it cannot."""
    if model.output_format != "fp32":
        return "output_format other than fp32"
    if model.snap_bits is not None:
        return "snap_bits"
    if model.fused:
        if model.window_bits is None:
            return "fused model without a window"
        if model.window_bits > 44 or model.group_size is None or model.group_size > 64:
            return "window or group too wide for exact float64 evaluation"
        return None
    if (model.group_size == 1 and model.group_rounding == "rne" and model.accumulate_rounding == "rne"
            and model.window_bits is None):
        return None
    return "non-fused model other than the sequential FP32 chain"


def operand_arrays(codes: np.ndarray, fmt: str, model: GemmModel) -> tuple[np.ndarray, np.ndarray]:
    """Exact float64 values and alignment exponents (max(floor(log2|v|), emin); zero -> very small)."""
    f = get_format(fmt)
    vals = value_table(f)[np.asarray(codes).astype(np.intp)]
    if not np.all(np.isfinite(vals)):
        raise FpspecError("simulate: operands must be finite (use the exact reference for specials)")
    _, e = np.frexp(vals)
    emin = FP32_EMIN if model.operand_domain == "decoded-fp32" else f.emin
    exps = np.where(vals != 0, np.maximum(e.astype(np.int64) - 1, emin), _NEG)
    return vals, exps


def round_bits(v: np.ndarray, bits: int, mode: str) -> np.ndarray:
    """Round exact float64 values to ``bits`` fraction bits in FP32's exponent range
    (subnormal quantum 2^(-126 - bits)), ``rz`` / ``rne``; zeros become +0."""
    _, e = np.frexp(v)
    qe = np.maximum(e.astype(np.int64) - 1, FP32_EMIN) - bits
    qe = np.where(v == 0, 0, qe)
    r = np.ldexp(v, -qe)
    r = np.trunc(r) if mode == "rz" else np.rint(r)
    return np.ldexp(r, qe) + 0.0


def _fused_step(c: np.ndarray, p: np.ndarray, pe: np.ndarray, model: GemmModel, acc_bits: int) -> np.ndarray:
    """One fused block: c (...), products p (..., G), their alignment exponents pe (..., G)."""
    _, ce = np.frexp(c)
    ce = np.where(c != 0, np.maximum(ce.astype(np.int64) - 1, FP32_EMIN), _NEG)
    big = np.maximum(pe.max(axis=-1), ce)
    if model.align_exponent_floor is not None:
        big = np.maximum(big, model.align_exponent_floor)
    live = big > _NEG // 2
    q = np.where(live, big - model.window_bits, 0)
    cut = np.floor if model.below_window == "floor" else np.trunc
    s = cut(np.ldexp(p, -q[..., None])).sum(axis=-1) + cut(np.ldexp(c, -q))
    return np.where(live, round_bits(np.ldexp(s, q), acc_bits, model.accumulate_rounding), c)


def _promote(big: np.ndarray, c: np.ndarray, mode: str) -> np.ndarray:
    if mode == "rne":
        return (big.astype(np.float32) + c.astype(np.float32)).astype(np.float64) + 0.0
    return round_bits(big + c, 23, "rz")


def _chain(get_block, K: int, shape: tuple[int, ...], model: GemmModel, acc_bits: int,
           split_slice: int | None = None, split_rounding: str = "rne") -> np.ndarray:
    """Steps 2-5 over k in [0, K); with ``split_slice = L`` K is cut into slices of L
    (the last may be shorter), each slice an independent chain (promotion counted from
    the slice start), and the slice results are added in order with FP32 additions
    rounded ``split_rounding`` (a library's split-K, FPS-PRB-9)."""
    if split_slice is None:
        return _chain_range(get_block, 0, K, shape, model, acc_bits)
    total = np.zeros(shape)
    for s0 in range(0, K, split_slice):
        part = _chain_range(get_block, s0, min(s0 + split_slice, K), shape, model, acc_bits)
        total = _promote(total, part, split_rounding)
    return total


def _chain_range(get_block, k0: int, k1: int, shape: tuple[int, ...], model: GemmModel,
                 acc_bits: int) -> np.ndarray:
    g = model.group_size
    c = np.zeros(shape)
    big = np.zeros(shape)
    pending = False
    for j0 in range(k0, k1, g):
        p, pe = get_block(j0, min(j0 + g, k1))
        if model.fused:
            c = _fused_step(c, p, pe, model, acc_bits)
        else:  # sequential FP32: product rounded RNE to FP32, then an RNE add
            pf = p[..., 0].astype(np.float32)
            c = (c.astype(np.float32) + pf).astype(np.float64) + 0.0
        pending = True
        done = min(j0 + g, k1) - k0
        if model.promotion_interval is not None and done % model.promotion_interval == 0:
            big = _promote(big, c, model.promotion_rounding)
            c = np.zeros(shape)
            pending = False
    if model.promotion_interval is None:
        return c
    return _promote(big, c, model.promotion_rounding) if pending else big


def _check(model: GemmModel) -> None:
    why = supports(model)
    if why is not None:
        raise FpspecError(f"simulate: cannot evaluate this model ({why}); use fpspec.exact.accumulate")


def _product_exps(ea, eb, p, model):
    if model.product_exponent == "operands":
        return np.where(p != 0, ea + eb, _NEG)
    _, e = np.frexp(p)
    return np.where(p != 0, e.astype(np.int64) - 1, _NEG)


def simulate_gemm(a_codes: np.ndarray, bt_codes: np.ndarray, fmt: str, model: GemmModel,
                  accumulate_bits: int = 23, row_chunk: int = 64, split_slice: int | None = None,
                  split_rounding: str = "rne") -> np.ndarray:
    """A (M x K) @ BT (N x K)^T under ``model`` -> float32 (M, N), bit-exact (FPS-PRB-16)."""
    _check(model)
    av, ae = operand_arrays(a_codes, fmt, model)
    bv, be = operand_arrays(bt_codes, fmt, model)
    M, K = av.shape
    N = bv.shape[0]
    if bv.shape[1] != K:
        raise FpspecError(f"K mismatch: A is {M}x{K}, BT is {N}x{bv.shape[1]}")
    model.check_k(K)
    out = np.empty((M, N), dtype=np.float32)
    for r0 in range(0, M, row_chunk):
        a_v, a_e = av[r0:r0 + row_chunk], ae[r0:r0 + row_chunk]

        def block(k0, k1, a_v=a_v, a_e=a_e):
            p = a_v[:, None, k0:k1] * bv[None, :, k0:k1]
            return p, _product_exps(a_e[:, None, k0:k1], be[None, :, k0:k1], p, model)

        out[r0:r0 + row_chunk] = _chain(block, K, (a_v.shape[0], N), model, accumulate_bits,
                                        split_slice, split_rounding)
    return out


def simulate_rowdot(a_codes: np.ndarray, bt_codes: np.ndarray, fmt: str, model: GemmModel,
                    accumulate_bits: int = 23, split_slice: int | None = None,
                    split_rounding: str = "rne") -> np.ndarray:
    """Row-wise dot products y[i] = A[i] . BT[i] (the diagonal of the GEMM) -> float32 (M,)."""
    _check(model)
    av, ae = operand_arrays(a_codes, fmt, model)
    bv, be = operand_arrays(bt_codes, fmt, model)
    if av.shape != bv.shape:
        raise FpspecError(f"rowdot needs equal shapes, got {av.shape} and {bv.shape}")
    M, K = av.shape
    model.check_k(K)

    def block(k0, k1):
        p = av[:, k0:k1] * bv[:, k0:k1]
        return p, _product_exps(ae[:, k0:k1], be[:, k0:k1], p, model)

    return _chain(block, K, (M,), model, accumulate_bits, split_slice, split_rounding).astype(np.float32)
