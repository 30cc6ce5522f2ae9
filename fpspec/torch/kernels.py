"""Step 1 of FPS-GEMM-1 on torch tensors: the terms of one planned group for a tile of outputs,
handed to the chain (:mod:`fpspec.torch.chain`); the torch twin of :mod:`fpspec.fast.kernels`
(FPS-GEMM-10).

Twins of the fast term producers, each written once for a whole tile of outputs (every output
of the tile gets its terms in the last dimension of a :class:`~fpspec.torch.chain.GroupTerms`):

* :func:`product_terms` (fast: ``product_terms``; exact: ``product_terms``): one term per
  product, any operand values (Inf and NaN included);
* :func:`block_sums` and :func:`scaled_block_terms` (fast: ``scaled_block_terms``,
  ``gemm_block_sums_rows``; exact: ``block_terms``): one term per block term of E2M1 products,
  the exact sum of its payload products times both scales, any scales.

A tile is either a block of a GEMM's outputs, the operand slices broadcast against each other
(A's rows ``(R, 1, G)``, BT's ``(1, C, G)``), or the outputs (i, i) of a row-wise dot (both
``(R, G)``): the same elementwise code serves both.

Why the terms are exact:

* Operands are integers (:class:`TermOperand`): a value is ``sig 2^lsb`` with ``|sig| < 2^31``
  (:func:`fpspec.torch.accumulate.gemm_declines_torch` refuses wider ones), so a product's
  ``sig_a sig_b`` is an exact int64 and its exponent ``lsb_a + lsb_b`` an integer.
* E2M1 payloads are the integers 2q (``|2q| <= 12``).  A block term's payload sum is an integer
  of magnitude at most 144 u (u products): in a GEMM tile it is formed by ``torch.bmm`` in
  float64 (:func:`block_sums`), exact because every input is an integer below 2^4 in magnitude,
  every product an integer below 2^8 and every partial sum, in whatever order and grouping the
  library adds (with or without FMA), an integer below 144 u <= 2^53: a float64 number, so no
  addition rounds.  (TF32 never applies to float64.)  In a row-wise dot it is an int64 sum.
  Times the two scale significands (at most 24 bits each, refused beyond 62 bits in all) it is
  an exact int64.
* Special values follow IEEE 754 as the fast twin's ``_special_product`` does: a NaN, or 0 x
  Inf, is NaN, else an Inf with the product's sign; a group's special is the IEEE sum of its
  non-finite terms: NaN if any is NaN or both infinities occur, else the one infinity.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .chain import NO_SPECIAL, NO_TERMS, ChainSpec, GroupTerms, bitlen

__all__ = ["FINITE", "POS_INF", "NEG_INF", "NAN", "E2M1_LSB", "E2M1_PRODUCT_MAX", "OVERFLOW_EXPONENT",
           "BMM_MIN_TERM", "TermOperand", "special_sum", "product_terms", "block_sums", "scaled_block_terms"]

#: Special-value code of an operand element (:class:`TermOperand` ``special``; fast: the same codes).
FINITE = 0
POS_INF = 1
NEG_INF = 2
NAN = 3
#: Exponent of the last bit of an E2M1 value held as the integer 2q: value = 2q 2^-1.
E2M1_LSB = -1
#: The largest magnitude of a product of two E2M1 payloads held as 2q: 12 x 12.
E2M1_PRODUCT_MAX = 144
#: A product of magnitude >= 2^128 is an Inf term under ``product_overflow="inf"``.
OVERFLOW_EXPONENT = 128
#: Block terms of at least this many products take their payload sums from ``torch.bmm`` in a
#: GEMM tile; shorter ones are int64 products and sums (a one- or two-product "matrix product"
#: is mostly overhead).
BMM_MIN_TERM = 4


class TermOperand(NamedTuple):
    """Operand values as integers, int64 tensors of one shape: value = ``sig 2^lsb`` (0 for a
    zero and for a special), alignment exponent ``aexp`` (step 3), ``special`` FINITE /
    POS_INF / NEG_INF / NAN."""

    sig: torch.Tensor
    lsb: torch.Tensor
    aexp: torch.Tensor
    special: torch.Tensor


def special_sum(nan: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """The IEEE sum of a group's non-finite terms from whether any is NaN, +Inf, -Inf (float64;
    NO_SPECIAL where there is none)."""
    like = nan.to(torch.float64)
    out = torch.where(neg, torch.full_like(like, -math.inf), torch.full_like(like, NO_SPECIAL))
    out = torch.where(pos, torch.full_like(like, math.inf), out)
    return torch.where(nan | (pos & neg), torch.full_like(like, math.nan), out)


def _no_terms(like: torch.Tensor) -> torch.Tensor:
    return torch.full_like(like, NO_TERMS)


def product_terms(a: TermOperand, b: TermOperand, exact_exponent: bool, spec: ChainSpec,
                  specials: bool) -> GroupTerms:
    """Step 1 with ``scale_placement="product"`` (FPS-GEMM-4): the products a_k b_k of a group,
    term i the group's product i (the operands broadcast to the tile's shape + (G,)).  A finite
    nonzero product is ``(sig_a sig_b) 2^(lsb_a + lsb_b)`` with exponent ea + eb, or floor(log2|p|)
    when ``exact_exponent``; a zero product takes part in step 3 with ea + eb under
    ``spec.zero_terms`` (a zero operand's exponent is -126, FPS-GEMM-16), else none; a non-finite
    one (``specials``: the operands hold some) goes to the group's special sum; under
    ``spec.product_overflow`` a finite product >= 2^128 goes to the overflow sum (FPS-GEMM-18) and
    takes no part."""
    s = a.sig * b.sig
    lsb = a.lsb + b.lsb
    nz = s != 0  # (a special operand has sig 0: its products are not among these)
    special = overflow = None
    zero = ~nz
    if specials:
        fa, fb = a.special == FINITE, b.special == FINITE
        fin = fa & fb
        nan = ~fin & ((a.special == NAN) | (b.special == NAN) | (fa & (a.sig == 0)) | (fb & (b.sig == 0)))
        neg_a = (a.special == NEG_INF) | (fa & (a.sig < 0))
        neg_b = (b.special == NEG_INF) | (fb & (b.sig < 0))
        inf = ~fin & ~nan
        special = special_sum(nan.any(-1), (inf & (neg_a == neg_b)).any(-1), (inf & (neg_a != neg_b)).any(-1))
        zero = zero & fin
    live = nz
    top = None
    if exact_exponent or spec.product_overflow:
        top = lsb + bitlen(s.abs()) - 1
    if spec.product_overflow:
        over = nz & (top >= OVERFLOW_EXPONENT)
        overflow = special_sum(torch.zeros_like(over[..., 0]), (over & (s > 0)).any(-1), (over & (s < 0)).any(-1))
        live = nz & ~over
    pair = a.aexp + b.aexp
    aexp = top if exact_exponent else pair
    aexp = torch.where(live, aexp, _no_terms(aexp))
    if spec.zero_terms:
        aexp = torch.where(zero, pair, aexp)
    zeros = torch.zeros_like(s)
    return GroupTerms(torch.where(live, s, zeros), torch.where(live, lsb, zeros), aexp, special, overflow)


def block_sums(pa: torch.Tensor, pb: torch.Tensor, size: int, gemm: bool) -> torch.Tensor:
    """The payload sums of a group's block terms of ``size`` products: pa, pb the E2M1 payloads as
    2q, (R, G) and (C, G) in a GEMM tile (-> (R, C, G/size)) or both (R, G) in a row-wise dot
    (-> (R, G/size)); int64, exact (module docstring: float64 ``torch.bmm`` of small integers)."""
    nt = pa.shape[-1] // size
    if not gemm:
        return (pa * pb).reshape(pa.shape[0], nt, size).sum(-1)
    r, c = pa.shape[0], pb.shape[0]
    if size < BMM_MIN_TERM:
        prod = pa[:, None, :] * pb[None, :, :]
        return prod.reshape(r, c, nt, size).sum(-1)
    xa = pa.reshape(r, nt, size).permute(1, 0, 2).to(torch.float64)   # (nt, R, u)
    xb = pb.reshape(c, nt, size).permute(1, 2, 0).to(torch.float64)   # (nt, u, C)
    return torch.bmm(xa, xb).permute(1, 2, 0).to(torch.int64)         # exact: integers below 2^53


def scaled_block_terms(acc: torch.Tensor, sa: TermOperand, sb: TermOperand, scale_exponent: bool,
                       spec: ChainSpec, specials: bool) -> GroupTerms:
    """Step 1 with ``scale_placement="block"`` (fast: ``scaled_block_terms``; exact: ``block_terms``):
    term t = the payload sum ``acc[..., t]`` of a block term times its scales ``sa``, ``sb``
    (scale values per term, broadcast to ``acc``'s shape; ``aexp`` the scales' alignment
    exponents, NO_TERMS for a zero scale outside the alignment): ``(acc sig_a sig_b)
    2^(lsb_a + lsb_b - 2)``, exponent ea_s + eb_s when ``scale_exponent`` (``block_exponent=
    "scales"``; a zero term keeps it under ``spec.zero_terms``), else floor(log2|term|).  A
    non-finite scale (``specials``) makes the term NaN (a NaN scale, a zero sum or a zero scale
    beside an Inf), else an Inf of the term's sign."""
    s = acc * (sa.sig * sb.sig)
    lsb = sa.lsb + sb.lsb + 2 * E2M1_LSB
    special = None
    take = torch.ones_like(s, dtype=torch.bool)
    if specials:
        fa, fb = sa.special == FINITE, sb.special == FINITE
        fin = fa & fb
        nan = ~fin & ((sa.special == NAN) | (sb.special == NAN) | (acc == 0) | (fa & (sa.sig == 0))
                      | (fb & (sb.sig == 0)))
        neg = (acc < 0) ^ ((sa.special == NEG_INF) | (fa & (sa.sig < 0))) ^ ((sb.special == NEG_INF) | (fb & (sb.sig < 0)))
        inf = ~fin & ~nan
        special = special_sum(nan.any(-1), (inf & ~neg).any(-1), (inf & neg).any(-1))
        take = fin
    if scale_exponent:
        take = take & (sa.aexp != NO_TERMS) & (sb.aexp != NO_TERMS)
        if not spec.zero_terms:
            take = take & (s != 0)
        aexp = sa.aexp + sb.aexp
    else:
        take = take & (s != 0)
        aexp = lsb + bitlen(s.abs()) - 1
    zeros = torch.zeros_like(s)
    return GroupTerms(torch.where(take, s, zeros), torch.where(take, lsb, zeros),
                      torch.where(take, aexp, _no_terms(aexp)), special, None)
