"""GEMM accumulation models: one parametrised family and its named presets (docs/gemm.rst, FPS-GEMM-*).

A :class:`GemmModel` is data only: every choice a low-precision dot product makes
between the exact products and the FP32 (or BF16) output, named.  The executable
spec that gives the parameters their meaning is :mod:`fpspec.exact.accumulate`;
:mod:`fpspec.fast.accumulate` is its bit-equal Numba twin.

One output element ``y[m, n]`` of ``A (M x K) @ BT (N x K)^T`` is computed as
(FPS-GEMM-1; the step numbers are used throughout the docs and the code):

1. **Terms.**  With ``scale_placement="product"`` every product ``a_k * b_k`` of two
   operand values is a term (K terms); with ``"block"`` the exact sum of the
   payload products of one scale block, times the two block scales, is one term
   (K/B terms).  ``operand_domain`` says what an operand value is: the encoded
   value (payload x block scale, the tensor scale left out, applied as alpha in
   step 7), its FP32 rounding with the tensor decode scale folded in, or the exact
   dequantized value.
2. **Groups.**  The terms are taken in order of k in groups of ``group_size``
   products (None: all K in one group).
3. **Alignment window.**  Inside a group, every nonzero term (and the running
   accumulator ``c`` when ``fused``) has an alignment exponent: for a product,
   ``ea + eb`` (``product_exponent="operands"``, the unnormalised product of
   Khattak & Mikaitis) or ``floor(log2|p|)`` (``"exact"``); for ``c``, its FP32
   exponent ``max(floor(log2|c|), -126)``.  With E the largest of these (raised
   to ``align_exponent_floor`` if given), each term keeps only its multiples of
   ``2^(E - window_bits)``: ``below_window="truncate"`` truncates the magnitude
   (toward zero), ``"floor"`` truncates the two's-complement value (toward -inf),
   ``"exact"`` keeps every bit (then ``window_bits`` must be None).
4. **Group sum.**  The kept terms are summed exactly.
   *Fused* (``fused=True``): ``c`` took part in step 3 and the exact sum is rounded
   once with ``accumulate_rounding`` to ``accumulate_bits`` fraction bits:
   ``c <- round(c' + sum)``.
   *Not fused*: the group's sum is rounded to FP32 with ``group_rounding``
   (``"none"`` keeps it exact) giving ``p``, then ``c <- round_acc(c + p)``.
   ``round_acc`` keeps ``accumulate_bits`` fraction bits (23: FP32) in FP32's
   exponent range (quantum ``2^(max(e, -126) - accumulate_bits)``, overflow as
   FP32: Inf under RNE, the largest such value below 2^128 under RTZ) (FPS-GEMM-13).
5. **Promotion.**  With ``promotion_interval = N_C``, after every N_C products
   (and at the end of K) the partial ``c`` is added into a separate FP32
   accumulator ``C <- round_promo(C + c)`` and ``c`` restarts at 0; the output of
   the chain is then ``C``, else ``c``.  **Split K:** with ``split_k = S``, K is
   cut into contiguous slices of S products (the last may be shorter); steps 2-5
   run on each slice as its own chain (groups and promotion counted from the slice
   start), and the slice results ``r_0, r_1, ...`` are added in order with FP32
   RNE: ``y <- RNE32(...RNE32(r_0 + r_1) ... + r_last)`` (FPS-GEMM-14).
   **Slice plans** (FPS-GEMM-23): ``slice_plan = (L_0, L_1, ...)`` gives the slice
   lengths outright (any lengths, summing to K); ``k_tile = T`` cuts each slice into K
   tiles of T products and counts the groups from each tile's start;
   ``slice_residue="first"`` puts a slice's partial K tile (of L mod T products) first,
   as cutlass's residue-first main loop does, ``"last"`` (default) at its end.
6. **Snap.**  With ``snap_bits = L``: ``y <- round_half_even(y * 2^L) / 2^L``.
7. **Alpha.**  ``y <- alpha * y`` (for quantized operands only): alpha from the
   amaxes and targets, ``amax_a amax_b / ((6 T_a)(6 T_b))``, or from the
   per-operand FP32 decode scales ``d_a d_b``; ``alpha_rounding`` says how it is
   rounded (``"exact"``: never, y = RNE32(alpha y); ``"once"``: alpha =
   RNE32(alpha exact); ``"twice"``: each operand factor rounded to FP32, then
   their product; ``"fp32-divide"`` / ``"fp32-reciprocal"``: the seed's binary32
   order, RNE32(amax_a amax_b) divided by, or multiplied with the FP32 reciprocal
   of, the binary64 denominator rounded to FP32).
8. **Output.**  ``"fp32"`` as is, or ``"bf16"``: RNE to BF16 (returned as the
   float32 of that BF16 value).

Special values (FPS-GEMM-2): a NaN operand or 0 x Inf makes that output NaN;
Inf terms propagate (Inf - Inf is NaN); an FP32 rounding that overflows gives
Inf under RNE and max finite under RTZ (Inf with ``accumulate_overflow="inf"``).  A
zero inside the chain (steps 1-5) is +0 (``chain_zero="signed"``: a negative underflow
gives -0); steps 6-8 keep IEEE signs (a negative value that snaps, scales or converts to
zero gives -0).  A NaN output has the bits ``nan_encoding`` names.

Instruction-level parameters (FPS-GEMM-16..22, docs/hardware-models.rst) refine steps
1-4 for single tensor-core / matrix-core instructions: whether zeros take part in the
alignment (``zero_alignment``), block-scaled values aligned by their scales
(``block_exponent``, ``block_term_size``), AMD's staged groups (``product_overflow``,
``window_lanes``, ``join_*``), an FP16 accumulator (``accumulator_format``), the
instruction's k (``instruction_k``).  Every default keeps the behaviour above.

The named presets and their sources are :data:`fpspec.presets.PRESETS` (the library
presets ``cublas-h200-*``: :data:`fpspec.cublas.library.LIBRARY`); ``fpspec models`` lists
them.  This module holds the model, its parameters and overrides, and the operand contract
each preset states (:data:`CONTRACTS`); it imports no preset and no predictor.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from .errors import FpspecError

__all__ = [
    "GemmModel",
    "ZERO_ALIGNMENT_EXPONENT",
    "ACCUMULATOR_FORMATS",
    "NAN_BITS",
    "CHOICE_ALIASES",
    "PARAMETER_ALIASES",
    "PARAMETER_HELP",
    "parse_overrides",
    "OperandContract",
    "QuantizedForm",
    "CONTRACTS",
    "GENERIC_CONTRACT",
    "TENSOR_SCALE_PLACES",
    "TE_NVFP4_EPILOGUE",
    "SEED_EPILOGUE",
    "contract_of",
    "unknown_preset",
]

Rounding = Literal["rne", "rtz"]
GroupRounding = Literal["rne", "rtz", "none"]
BelowWindow = Literal["truncate", "floor", "exact"]
ProductExponent = Literal["operands", "exact"]
ScalePlacement = Literal["product", "block"]
OperandDomain = Literal["encoded", "decoded-fp32", "decoded-exact"]
AlphaSource = Literal["amax", "decode-scales", "none"]
AlphaRounding = Literal["exact", "once", "twice", "fp32-divide", "fp32-reciprocal"]
OutputFormat = Literal["fp32", "bf16", "fp16"]
ZeroAlignment = Literal["excluded", "emin"]
BlockExponent = Literal["value", "scales"]
ProductOverflow = Literal["none", "inf"]
JoinBelow = Literal["floor", "truncate"]
AccumulatorFormat = Literal["fp32", "fp16"]
AccumulateOverflow = Literal["ieee", "inf"]
ChainZero = Literal["positive", "signed"]
SliceResidue = Literal["last", "first"]
NanEncoding = Literal["ieee-quiet", "all-ones"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "below_window": ("truncate", "floor", "exact"),
    "product_exponent": ("operands", "exact"),
    "group_rounding": ("rne", "rtz", "none"),
    "accumulate_rounding": ("rne", "rtz"),
    "promotion_rounding": ("rne", "rtz"),
    "scale_placement": ("product", "block"),
    "operand_domain": ("encoded", "decoded-fp32", "decoded-exact"),
    "alpha_source": ("amax", "decode-scales", "none"),
    "alpha_rounding": ("exact", "once", "twice", "fp32-divide", "fp32-reciprocal"),
    "output_format": ("fp32", "bf16", "fp16"),
    "zero_alignment": ("excluded", "emin"),
    "block_exponent": ("value", "scales"),
    "product_overflow": ("none", "inf"),
    "join_below": ("floor", "truncate"),
    "accumulator_format": ("fp32", "fp16"),
    "accumulate_overflow": ("ieee", "inf"),
    "chain_zero": ("positive", "signed"),
    "nan_encoding": ("ieee-quiet", "all-ones"),
    "slice_residue": ("last", "first"),
}

#: Alignment exponent of a zero operand, a zero block scale and a zero accumulator under
#: ``zero_alignment="emin"``: FP32's emin, -126, in every format (MMA-Sim c785138,
#: ``extract_significand_exponent``; FPS-GEMM-16).
ZERO_ALIGNMENT_EXPONENT = -126

#: (emin, the binary exponent at which the format overflows, fraction bits) of each
#: accumulator format (FPS-GEMM-13, FPS-GEMM-19).
ACCUMULATOR_FORMATS: dict[str, tuple[int, int, int]] = {"fp32": (-126, 128, 23), "fp16": (-14, 16, 10)}

#: Output NaN bits per ``nan_encoding`` and output format (FPS-GEMM-2, FPS-GEMM-17): the
#: IEEE quiet NaN, or every bit below the sign set (NVIDIA tensor cores, MMA-Sim).  A BF16
#: output is returned as the float32 of the BF16 value, so its NaN is given as FP32 bits.
NAN_BITS: dict[tuple[str, str], int] = {
    ("ieee-quiet", "fp32"): 0x7FC00000, ("ieee-quiet", "bf16"): 0x7FC00000, ("ieee-quiet", "fp16"): 0x7E00,
    ("all-ones", "fp32"): 0x7FFFFFFF, ("all-ones", "bf16"): 0x7FFF0000, ("all-ones", "fp16"): 0x7FFF,
}

#: Other spellings accepted for a choice, and the canonical value they stand for:
#: ``rz`` is the GEMM models' former name of round toward zero, ``rtz`` in
#: :class:`fpspec.choices.RoundingMode` and everywhere else.
CHOICE_ALIASES: dict[str, str] = {"rz": "rtz"}
_ALIASED_FIELDS = ("group_rounding", "accumulate_rounding", "promotion_rounding")

#: Bound of ``align_exponent_floor``: far beyond the alignment exponent of any term or
#: FP32 accumulator (every one lies within -600..600), and keeps exponents machine integers.
ALIGN_EXPONENT_FLOOR_BOUND = 2000

#: One line per parameter (``fpspec models`` and docs/gemm.rst print these).
PARAMETER_HELP: dict[str, str] = {
    "group_size": "G: products per group (fused block); None = all of K in one group",
    "window_bits": "F = 23 + neab: fraction bits kept below the group's alignment exponent; None = no window",
    "below_window": "bits of a term below the window: truncate (magnitude, toward 0), floor (toward -inf), exact",
    "product_exponent": "alignment exponent of a product: operands (ea+eb, unnormalised) or exact floor(log2|p|)",
    "align_exponent_floor": "lower bound of the group's alignment exponent E (Khattak-Mikaitis min_exp_limit); None = none",
    "fused": "the running accumulator takes part in the group's alignment and rounding (block FMA)",
    "group_rounding": "rounding of a non-fused group's sum to FP32 before it is added: rne, rtz, none (exact)",
    "accumulate_rounding": "rounding of the running FP32 accumulator update (fused block, or c + p): rtz, rne",
    "promotion_interval": "N_C: products after which the partial is added into a separate FP32 accumulator; None = never",
    "promotion_rounding": "rounding of the promotion addition C + c: rne, rtz",
    "scale_placement": "block scales folded into each product (product) or applied to each scale block's exact sum (block)",
    "operand_domain": "operand values: encoded (payload x block scale; alpha later), decoded-fp32, decoded-exact",
    "snap_bits": "L: snap the accumulated value to the lattice 2^-L with ties to even; None = no snap",
    "alpha_source": "tensor-scale factor alpha: amax (amax_a amax_b / (6T_a 6T_b)), decode-scales (d_a d_b), none",
    "alpha_rounding": "how alpha is formed in FP32 before y = RNE32(alpha y): exact (never rounded), once, "
                      "twice, fp32-divide, fp32-reciprocal (the seed's binary32 order)",
    "output_format": "output conversion: fp32, or bf16 (RNE)",
    "require_full_groups": "K must be a multiple of group_size (whole hardware blocks); else FpspecError",
    "accumulate_bits": "fraction bits the running accumulator / fused block result keeps (0..23, in FP32's "
                       "exponent range), rounded with accumulate_rounding; 23 = FP32",
    "split_k": "S: K cut into slices of S products, each its own chain, slice results added in order "
               "with FP32 RNE (a library's split-K); None = one chain",
    "slice_plan": "the K slices' lengths in order of k (any lengths, summing to K; each slice its own chain, "
                  "results added in order with FP32 RNE), instead of split_k; None = split_k's slices",
    "k_tile": "T: each K slice cut into K tiles of T products, groups counted from each tile's start "
              "(a multiple of group_size); None = groups counted from the slice start",
    "slice_residue": "where a slice's partial K tile (L mod T products; without k_tile its partial group) "
                     "lies: last, or first (cutlass's residue-first main loop)",
    "instruction_k": "k of the modelled hardware instruction: K must be a multiple of it (a split instruction "
                     "has G = k/2); None = any K",
    "zero_alignment": "zero products and zero blocks, and c = 0, in the alignment: excluded (take no part) or "
                      "emin (a zero operand, scale or c aligns at -126, as MMA-Sim)",
    "block_exponent": "alignment exponent of block-scaled values: value (floor(log2) of the scaled value or "
                      "block term) or scales (payload and scale exponents apart; a block term: the two scale "
                      "exponents only)",
    "block_term_size": "products per block term with scale_placement=block (a divisor of the scale block); "
                       "None = the scale block",
    "product_overflow": "a product of magnitude >= 2^128: none (an ordinary term) or inf (an Inf term before the "
                        "window, as AMD CDNA3)",
    "window_lanes": "products of a group windowed in this many interleaved lanes (k mod lanes), each at its own "
                    "largest exponent, then cut at the joint one (AMD CDNA3 FP8: 2)",
    "join_sum_bits": "non-fused join: the group sum cut to 2^(M - bits), M = max(group exponent, c's); None = "
                     "no join (AMD CDNA3: 31)",
    "join_c_bits": "non-fused join: c cut to 2^(M - bits) (AMD CDNA3: 24)",
    "join_drop_bits": "non-fused join: c replaced by 0 when its exponent is below M - bits; None = never "
                      "(AMD CDNA3 FP8: 25)",
    "join_below": "how the join (and the lane merge) cuts: floor (toward -inf) or truncate (toward 0)",
    "accumulator_format": "format of the running accumulator c: fp32, or fp16 (C and D in binary16, emin -14, "
                          "overflow at 2^16)",
    "accumulate_overflow": "an accumulator rounding of magnitude >= 2^top: ieee (Inf under RNE, largest finite "
                           "under RTZ) or inf (Inf always: NVIDIA tensor cores)",
    "chain_zero": "a zero inside the chain: positive (always +0) or signed (a negative result that underflows "
                  "gives -0, as AMD CDNA3)",
    "nan_encoding": "bits of a NaN output: ieee-quiet (0x7FC00000, FP16 0x7E00) or all-ones (0x7FFFFFFF, FP16 "
                    "0x7FFF: NVIDIA)",
}

#: Short names accepted by :func:`get_model` / ``--set`` (``neab`` sets window_bits = 23 + neab).
PARAMETER_ALIASES: dict[str, str] = {
    "G": "group_size",
    "F": "window_bits",
    "N_C": "promotion_interval",
    "NC": "promotion_interval",
    "L": "snap_bits",
    "S": "split_k",
}


@dataclass(frozen=True)
class GemmModel:
    """Parameters of one accumulation model (FPS-GEMM-1).  See the module docstring for
    the meaning of each step; :data:`PARAMETER_HELP` has one line per field.

    Instances are validated on construction (FpspecError names the bad field); use
    :meth:`replace` (validated) to derive variants.
    """

    group_size: int | None = 64
    window_bits: int | None = None
    below_window: BelowWindow = "exact"
    product_exponent: ProductExponent = "exact"
    align_exponent_floor: int | None = None
    fused: bool = False
    group_rounding: GroupRounding = "rne"
    accumulate_rounding: Rounding = "rtz"
    promotion_interval: int | None = None
    promotion_rounding: Rounding = "rne"
    scale_placement: ScalePlacement = "product"
    operand_domain: OperandDomain = "encoded"
    snap_bits: int | None = None
    alpha_source: AlphaSource = "amax"
    alpha_rounding: AlphaRounding = "once"
    output_format: OutputFormat = "fp32"
    require_full_groups: bool = False
    accumulate_bits: int = 23
    split_k: int | None = None
    instruction_k: int | None = None
    zero_alignment: ZeroAlignment = "excluded"
    block_exponent: BlockExponent = "value"
    block_term_size: int | None = None
    product_overflow: ProductOverflow = "none"
    window_lanes: int = 1
    join_sum_bits: int | None = None
    join_c_bits: int | None = None
    join_drop_bits: int | None = None
    join_below: JoinBelow = "floor"
    accumulator_format: AccumulatorFormat = "fp32"
    accumulate_overflow: AccumulateOverflow = "ieee"
    chain_zero: ChainZero = "positive"
    nan_encoding: NanEncoding = "ieee-quiet"
    slice_plan: tuple[int, ...] | None = None
    k_tile: int | None = None
    slice_residue: SliceResidue = "last"

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> FpspecError:
            return FpspecError(f"GEMM model parameter {name}={getattr(self, name)!r}: {why}")

        for name in _ALIASED_FIELDS:
            v = getattr(self, name)
            if isinstance(v, str) and v in CHOICE_ALIASES:
                object.__setattr__(self, name, CHOICE_ALIASES[v])
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise bad(name, f"must be one of {', '.join(choices)}")
        for name in ("fused", "require_full_groups"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, "must be true or false")
        required = ("accumulate_bits", "window_lanes")
        for name in ("group_size", "promotion_interval", "split_k", "window_bits", "snap_bits",
                     "align_exponent_floor", "accumulate_bits", "instruction_k", "block_term_size",
                     "window_lanes", "join_sum_bits", "join_c_bits", "join_drop_bits"):
            v = getattr(self, name)
            if v is None and name not in required:
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise bad(name, "must be an integer" + ("" if name in required else " or None"))
            object.__setattr__(self, name, int(v))  # numpy integers are accepted, stored as int
        for name in ("group_size", "promotion_interval", "split_k", "instruction_k", "block_term_size"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise bad(name, "must be a positive integer or None")
        if self.window_bits is not None and not -60 <= self.window_bits <= 200:
            raise bad("window_bits", "must lie in -60..200")
        if self.snap_bits is not None and not -126 <= self.snap_bits <= 149:
            raise bad("snap_bits", "must lie in -126..149")
        if (self.align_exponent_floor is not None
                and abs(self.align_exponent_floor) > ALIGN_EXPONENT_FLOOR_BOUND):
            raise bad("align_exponent_floor", f"must lie in -{ALIGN_EXPONENT_FLOOR_BOUND}.."
                                              f"{ALIGN_EXPONENT_FLOOR_BOUND}")
        acc_bits = ACCUMULATOR_FORMATS[self.accumulator_format][2]
        if not 0 <= self.accumulate_bits <= acc_bits:
            raise bad("accumulate_bits", f"must be an integer in 0..{acc_bits} (the accumulator is an "
                                         f"{self.accumulator_format.upper()} value)")
        if self.split_k is not None and self.group_size is not None and self.split_k % self.group_size:
            raise bad("split_k", f"must be a multiple of group_size={self.group_size} (slices hold whole groups)")
        if (self.window_bits is None) != (self.below_window == "exact"):
            raise bad("below_window", "is 'exact' exactly when window_bits is None")
        if self.fused and self.group_rounding != "none":
            raise bad("group_rounding", "must be 'none' for a fused model (the block is rounded once "
                                        "with accumulate_rounding)")
        if self.promotion_interval is not None:
            if self.group_size is None:
                raise bad("promotion_interval", "needs a group_size")
            if self.promotion_interval % self.group_size:
                raise bad("promotion_interval", f"must be a multiple of group_size={self.group_size}")
        self._check_instruction_parameters(bad)
        self._check_slice_plan(bad)

    def _check_slice_plan(self, bad) -> None:
        """The rules of the slice-plan parameters (FPS-GEMM-23)."""
        if self.slice_plan is not None:
            plan = self.slice_plan
            if isinstance(plan, (str, bytes)) or not isinstance(plan, (tuple, list)) or not plan:
                raise bad("slice_plan", "must be a non-empty sequence of positive integers or None")
            if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1 for v in plan):
                raise bad("slice_plan", "must hold positive integers (slice lengths)")
            object.__setattr__(self, "slice_plan", tuple(int(v) for v in plan))
            if self.split_k is not None:
                raise bad("slice_plan", "and split_k are exclusive (a plan gives every slice's length)")
        if self.k_tile is not None:
            if isinstance(self.k_tile, bool) or not isinstance(self.k_tile, numbers.Integral) or self.k_tile < 1:
                raise bad("k_tile", "must be a positive integer or None")
            object.__setattr__(self, "k_tile", int(self.k_tile))
            if self.group_size is not None and self.k_tile % self.group_size:
                raise bad("k_tile", f"must be a multiple of group_size={self.group_size} (a tile holds whole groups)")
        if (self.slice_plan is not None or self.k_tile is not None or self.slice_residue != "last") and \
                (self.accumulator_format != "fp32" or self.chain_zero != "positive"):
            raise bad("slice_plan", "slice plans need accumulator_format=fp32 and chain_zero=positive")

    def slice_lengths(self, k: int) -> list[int]:
        """The K slices' lengths (FPS-GEMM-14, FPS-GEMM-23): ``slice_plan``, or slices of
        ``split_k`` (the last shorter), or one slice of K; none for K = 0."""
        if self.slice_plan is not None:
            return list(self.slice_plan)
        if k <= 0:
            return []
        s = self.split_k or k
        return [min(s, k - s0) for s0 in range(0, k, s)]

    def _check_instruction_parameters(self, bad) -> None:
        """The consistency rules of the instruction-level parameters (FPS-GEMM-16..20)."""
        if self.instruction_k is not None and self.group_size is not None and self.instruction_k % self.group_size:
            raise bad("instruction_k", f"must be a multiple of group_size={self.group_size} (an instruction "
                                       "holds whole groups)")
        if self.zero_alignment == "emin":
            if self.product_exponent != "operands":
                raise bad("zero_alignment", "emin needs product_exponent=operands (a zero product has no "
                                            "floor(log2))")
            if self.scale_placement == "block" and self.block_exponent != "scales":
                raise bad("zero_alignment", "emin with scale_placement=block needs block_exponent=scales")
        if self.block_exponent == "scales":
            if self.operand_domain != "encoded":
                raise bad("block_exponent", "scales needs operand_domain=encoded (payloads and block scales apart)")
            if self.product_exponent != "operands":
                raise bad("block_exponent", "scales needs product_exponent=operands")
        if self.block_term_size is not None:
            if self.scale_placement != "block":
                raise bad("block_term_size", "is for scale_placement=block")
            if self.group_size is not None and self.group_size % self.block_term_size:
                raise bad("block_term_size", f"must divide group_size={self.group_size}")
        if self.window_lanes < 1:
            raise bad("window_lanes", "must be a positive integer")
        if self.window_lanes > 1:
            if self.window_bits is None or self.group_size is None or self.group_size % self.window_lanes:
                raise bad("window_lanes", "above 1 needs a window and a group_size that is a multiple of it")
            if self.fused or self.scale_placement != "product":
                raise bad("window_lanes", "above 1 needs fused=false and scale_placement=product (c joins after "
                                          "the lanes merge)")
        join = (self.join_sum_bits, self.join_c_bits)
        if (join[0] is None) != (join[1] is None):
            raise bad("join_sum_bits", "and join_c_bits are given together (or neither)")
        for name in ("join_sum_bits", "join_c_bits", "join_drop_bits"):
            v = getattr(self, name)
            if v is not None and not 0 <= v <= 200:
                raise bad(name, "must lie in 0..200 or be None")
        if self.join_sum_bits is not None:
            if self.fused or self.group_rounding != "none" or self.window_bits is None:
                raise bad("join_sum_bits", "needs fused=false, group_rounding=none and a window (c joins the "
                                           "group's exact windowed sum)")
        elif self.join_drop_bits is not None:
            raise bad("join_drop_bits", "needs join_sum_bits and join_c_bits")
        if self.accumulator_format == "fp16":
            if self.output_format != "fp16":
                raise bad("accumulator_format", "fp16 needs output_format=fp16 (D is the FP16 accumulator)")
            if not self.fused or self.promotion_interval is not None or self.split_k is not None:
                raise bad("accumulator_format", "fp16 needs fused=true, no promotion and no split_k")
        if self.chain_zero == "signed" and (self.join_sum_bits is None or self.promotion_interval is not None
                                            or self.split_k is not None):
            raise bad("chain_zero", "signed needs a join (join_sum_bits), no promotion and no split_k")

    # -------------------------------------------------------------- helpers
    @property
    def neab(self) -> int | None:
        """Khattak & Mikaitis' extra alignment bits: window_bits - 23 (None without a window)."""
        return None if self.window_bits is None else self.window_bits - 23

    def replace(self, **overrides: Any) -> "GemmModel":
        """A validated copy with some parameters changed (aliases of PARAMETER_ALIASES and
        ``neab`` accepted)."""
        canon = _canonical_overrides(overrides)
        if canon.get("fused") is True and "group_rounding" not in canon:
            canon["group_rounding"] = "none"  # a fused block has no separate group rounding
        return dataclasses.replace(self, **canon)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "GemmModel":
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise FpspecError(f"unknown GEMM model parameter(s) {sorted(unknown)}")
        return cls(**d)

    def check_k(self, k: int) -> None:
        """FpspecError when K is not a multiple of ``instruction_k``, or ``require_full_groups``
        and K does not fill whole groups (a last partial promotion interval is always allowed:
        it is promoted at the end)."""
        if self.instruction_k is not None and k % self.instruction_k:
            raise FpspecError(f"K={k} is not a multiple of the instruction's k={self.instruction_k} "
                              "(instruction_k)")
        if self.slice_plan is not None and sum(self.slice_plan) != k:
            raise FpspecError(f"slice_plan sums to {sum(self.slice_plan)} products, K is {k} (slice_plan)")
        if not self.require_full_groups:
            return
        if self.group_size is not None and k % self.group_size:
            raise FpspecError(f"K={k} is not a multiple of group_size={self.group_size} "
                              f"(this model has require_full_groups=true)")


def _canonical_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    fields = {f.name for f in dataclasses.fields(GemmModel)}
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if key == "neab":
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise FpspecError(f"GEMM model parameter neab={value!r}: must be an integer or None")
            out["window_bits"] = None if value is None else 23 + int(value)
            continue
        name = PARAMETER_ALIASES.get(key, key)
        if name not in fields:
            raise FpspecError(f"unknown GEMM model parameter {key!r}; known: {', '.join(sorted(fields))} "
                              f"(aliases: {', '.join(sorted(PARAMETER_ALIASES))}, neab)")
        out[name] = value
    # Keep window_bits and below_window consistent when only one of them is changed.
    if "window_bits" in out and "below_window" not in out:
        out["below_window"] = "exact" if out["window_bits"] is None else "truncate"
    return out


# ------------------------------------------------------------ operand contracts
#: Where a contract puts the tensor scales of quantized operands: ``folded`` into the decoded
#: operands (operand_domain decoded-*), the model's own ``alpha`` (step 7), the library's
#: ``epilogue`` alpha after the MMA (an instruction's chain has none), or ``refused``.
TENSOR_SCALE_PLACES = ("folded", "alpha", "epilogue", "refused")

#: The FP32 alpha epilogue of a Blackwell NVFP4 GEMM as TransformerEngine launches it with cuBLASLt:
#: ``compute_nvfp4_per_tensor_scale_kernel`` (transformer_engine/common/recipe/nvfp4.cu) forms
#: ``alpha = 1.0f * amax_A * amax_B * factor_inv``, each step a binary32 product, with ``factor_inv``
#: the binary32 constant 1 / (6 * 6 * 448 * 448); cuBLASLt then scales the FP32 accumulator by it
#: (D = RNE32(alpha acc)).  That is ``alpha_source=amax, alpha_rounding=fp32-reciprocal``
#: (RNE32(RNE32(amax_a amax_b) RNE32(1 / (6 T_a)(6 T_b)))) for T = 448; torchao's NVFP4 matmul instead
#: multiplies by the product of the two decode scales (``alpha_source=decode-scales,
#: alpha_rounding=once``), a choice left to ``--set``.
TE_NVFP4_EPILOGUE = ("amax", "fp32-reciprocal")
_TE_EPILOGUE_SRC = ("NVIDIA/TransformerEngine transformer_engine/common/recipe/nvfp4.cu "
                    "compute_nvfp4_per_tensor_scale_kernel (alpha = amax_A * amax_B * factor_inv in FP32), "
                    "applied by cuBLASLt as the FP32 alpha of D = alpha (A B)")
#: The seed's alpha: probe_matched_fp4_gemm (MrHuff/ue5m3-fp4 backends/triton/api.py) multiplies
#: issue_rz_bf16_gemm's (snapped) output by ``_encoded_global_alpha``, the FP32 CUDA tensor
#: (amax_a amax_b).to(float32) / ((T_a 6)(T_b 6)): fp32-reciprocal on CUDA (see _SEED).
SEED_EPILOGUE = ("amax", "fp32-reciprocal")
_SEED_EPILOGUE_SRC = ("MrHuff/ue5m3-fp4 src/ue5m3_fp4/backends/triton/api.py probe_matched_fp4_gemm: "
                      "issue_rz_bf16_gemm(encoded A, encoded B) * _encoded_global_alpha(amax_a, amax_b, T_a, T_b), "
                      "the alpha as torch forms it on CUDA (tools/gpu/seed_alpha_cuda.py)")


@dataclass(frozen=True)
class QuantizedForm:
    """One block-scaled operand form a model takes (FPS-GEMM-25): its payload formats, its
    scale format, the block sizes and the tiles (a ``BxB`` tile reaches a row-scaled MMA as B
    equal ``1xB`` scales per row)."""

    payloads: tuple[str, ...]
    scale_format: str
    blocks: tuple[int, ...]
    tiles: tuple[str, ...] = ("1xB", "BxB")

    def takes(self, payload: str, scale_format: str, block: int, tile: str) -> bool:
        return payload in self.payloads and scale_format == self.scale_format and block in self.blocks \
            and tile in self.tiles

    def describe(self, with_payloads: bool = True) -> str:
        blocks = " or ".join(str(b) for b in self.blocks)
        tiles = "" if self.tiles == ("1xB", "BxB") else f", {' or '.join(self.tiles)} tiles"
        head = f"{' or '.join(p.upper() for p in self.payloads)} with " if with_payloads else ""
        return f"{head}{self.scale_format.upper()} scales in blocks of {blocks}{tiles}"


@dataclass(frozen=True)
class OperandContract:
    """What a GEMM model takes as operands, as data (FPS-GEMM-25): the code formats of plain
    operands, the block-scaled forms of quantized ones, whether A and BT may differ
    (``mixed``: two payload or code formats; the scale format and block are always one for
    both), and the alpha epilogue that carries the operands' tensor scales where the model's
    chain has none.  ``any_operands``: every operand fpspec computes (the reference models).
    :func:`fpspec.matmul.gemm` refuses anything else (FpspecError naming the operand, the model
    and the rule: :func:`fpspec.gemm_operands.contract_violation`) unless the caller asks for a
    what-if run."""

    plain: tuple[str, ...] = ()
    quantized: tuple[QuantizedForm, ...] = ()
    mixed: bool = False
    any_operands: bool = False
    epilogue: tuple[str, str] | None = None
    source: str = ""
    epilogue_source: str = ""

    def rule(self) -> str:
        """The contract in words, as the refusals quote it."""
        if self.any_operands:
            return "every operand fpspec computes (code arrays of any format, quantized tensors of any scheme)"
        parts = []
        if self.plain:
            kind = "code arrays"
            if len(self.plain) > 1:
                kind += " (A and BT may differ)" if self.mixed else ", one format for both"
            parts.append(f"{' or '.join(self.plain)} {kind}")
        if self.quantized:
            forms, payloads = [], None
            for f in self.quantized:
                forms.append(f.describe(with_payloads=f.payloads != payloads))
                payloads = f.payloads
            mixed = " (payloads may differ)" if self.mixed and any(len(f.payloads) > 1 for f in self.quantized) \
                else ""
            parts.append(f"{_either(forms)}, one scaling for both operands{mixed}")
        return "; or ".join(parts) if parts else "no operands"

    def tensor_scales(self, model: "GemmModel") -> str:
        """Where this contract puts the tensor scales under ``model`` (:data:`TENSOR_SCALE_PLACES`)."""
        if model.operand_domain != "encoded":
            return "folded"
        if model.alpha_source != "none":
            return "alpha"
        return "epilogue" if self.epilogue is not None else "refused"

    def tensor_scales_text(self, model: "GemmModel") -> str:
        """:meth:`tensor_scales` in words, with the alpha's source and rounding (the docs' table)."""
        place = self.tensor_scales(model)
        if place == "folded":
            return f"folded into the operands ({model.operand_domain})"
        if place == "alpha":
            return f"the model's alpha (alpha_source={model.alpha_source}, alpha_rounding={model.alpha_rounding})"
        if place == "epilogue":
            assert self.epilogue is not None
            return (f"FP32 alpha epilogue after the chain (alpha_source={self.epilogue[0]}, "
                    f"alpha_rounding={self.epilogue[1]})")
        return "refused (the model has no alpha)"


def _either(items: list[str]) -> str:
    """``a``, ``a or b``, ``a, b, or c``."""
    return items[0] if len(items) == 1 else (" or ".join(items) if len(items) == 2 else
                                             ", ".join(items[:-1]) + ", or " + items[-1])


#: The contract of every model given as parameters (a GemmModel, not a preset name): any operand;
#: tensor scales go where the parameters say, and are refused where they would be dropped.
GENERIC_CONTRACT = OperandContract(any_operands=True, source="a model given as parameters: no hardware contract")

_E2M1 = ("e2m1",)
_FP8 = ("e4m3", "e5m2")
_F16 = ("fp16", "bf16")
_NVFP4_FORMS = (QuantizedForm(_E2M1, "ue4m3", (16,)), QuantizedForm(_E2M1, "ue8m0", (32, 16)))
_MX_F8F6F4_FORMS = (QuantizedForm(("e4m3", "e5m2", "e2m1"), "ue8m0", (32,)),)
_UE5M3_FORMS = (QuantizedForm(_E2M1, "ue5m3", (16, 32)), QuantizedForm(_E2M1, "ue5m3fnu", (16, 32)))
_PTX = "PTX ISA, the instruction's operand types (docs/hardware-models.rst); "


def _instruction_contract(plain: tuple[str, ...] = (), quantized: tuple[QuantizedForm, ...] = (),
                          mixed: bool = False, why: str = "") -> OperandContract:
    return OperandContract(plain=plain, quantized=quantized, mixed=mixed, epilogue=TE_NVFP4_EPILOGUE,
                           source=_PTX + why, epilogue_source=_TE_EPILOGUE_SRC)


_SEED_CONTRACT = OperandContract(
    quantized=(*_UE5M3_FORMS, *_NVFP4_FORMS),
    source="arXiv 2609.02846: the model of a Blackwell FP4 GEMM (the operands of kind::mxf4nvf4: UE4M3 scales "
           "in blocks of 16, UE8M0 in blocks of 32 or 16), applied by the seed to E2M1 with UE5M3 scales "
           "(probe_matched_fp4_gemm: block_size 16 or 32)")
_SEED_TRITON_CONTRACT = OperandContract(
    plain=("bf16",), quantized=_UE5M3_FORMS, epilogue=SEED_EPILOGUE,
    source="MrHuff/ue5m3-fp4 issue_rz_bf16_gemm (BF16 operands) and probe_matched_fp4_gemm (E2M1 with UE5M3 "
           "scales, block 16 or 32, materialised as BF16 in the encoded domain: exact)",
    epilogue_source=_SEED_EPILOGUE_SRC)
_REFERENCE_CONTRACT = OperandContract(any_operands=True, source="fpspec reference: no hardware")
_KM_FP8 = OperandContract(plain=_FP8, mixed=True, source="Khattak & Mikaitis' FP8 tensor-core model: "
                          "e4m3 / e5m2 operands (mixed as the wgmma / tcgen05 FP8 instructions take them)")
_KM_F16 = OperandContract(plain=_F16, source="Khattak & Mikaitis' FP16/BF16 tensor-core model: one type for "
                          "both operands (mma .f16.f16 or .bf16.bf16)")

#: Each preset's operand contract (FPS-GEMM-25), by name.
CONTRACTS: dict[str, OperandContract] = {
    "seed-probe-matched": _SEED_CONTRACT, "seed-probe-matched-nosnap": _SEED_CONTRACT,
    "seed-triton-h200": _SEED_TRITON_CONTRACT, "seed-triton-h200-snap": _SEED_TRITON_CONTRACT,
    "decoded-fp32": _REFERENCE_CONTRACT, "exact": _REFERENCE_CONTRACT,
    "km-h100-fp8": _KM_FP8, "km-h100-fp8-promote128": _KM_FP8, "km-b200-fp8": _KM_FP8,
    "km-h100-bf16": _KM_F16, "km-a100-bf16": _KM_F16,
    "km-v100-fp16": OperandContract(plain=("fp16",), source="Khattak & Mikaitis' V100 model: FP16 (Volta has "
                                    "no BF16)"),
    "sm70-f16": _instruction_contract(("fp16",), why="mma.m8n8k4 .f16.f16 (Volta has no BF16)"),
    "sm75-f16": _instruction_contract(("fp16",), why="mma.m16n8k8 .f16.f16 (Turing has no BF16)"),
    "sm80-f16": _instruction_contract(_F16, why="mma.m16n8k16 .f16.f16 or .bf16.bf16"),
    "sm80-f16-f16acc": _instruction_contract(("fp16",), why="mma.m16n8k16 .f16.f16.f16.f16"),
    "sm89-fp8": _instruction_contract(_FP8, mixed=True, why="mma.m16n8k32 .{e4m3,e5m2}.{e4m3,e5m2}"),
    "sm90-f16": _instruction_contract(_F16, why="wgmma m64nNk16 .f16.f16 or .bf16.bf16"),
    "sm90-f16-f16acc": _instruction_contract(("fp16",), why="wgmma m64nNk16 .f16.f16.f16"),
    "sm90-fp8": _instruction_contract(_FP8, mixed=True, why="wgmma m64nNk32 .{e4m3,e5m2}.{e4m3,e5m2}"),
    "sm100-f16": _instruction_contract(_F16, why="tcgen05.mma kind::f16"),
    "sm100-f8f6f4": _instruction_contract(_FP8, mixed=True, why="tcgen05.mma kind::f8f6f4"),
    "sm100-mxf8f6f4": _instruction_contract(quantized=_MX_F8F6F4_FORMS, mixed=True,
                                            why="tcgen05.mma kind::mxf8f6f4.block_scale: UE8M0, scale_vec::1X "
                                                "(block 32)"),
    "sm100-mxf4nvf4": _instruction_contract(quantized=_NVFP4_FORMS,
                                            why="tcgen05.mma kind::mxf4nvf4.block_scale: E2M1 with UE4M3 "
                                                "scale_vec::4X (block 16) or UE8M0 scale_vec::2X / 4X (block 32 / "
                                                "16), one scale type for A and B"),
    "sm120-f8f6f4": _instruction_contract(_FP8, mixed=True, why="mma.m16n8k32 kind::f8f6f4"),
    "sm120-mxf8f6f4": _instruction_contract(quantized=_MX_F8F6F4_FORMS, mixed=True,
                                            why="mma.m16n8k32 kind::mxf8f6f4.block_scale (UE8M0, block 32)"),
    "sm120-mxf4nvf4": _instruction_contract(quantized=_NVFP4_FORMS,
                                            why="mma.m16n8k64 kind::mxf4nvf4.block_scale (as tcgen05)"),
    "cdna3-f16": OperandContract(plain=_F16, source="AMD CDNA3 ISA v_mfma_f32_16x16x16_{f16,bf16} (also "
                                 "32x32x8): one type for both"),
    "cdna3-fp8": OperandContract(plain=("e4m3fnuz", "e5m2fnuz"), mixed=True,
                                 source="AMD CDNA3 ISA v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8}"),
    "cublas-h200-bf16": OperandContract(plain=("bf16",), source="torch.mm on BF16 (the measured call)"),
    "cublas-h200-fp16": OperandContract(plain=("fp16",), source="torch.mm on FP16 (the measured call)"),
    "cublas-h200-fp8": OperandContract(plain=("e4m3",), source="torch._scaled_mm on float8_e4m3fn with scales 1 "
                                       "(the measured call; its kernel table holds no e5m2 call)"),
    "cublas-h200-fp8-fast": OperandContract(plain=("e4m3",), source="torch._scaled_mm on float8_e4m3fn, "
                                            "use_fast_accum=True (the measured call)"),
}


def unknown_preset(name: object) -> FpspecError:
    """The refusal of a name that is no preset and no library preset, listing every one (each
    preset, library presets included, states its contract in :data:`CONTRACTS`, in the order
    ``fpspec models`` lists them)."""
    return FpspecError(f"unknown GEMM model preset {name!r}; known: {', '.join(CONTRACTS)}")


def contract_of(model: "str | GemmModel") -> OperandContract:
    """The operand contract of a preset (by name) or of a model given as parameters
    (:data:`GENERIC_CONTRACT`) (FPS-GEMM-25)."""
    if isinstance(model, GemmModel):
        return GENERIC_CONTRACT
    try:
        return CONTRACTS[model]
    except (KeyError, TypeError):
        raise unknown_preset(model) from None


def _parse_value(name: str, text: str) -> Any:
    """One ``--set`` value: a choice name of the parameter (``none`` too, where it is one),
    none / null / off (None), true / false, an integer, else the text."""
    t = text.strip()
    low = t.lower()
    field = PARAMETER_ALIASES.get(name, name)
    if field == "slice_plan" and low not in ("none", "null", "off"):
        try:
            return tuple(int(v, 0) for v in t.replace(" ", "").split(","))
        except ValueError:
            raise FpspecError(f"--set slice_plan expects comma-separated slice lengths, got {text!r}") from None
    if field in _CHOICES and (low in _CHOICES[field] or (field in _ALIASED_FIELDS and low in CHOICE_ALIASES)):
        return low
    if low in ("none", "null", "off"):
        return None
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no"):
        return False
    try:
        return int(t, 0)
    except ValueError:
        return t


def parse_overrides(items: "list[str] | tuple[str, ...] | None") -> dict[str, Any]:
    """Parse ``PARAM=VALUE`` strings (``--set``): integers, true/false, none, or a choice name."""
    out: dict[str, Any] = {}
    for item in items or ():
        if "=" not in item:
            raise FpspecError(f"--set expects PARAM=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = _parse_value(key.strip(), value)
    return out
