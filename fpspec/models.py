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

The presets and their sources are :data:`PRESETS`; ``fpspec models`` lists them.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from . import cublas_h200
from .errors import FpspecError

__all__ = [
    "GemmModel",
    "Preset",
    "Backing",
    "BACKING_KINDS",
    "PRESETS",
    "INSTRUCTION_PRESETS",
    "MMASIM",
    "ZERO_ALIGNMENT_EXPONENT",
    "ACCUMULATOR_FORMATS",
    "NAN_BITS",
    "CHOICE_ALIASES",
    "PARAMETER_ALIASES",
    "PARAMETER_HELP",
    "get_model",
    "resolve",
    "kernel_model",
    "model_for_kernel",
    "model_for_shape",
    "LIBRARY",
    "LIBRARY_PRESETS",
    "arithmetic_summary",
    "parse_overrides",
    "preset_names",
    "presets_json",
    "OperandContract",
    "QuantizedForm",
    "CONTRACTS",
    "GENERIC_CONTRACT",
    "TENSOR_SCALE_PLACES",
    "TE_NVFP4_EPILOGUE",
    "SEED_EPILOGUE",
    "contract_of",
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


#: What a preset's numbers rest on (:class:`Backing`): ``measured`` (fpspec's own
#: bit-exact comparison with a real GPU), ``hardware-validated-model`` (a public model
#: that its authors checked bitwise against the hardware, e.g. MMA-Sim), ``paper`` (taken
#: from a publication; fpspec has not measured it), ``fpspec-choice`` (a reference or
#: convention fpspec defines).
BACKING_KINDS = ("measured", "hardware-validated-model", "paper", "fpspec-choice")
BackingKind = Literal["measured", "hardware-validated-model", "paper", "fpspec-choice"]


@dataclass(frozen=True)
class Backing:
    """A preset's provenance as data (``fpspec models --json``; the docs' table of what
    each model is backed by).  ``measured`` names the ``device``, the number of FP32
    ``outputs`` compared bit for bit and the (M, N, K) ``shapes``; ``reference`` says
    where the evidence is written down."""

    kind: BackingKind
    detail: str
    reference: str
    device: str | None = None
    outputs: int | None = None
    shapes: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in BACKING_KINDS:
            raise FpspecError(f"preset backing kind {self.kind!r}: must be one of {', '.join(BACKING_KINDS)}")
        measured = self.device is not None and bool(self.outputs) and bool(self.shapes)
        if measured != (self.kind == "measured"):
            raise FpspecError(f"preset backing {self.kind!r}: device, outputs and shapes are given exactly "
                              "for a measured preset")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["shapes"] = [list(x) for x in self.shapes]
        return d


@dataclass(frozen=True)
class Preset:
    """A named model with its provenance (printed by ``fpspec models`` and docs/gemm.rst):
    ``source`` cites, ``backing`` classifies the evidence."""

    name: str
    model: GemmModel
    summary: str
    source: str
    backing: Backing
    #: The GPU generation an instruction-level preset models (empty for the others).
    architecture: str = ""
    #: The PTX / ISA instruction it models (empty for the others).
    instruction: str = ""
    #: A library preset's call (a :data:`fpspec.cublas_h200.TARGETS` name): the model
    #: depends on the GEMM's shape, :func:`resolve` gives it (empty for the others).
    library: str = ""


_FP32_SEQ = GemmModel(group_size=1, fused=False, group_rounding="rne", accumulate_rounding="rne",
                      operand_domain="decoded-fp32", alpha_source="none", snap_bits=None)


def km_accumulate_bits(neab: int) -> int:
    """Kept fraction bits of a Khattak-Mikaitis block result for FP32 output: 23 + neab
    when neab < 0, else 23 (their GEMM.m narrows the output significand by neab only
    when neab is negative) (FPS-GEMM-15)."""
    return min(23, 23 + neab)


def _km(g: int, window: int) -> GemmModel:
    return GemmModel(group_size=g, window_bits=window, below_window="truncate",
                     product_exponent="operands", fused=True, group_rounding="none",
                     accumulate_rounding="rtz", operand_domain="encoded", alpha_source="decode-scales",
                     alpha_rounding="once", require_full_groups=True,
                     accumulate_bits=km_accumulate_bits(window - 23))


#: The seed's alpha: (amax_a * amax_b).to(float32) / ((T_a * 6.0) * (T_b * 6.0)) in
#: MrHuff/ue5m3-fp4 (_encoded_global_alpha, backends/triton/quantization.py), evaluated by
#: torch on CUDA, which divides a tensor by a Python float as a product with the FP32
#: reciprocal (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu): fp32-reciprocal.
_SEED = GemmModel(group_size=64, window_bits=None, below_window="exact", fused=False,
                  group_rounding="rne", accumulate_rounding="rtz", scale_placement="product",
                  operand_domain="encoded", snap_bits=10, alpha_source="amax", alpha_rounding="fp32-reciprocal")

_H200_TRITON = "NVIDIA H200 (Triton 3.6, torch 2.11, CUDA 13.0)"
#: Outputs of the committed provenance (all of 64 x 64 x 1024 twice and 96 x 200 x 640; rows 0-31 x
#: columns 0-127 of 1024 x 1024 x 512); the GPU computed every output of the four GEMMs.
_SEED_TRITON_SHAPES = ((64, 64, 1024), (96, 200, 640), (1024, 1024, 512))
_SEED_TRITON_OUTPUTS = 2 * 64 * 64 + 96 * 200 + 32 * 128

_KM_SRC = ("Khattak & Mikaitis, 'Accurate Models of NVIDIA Tensor Cores' (arXiv 2512.07004), "
           "block-FMA model; code north-numerical-computing/MATLAB-tensor-core")

#: The acceptance shapes (M, N, K) of the H200 probe runs (docs/probe-h200.rst; the
#: probe's DEFAULT_SHAPES), 114,688 sampled FP32 outputs per target.
_H200_SHAPES = ((64, 64, 256), (64, 64, 1024), (64, 64, 4096), (64, 64, 16384), (256, 256, 2048),
                (1024, 1024, 1024), (4096, 4096, 256), (2048, 2048, 8192), (128, 4096, 16384),
                (4096, 128, 4096), (512, 512, 16384))
_H200_OUTPUTS = 114_688
_H200 = "NVIDIA H200 (cuBLAS 13.0 through torch 2.11)"
_SEED_PAPER = ("the seed paper's model, probe-matched by its authors on a Blackwell GPU (366 of 512 native "
               "matches on wide-range operands, 512 of 512 on narrow-range ones); not measured by fpspec")

# ------------------------------------------------------- instruction-level presets
#: MMA-Sim, the hardware-validated reference of the instruction presets (FPS-GEMM-21).
MMASIM = ("MMA-Sim (github.com/microsoft/MMA-Sim, commit c785138); Xie, Wang, Yang, Yang, 'MMA-Sim: "
          "Bit-Accurate Reference Model of Tensor Cores and Matrix Cores', arXiv 2511.10909")
_MMASIM_DETAIL = ("MMA-Sim's model of the instruction, which its authors checked bitwise against the GPU; "
                  "fpspec reproduces every output of its MMA-Sim sets (vectors/provenance/mmasim)")
_MMASIM_REF = "vectors/provenance/mmasim; docs/hardware-models.rst"


def _nvidia(g: int, window: int, k: int, *, bits: int = 23, acc: str = "fp32", zero: str = "emin",
            **more: Any) -> GemmModel:
    """An NVIDIA tensor-core instruction as MMA-Sim models it: fused groups of G products with
    C, window F, magnitude truncation, RZ (RNE for an FP16 D), Inf on overflow, NaN
    0x7FFFFFFF (FPS-GEMM-21)."""
    return GemmModel(group_size=g, window_bits=window, below_window="truncate", product_exponent="operands",
                     fused=True, group_rounding="none", accumulate_rounding="rne" if acc == "fp16" else "rtz",
                     operand_domain="encoded", alpha_source="none", require_full_groups=True,
                     accumulate_bits=bits, instruction_k=k, zero_alignment=zero, accumulator_format=acc,
                     output_format=acc, accumulate_overflow="inf", nan_encoding="all-ones", **more)


def _cdna3(g: int, lanes: int, drop: int | None) -> GemmModel:
    """An AMD CDNA3 MFMA instruction as MMA-Sim models it: two groups per instruction, products
    truncated at their own window, the sum and C floored at the joint exponent, RNE32."""
    return GemmModel(group_size=g, window_bits=24, below_window="truncate", product_exponent="operands",
                     fused=False, group_rounding="none", accumulate_rounding="rne", operand_domain="encoded",
                     alpha_source="none", require_full_groups=True, instruction_k=2 * g, zero_alignment="emin",
                     product_overflow="inf", window_lanes=lanes, join_sum_bits=31, join_c_bits=24,
                     join_drop_bits=drop, join_below="floor", chain_zero="signed", nan_encoding="ieee-quiet")


def _source(instruction: str, call: str) -> str:
    return f"{instruction}; {MMASIM} ({call})"


def _mmasim_backing() -> Backing:
    return Backing("hardware-validated-model", _MMASIM_DETAIL, _MMASIM_REF)


_H200_MMASIM = "NVIDIA H200 (cuBLAS through torch 2.11, nvjet_sm90 wgmma kernels)"
_H200_MMASIM_REF = "vectors/provenance/h200-mmasim; docs/hardware-models.rst"

_INSTRUCTION_PRESETS = (
    Preset("sm70-f16", _nvidia(4, 23, 4),
           "Volta mma m8n8k4 FP16 -> FP32: fused groups of 4 products with C, F = 23, RZ",
           _source("PTX mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 (sm_70)",
                   "mma('Volta', 'm8n8k4.f32.f16.f16.f32')"), _mmasim_backing()),
    Preset("sm75-f16", _nvidia(8, 24, 8),
           "Turing mma m16n8k8 FP16 -> FP32: fused groups of 8 with C, F = 24, RZ",
           _source("PTX mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 (sm_75)",
                   "mma('Turing', 'm16n8k8.f32.f16.f16.f32')"), _mmasim_backing()),
    Preset("sm80-f16", _nvidia(8, 24, 16),
           "Ampere mma m16n8k16 FP16/BF16 -> FP32: a split instruction, two fused halves of 8 products, "
           "each with C, F = 24, RZ to FP32",
           _source("PTX mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (sm_80)",
                   "mma('Ampere', 'm16n8k16.f32.{f16,bf16}...')"), _mmasim_backing()),
    Preset("sm80-f16-f16acc", _nvidia(8, 24, 16, bits=10, acc="fp16"),
           "Ampere mma m16n8k16 FP16 -> FP16: two fused halves of 8 with an FP16 C, F = 24, each half "
           "rounded to FP16 (RNE)",
           _source("PTX mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 (sm_80)",
                   "mma('Ampere', 'm16n8k16.f16.f16.f16.f16')"), _mmasim_backing()),
    Preset("sm89-fp8", _nvidia(16, 13, 32, bits=13),
           "Ada mma m16n8k32 FP8 (e4m3/e5m2, mixed) -> FP32: two fused halves of 16, F = 13, each half "
           "RZ to 13 fraction bits (e8m13)",
           _source("PTX mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_89)",
                   "mma('Ada Lovelace', 'm16n8k32.f32.a.b.f32')"), _mmasim_backing()),
    Preset("sm90-f16", _nvidia(16, 25, 16, zero="excluded"),
           "Hopper wgmma m64nNk16 FP16/BF16 -> FP32: fused groups of 16 with C, F = 25, RZ; zero products and "
           "C = 0 out of the alignment, as the H200 shows",
           _source("PTX wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} (sm_90a)",
                   "wgmma('Hopper', 'm64n8k16.f32.f16.f16')") + "; the zero rule from the H200",
           Backing("measured", "cuBLAS FP16 and BF16 GEMMs (FP32 out) of the operands of the 12 FP16/BF16 MMA-Sim "
                               "sets: every output of one instruction (K = 16) and of the K = 256 chain; MMA-Sim "
                               "itself differs on BF16 where zero products or C = 0 would set the alignment "
                               "(zero_alignment=emin reproduces MMA-Sim)",
                   _H200_MMASIM_REF, device=_H200_MMASIM, outputs=98_304, shapes=((64, 64, 16), (64, 64, 256)))),
    Preset("sm90-f16-f16acc", _nvidia(16, 25, 16, bits=10, acc="fp16", zero="excluded"),
           "Hopper wgmma m64nNk16 FP16 -> FP16: fused groups of 16 with an FP16 C, F = 25, RNE to FP16; zero "
           "rule as sm90-f16",
           _source("PTX wgmma.mma_async.sync.aligned.m64nNk16.f16.f16.f16 (sm_90a)",
                   "wgmma('Hopper', 'm64n8k16.f16.f16.f16')"), _mmasim_backing()),
    Preset("sm90-fp8", _nvidia(32, 13, 32, bits=13, zero="excluded"),
           "Hopper wgmma m64nNk32 FP8 (e4m3/e5m2, mixed) -> FP32: fused groups of 32 with C, F = 13, RZ to 13 "
           "fraction bits (= torch._scaled_mm use_fast_accum=True); zero rule as sm90-f16",
           _source("PTX wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2} (sm_90a)",
                   "wgmma('Hopper', 'm64n8k32.f32.a.b')"),
           Backing("measured", "torch._scaled_mm (e4m3, e4m3 x e5m2; scales 1, FP32 out) of the operands of the 8 "
                               "such MMA-Sim sets: every output of one instruction (K = 32) and of the K = 256 chain "
                               "with use_fast_accum=True, and of one instruction without it; without it the chain "
                               "promotes every 128 products (promotion_interval=128 reproduces those 32,768 "
                               "outputs too)",
                   _H200_MMASIM_REF, device=_H200_MMASIM, outputs=98_304, shapes=((64, 64, 32), (64, 64, 256)))),
    Preset("sm100-f16", _nvidia(16, 25, 16),
           "Blackwell tcgen05.mma kind::f16 FP16/BF16 -> FP32: fused groups of 16 with C, F = 25, RZ",
           _source("PTX tcgen05.mma.cta_group::1.kind::f16 (sm_100a, K = 16)",
                   "tcgen05mma('Blackwell', 'm64n8k16.f32.f16.f16')"), _mmasim_backing()),
    Preset("sm100-f8f6f4", _nvidia(32, 25, 32),
           "Blackwell tcgen05.mma kind::f8f6f4 FP8 (e4m3/e5m2, mixed) -> FP32: fused groups of 32 with C, F = 25, "
           "RZ to FP32 (no 13-bit cut)",
           _source("PTX tcgen05.mma.cta_group::1.kind::f8f6f4 (sm_100a, K = 32)",
                   "tcgen05mma('Blackwell', 'm64n8k32.f32.a.b')"), _mmasim_backing()),
    Preset("sm100-mxf8f6f4", _nvidia(32, 25, 32, block_exponent="scales"),
           "Blackwell tcgen05.mma kind::mxf8f6f4 (MXFP8: FP8 payloads, UE8M0 block-32 scales) -> FP32: each "
           "product a b s_a s_b aligned at e(a)+e(b)+e(s_a)+e(s_b), fused groups of 32 with C, F = 25, RZ",
           _source("PTX tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X (sm_100a, K = 32)",
                   "tcgen05mma_block_scale('Blackwell', 'm128n8k32.block32.f32.a.b.ue8m0')"), _mmasim_backing()),
    Preset("sm100-mxf4nvf4", _nvidia(64, 35, 64, scale_placement="block", block_exponent="scales",
                                     block_term_size=16),
           "Blackwell tcgen05.mma kind::mxf4nvf4 (NVFP4: UE4M3 block-16 scales; MXFP4: UE8M0 block 32 or 16) "
           "-> FP32: terms = exact sums of 16 E2M1 products times both scales, aligned by the scale exponents, "
           "fused groups of 64 products with C, F = 35, RZ",
           _source("PTX tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::{4X,2X} (sm_100a, K = 64)",
                   "tcgen05mma_block_scale('Blackwell', 'm128n8k64.block{16,32}.f32.e2m1.e2m1.{ue4m3,ue8m0}')"),
           _mmasim_backing()),
    Preset("sm120-f8f6f4", _nvidia(32, 25, 32),
           "RTX Blackwell mma m16n8k32 kind::f8f6f4 FP8 -> FP32: as sm100-f8f6f4 (one fused group of 32, "
           "F = 25, RZ; not split)",
           _source("PTX mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_120a)",
                   "mma('RTX Blackwell', 'm16n8k32.f32.a.b.f32')"), _mmasim_backing()),
    Preset("sm120-mxf8f6f4", _nvidia(32, 25, 32, block_exponent="scales"),
           "RTX Blackwell mma m16n8k32 kind::mxf8f6f4 (MXFP8) -> FP32: as sm100-mxf8f6f4",
           _source("PTX mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X..."
                   "ue8m0 (sm_120a)", "mma_block_scale('RTX Blackwell', 'm16n8k32.block32.f32.a.b.f32.ue8m0')"),
           _mmasim_backing()),
    Preset("sm120-mxf4nvf4", _nvidia(64, 35, 64, scale_placement="block", block_exponent="scales",
                                     block_term_size=16),
           "RTX Blackwell mma m16n8k64 kind::mxf4nvf4 (NVFP4, MXFP4) -> FP32: as sm100-mxf4nvf4",
           _source("PTX mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::{4X,2X} (sm_120a)",
                   "mma_block_scale('RTX Blackwell', 'm16n8k64.block{16,32}.f32.e2m1.e2m1.f32.{ue4m3,ue8m0}')"),
           _mmasim_backing()),
    Preset("cdna3-f16", _cdna3(8, 1, None),
           "AMD CDNA3 MFMA FP16/BF16 -> FP32: groups of 8 products truncated 24 bits below their largest "
           "exponent (a product >= 2^128 is Inf), the sum floored to 31 bits and C to 24 below the joint "
           "exponent, one RNE to FP32 per group",
           _source("AMD CDNA3 ISA v_mfma_f32_16x16x16_{f16,bf16} (also 32x32x8)", "mfma('CDNA3', "
                   "'f32_16x16x16_f16')"), _mmasim_backing()),
    Preset("cdna3-fp8", _cdna3(16, 2, 25),
           "AMD CDNA3 MFMA FP8/BF8 (e4m3fnuz, e5m2fnuz, mixed) -> FP32: groups of 16 in even-k and odd-k "
           "lanes, each truncated 24 bits below its own largest exponent, then floored at the joint one; C "
           "dropped below 2^(M-25), sum floored to 31 bits, C to 24; one RNE to FP32 per group",
           _source("AMD CDNA3 ISA v_mfma_f32_16x16x32_{fp8_fp8,bf8_bf8,fp8_bf8} (also 32x32x16)",
                   "mfma('CDNA3', 'f32_16x16x32_fp8_fp8')"), _mmasim_backing()),
)

#: Architecture and instruction of each instruction-level preset (the hardware-models table).
_INSTRUCTIONS: dict[str, tuple[str, str]] = {
    "sm70-f16": ("Volta (sm_70)", "mma.sync.aligned.m8n8k4 .f32.f16.f16.f32"),
    "sm75-f16": ("Turing (sm_75)", "mma.sync.aligned.m16n8k8 .f32.f16.f16.f32"),
    "sm80-f16": ("Ampere (sm_80)", "mma.sync.aligned.m16n8k16 .f32.{f16,bf16}"),
    "sm80-f16-f16acc": ("Ampere (sm_80)", "mma.sync.aligned.m16n8k16 .f16.f16.f16.f16"),
    "sm89-fp8": ("Ada (sm_89)", "mma.sync.aligned.m16n8k32 .f32.{e4m3,e5m2}"),
    "sm90-f16": ("Hopper (sm_90a)", "wgmma.mma_async m64nNk16 .f32.{f16,bf16}"),
    "sm90-f16-f16acc": ("Hopper (sm_90a)", "wgmma.mma_async m64nNk16 .f16.f16.f16"),
    "sm90-fp8": ("Hopper (sm_90a)", "wgmma.mma_async m64nNk32 .f32.{e4m3,e5m2}"),
    "sm100-f16": ("Blackwell (sm_100a)", "tcgen05.mma kind::f16"),
    "sm100-f8f6f4": ("Blackwell (sm_100a)", "tcgen05.mma kind::f8f6f4"),
    "sm100-mxf8f6f4": ("Blackwell (sm_100a)", "tcgen05.mma kind::mxf8f6f4.block_scale (UE8M0, block 32)"),
    "sm100-mxf4nvf4": ("Blackwell (sm_100a)", "tcgen05.mma kind::mxf4nvf4.block_scale (UE4M3 b16, UE8M0 b32/b16)"),
    "sm120-f8f6f4": ("RTX Blackwell (sm_120a)", "mma.sync m16n8k32 kind::f8f6f4"),
    "sm120-mxf8f6f4": ("RTX Blackwell (sm_120a)", "mma.sync m16n8k32 kind::mxf8f6f4.block_scale"),
    "sm120-mxf4nvf4": ("RTX Blackwell (sm_120a)", "mma.sync m16n8k64 kind::mxf4nvf4.block_scale"),
    "cdna3-f16": ("AMD CDNA3 (MI300)", "v_mfma_f32_16x16x16_{f16,bf16}"),
    "cdna3-fp8": ("AMD CDNA3 (MI300)", "v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8}"),
}
_INSTRUCTION_PRESETS = tuple(dataclasses.replace(p, architecture=_INSTRUCTIONS[p.name][0],
                                                 instruction=_INSTRUCTIONS[p.name][1]) for p in _INSTRUCTION_PRESETS)

#: The seed's Triton GEMM: the Hopper wgmma chain (sm90-f16) restarted every 64 products, each
#: partial added to the FP32 sum with RZ (a promotion, FPS-GEMM-6).
_SEED_TRITON = next(p.model for p in _INSTRUCTION_PRESETS if p.name == "sm90-f16").replace(
    promotion_interval=64, promotion_rounding="rtz")

# ------------------------------------------------------------ library presets
#: The H200 cuBLAS runs in the table (vectors/provenance/h200-cublas): the sweep and the first
#: three held-out runs; device and sampled outputs per target (27,243 + 4,249 + 3,928 + 4,968 and
#: 28,527 + 4,400 + 4,096 + 5,248).
_H200_CUBLAS = ("NVIDIA H200 (cuBLAS 13.1 through torch 2.11; vectors/provenance/h200-cublas/sweep.jsonl, "
                "heldout{,2,3}.jsonl and train{1,2,3}.jsonl)")
#: sampled outputs of the table's runs per target (tests/test_gemm_models.py counts them again)
_H200_CUBLAS_OUTPUTS = {"torch-bf16": 131_826, "torch-fp16": 131_826, "torch-scaled-mm": 137_676,
                        "torch-scaled-mm-fast": 137_676}
_CUBLAS_REF = "docs/cublas-h200.rst; vectors/provenance/h200-cublas"


def _library(name: str, target: str, chain: str, summary: str, call: str) -> Preset:
    """A library preset (FPS-CUB-6): the chain of the target's Hopper kernels for any K;
    :func:`resolve` adds the kernel and K slices cuBLAS uses at a shape."""
    shapes = tuple(sorted({(o.m, o.n, o.k) for o in cublas_h200.observations_from_table()[target]}))
    return Preset(name, PRESETS[chain].model.replace(require_full_groups=False),
                  summary + "; the kernel and its K slices follow from the shape (fpspec.models.resolve)",
                  f"{call} on an NVIDIA H200, measured at {len(shapes)} shapes (docs/cublas-h200.rst); the chain: "
                  f"{chain}, " + _KM_SRC,
                  Backing("measured", f"{call}: the runs' calls, modelled from each call's kernel and grid "
                                      "(the observer) and from the shape alone (resolve); rates in "
                                      "docs/cublas-h200.rst", _CUBLAS_REF, device=_H200_CUBLAS,
                          outputs=_H200_CUBLAS_OUTPUTS[target], shapes=shapes),
                  library=target)


#: The named presets (FPS-GEMM-3), in the order ``fpspec models`` lists them.
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("seed-probe-matched", _SEED,
           "Seed paper's probe-matched Blackwell NVFP4 model: encoded operands, G = 64, exact group "
           "sum RNE to FP32, RTZ across groups in order, snap to 1/1024 (ties to even), then alpha "
           "in the seed's FP32 order",
           "Hu, Luschi, Balanca, arXiv 2609.02846 (UE5M3 FP4), probe-matched GEMM model; "
           "MrHuff/ue5m3-fp4 docs/numerics.md; alpha: its _encoded_global_alpha as torch evaluates it on CUDA",
           Backing("paper", _SEED_PAPER + "; alpha order read from the seed's code",
                   "arXiv 2609.02846; docs/gemm.rst")),
    Preset("seed-probe-matched-nosnap", _SEED.replace(snap_bits=None),
           "seed-probe-matched without the output lattice snap (the paper could not separate "
           "no snap, 1/1024, 1/2048, 1/4096)",
           "arXiv 2609.02846, probe-matched model, snap left out",
           Backing("paper", _SEED_PAPER + "; the paper fits no snap as well as 1/1024",
                   "arXiv 2609.02846; docs/gemm.rst")),
    Preset("seed-triton-h200", _SEED_TRITON,
           "The seed's Triton GEMM (issue_rz_bf16_gemm) as it runs on an H200: per 64 products a tl.dot of "
           "BF16 operands from a zero accumulator (the Hopper tensor-core chain of sm90-f16, = km-h100-bf16 "
           "on finite operands), added to the running FP32 sum with add.rz.f32",
           "MrHuff/ue5m3-fp4 src/ue5m3_fp4/backends/triton/gemm.py (_issue_rz_kernel, BLOCK_K = 64); measured "
           "on an NVIDIA H200 (vectors/provenance/h200-refs-cuda)",
           Backing("measured", "the seed's issue_rz_bf16_gemm run by Triton 3.6 on BF16 operands (wide and narrow "
                               "exponent ranges, both of its tile sizes): every output reproduced",
                   "vectors/provenance/h200-refs-cuda; docs/gemm.rst", device=_H200_TRITON,
                   outputs=_SEED_TRITON_OUTPUTS, shapes=_SEED_TRITON_SHAPES)),
    Preset("seed-triton-h200-snap", _SEED_TRITON.replace(snap_bits=10),
           "seed-triton-h200 with the kernel's optional output snap round(C * 1024) / 1024 (ties to even)",
           "MrHuff/ue5m3-fp4 issue_rz_bf16_gemm(snap_to_1_over_1024=True); measured on an NVIDIA H200",
           Backing("measured", "issue_rz_bf16_gemm(..., snap_to_1_over_1024=True) on the same operands: every "
                               "output reproduced", "vectors/provenance/h200-refs-cuda; docs/gemm.rst",
                   device=_H200_TRITON, outputs=_SEED_TRITON_OUTPUTS, shapes=_SEED_TRITON_SHAPES)),
    Preset("decoded-fp32", _FP32_SEQ,
           "Decode operands to FP32 (tensor decode scale folded in, RNE), then a sequential "
           "FP32 dot product: each product rounded to FP32 (RNE), then added (RNE); no FMA",
           "arXiv 2609.02846 decoded-operand model (an ordinary FP32 GEMM)",
           Backing("fpspec-choice", "a sequential FP32 dot product without FMA: the seed paper's decoded-operand "
                                    "model names no order, fpspec chose this one", "docs/gemm.rst")),
    Preset("exact", GemmModel(group_size=None, fused=False, group_rounding="none",
                              accumulate_rounding="rne", operand_domain="decoded-exact",
                              alpha_source="none"),
           "Infinitely precise dot product of the exact dequantized operands, one final RNE to FP32",
           "fpspec reference (the Kulisch-accumulator / correct_rounding model of Khattak & Mikaitis)",
           Backing("fpspec-choice", "the correctly rounded dot product: fpspec's reference, no hardware",
                   "docs/gemm.rst")),
    Preset("km-h100-fp8", _km(32, 13),
           "H100/H200 FP8 tensor core: fused blocks of 32 products, 13-bit window (neab = -10), "
           "magnitude truncation, block result kept to 13 fraction bits with RTZ "
           "(= torch._scaled_mm use_fast_accum=True)",
           _KM_SRC + "; reproduced bit for bit on an NVIDIA H200 (docs/probe-h200.rst)",
           Backing("measured", "torch._scaled_mm, float8_e4m3fn, FP32 output, use_fast_accum=True: every sampled "
                               "output reproduced (split_k set where cuBLAS splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=_H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-h100-fp8-promote128", _km(32, 13).replace(promotion_interval=128, promotion_rounding="rne"),
           "km-h100-fp8 plus promotion of the partial into an FP32 accumulator (RNE add) every 128 "
           "products: cuBLAS FP8 GEMM on H100/H200 with use_fast_accum=False",
           "measured on an NVIDIA H200 with torch._scaled_mm (docs/probe-h200.rst); " + _KM_SRC,
           Backing("measured", "torch._scaled_mm, float8_e4m3fn, FP32 output, use_fast_accum=False: every sampled "
                               "output reproduced (split_k set where cuBLAS splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=_H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-b200-fp8", _km(32, 25),
           "B200 FP8 tensor core: fused blocks of 32 products, neab = 2 (25 fraction bits), RTZ",
           _KM_SRC,
           Backing("paper", "Khattak & Mikaitis' B200 FP8 parameters; not measured by fpspec", "arXiv 2512.07004")),
    Preset("km-h100-bf16", _km(16, 25),
           "H100 FP16/BF16 tensor core: fused blocks of 16 products, neab = 2, RTZ",
           _KM_SRC + "; reproduced on an H200 (cuBLAS splits K at some shapes: set split_k, docs/probe-h200.rst)",
           Backing("measured", "torch.mm with FP32 output on BF16, FP16, and BF16 with reduced-precision reduction "
                               "off: every sampled output of the three targets reproduced (split_k set where cuBLAS "
                               "splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=3 * _H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-a100-bf16", _km(8, 24),
           "A100 FP16/BF16 tensor core: fused blocks of 8 products, neab = 1, RTZ",
           _KM_SRC,
           Backing("paper", "Khattak & Mikaitis' A100 FP16/BF16 parameters; not measured by fpspec",
                   "arXiv 2512.07004")),
    Preset("km-v100-fp16", _km(4, 23),
           "V100 FP16 tensor core: fused blocks of 4 products, neab = 0, RTZ",
           _KM_SRC + "; Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 2021",
           Backing("paper", "Khattak & Mikaitis' V100 parameters (Fasi et al. 2021 probed a V100); not measured "
                            "by fpspec", "arXiv 2512.07004; PeerJ CS 2021")),
    *_INSTRUCTION_PRESETS,
)}

#: The library presets (FPS-CUB-6), listed by ``fpspec models`` after :data:`PRESETS`: a
#: library's GEMM whose model depends on the shape; :func:`resolve` gives it (their
#: ``model`` is the chain of the library's main kernels without a K split).
LIBRARY: dict[str, Preset] = {p.name: p for p in (
    _library("cublas-h200-bf16", "torch-bf16", "km-h100-bf16",
             "cuBLAS BF16 GEMM with FP32 output on the H200 (torch.mm)",
             "torch.mm(A, BT.t(), out_dtype=torch.float32), BF16"),
    _library("cublas-h200-fp16", "torch-fp16", "km-h100-bf16",
             "cuBLAS FP16 GEMM with FP32 output on the H200 (torch.mm)",
             "torch.mm(A, BT.t(), out_dtype=torch.float32), FP16"),
    _library("cublas-h200-fp8", "torch-scaled-mm", "km-h100-fp8-promote128",
             "cuBLAS FP8 (e4m3) GEMM with FP32 output on the H200, use_fast_accum=False (promotion every "
             "128 products)",
             "torch._scaled_mm(A, BT.t(), scale_a=1, scale_b=1, out_dtype=torch.float32, use_fast_accum=False)"),
    _library("cublas-h200-fp8-fast", "torch-scaled-mm-fast", "km-h100-fp8",
             "cuBLAS FP8 (e4m3) GEMM with FP32 output on the H200, use_fast_accum=True",
             "torch._scaled_mm(A, BT.t(), scale_a=1, scale_b=1, out_dtype=torch.float32, use_fast_accum=True)"),
)}

#: The names of the library presets (FPS-CUB-6).
LIBRARY_PRESETS: tuple[str, ...] = tuple(LIBRARY)

#: The names of the instruction-level presets, NVIDIA tensor-core and AMD matrix-core
#: instructions, each the chain of its instruction from C = 0 (FPS-GEMM-21).
INSTRUCTION_PRESETS: tuple[str, ...] = tuple(p.name for p in _INSTRUCTION_PRESETS)

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
                      "the alpha as torch forms it on CUDA (tools/seed_alpha_cuda.py)")


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


def _unknown_preset(name: object) -> FpspecError:
    """The refusal of a name that is no preset and no library preset, listing those."""
    return FpspecError(f"unknown GEMM model preset {name!r}; known: {', '.join([*PRESETS, *LIBRARY])}")


def contract_of(model: "str | GemmModel") -> OperandContract:
    """The operand contract of a preset (by name) or of a model given as parameters
    (:data:`GENERIC_CONTRACT`) (FPS-GEMM-25)."""
    if isinstance(model, GemmModel):
        return GENERIC_CONTRACT
    try:
        return CONTRACTS[model]
    except (KeyError, TypeError):
        raise _unknown_preset(model) from None


def preset_names() -> list[str]:
    return list(PRESETS)


def resolve(name: "str | GemmModel", shape: "tuple[int, int, int] | None" = None) -> GemmModel:
    """The concrete model of a preset at a GEMM shape (M, N, K) (FPS-CUB-6).

    A library preset (:data:`LIBRARY_PRESETS`) resolves to the model cuBLAS runs at that
    shape: the instruction chain of the kernel class the shape runs on and its K slices
    (:func:`model_for_shape`); FpspecError where that kernel is not modelled (SIMT
    kernels).  Any other preset, or a GemmModel, is returned unchanged."""
    if isinstance(name, GemmModel):
        return name
    p = PRESETS.get(name) or LIBRARY.get(name)
    if p is None:
        raise _unknown_preset(name)
    if not p.library:
        return p.model
    if shape is None:
        raise FpspecError(f"{name} is a library preset: its model depends on the GEMM's shape; give shape=(M, N, K)")
    return model_for_shape(name, shape)


def kernel_model(choice: cublas_h200.KernelChoice) -> GemmModel:
    """The model of one cuBLAS call whose kernel is known (FPS-CUB-7): the target's chain
    preset without ``require_full_groups``, with the parameters
    :func:`fpspec.cublas_h200.kernel_parameters` gives for the kernel (FpspecError for a
    kernel that is not modelled)."""
    chain, params = cublas_h200.kernel_parameters(choice)
    return PRESETS[chain].model.replace(require_full_groups=False, **params)


def model_for_kernel(name: str, shape: Sequence[int], kernel_name: str, grid: Sequence[int]) -> GemmModel:
    """The model of one call from the kernel that ran and its launch grid, what the torch
    profiler shows (FPS-CUB-8): :func:`kernel_model` of
    :func:`fpspec.cublas_h200.choice_for_kernel`.  ``name`` is a library preset
    (``cublas-h200-bf16``, ...) or a target (``torch-bf16``, ...)."""
    return kernel_model(cublas_h200.choice_for_kernel(name, shape, kernel_name, grid))


def model_for_shape(name: str, shape: Sequence[int]) -> GemmModel:
    """The model cuBLAS on the H200 runs at (M, N, K), offline (FPS-CUB-6):
    :func:`kernel_model` of :func:`fpspec.cublas_h200.resolve_choice` (the prediction from
    the shape); FpspecError where the predicted kernel is not modelled (SIMT) or its slices
    are not known."""
    return kernel_model(cublas_h200.resolve_choice(name, shape))


def get_model(model: "str | GemmModel", **overrides: Any) -> GemmModel:
    """A preset by name (or a model), with validated overrides (FPS-GEMM-3).

    Setting ``window_bits`` (or ``neab``) without ``below_window`` picks "truncate"
    for an integer and "exact" for None, the only consistent companion.
    """
    if isinstance(model, GemmModel):
        base = model
    else:
        if model in LIBRARY:
            raise FpspecError(f"{model} is a library preset: its model depends on the GEMM's shape; use "
                              f"fpspec.models.resolve({model!r}, (M, N, K)), or gemm(..., shape=(M, N, K))")
        try:
            base = PRESETS[model].model
        except KeyError:
            raise _unknown_preset(model) from None
    if not overrides:
        return base
    try:
        return base.replace(**overrides)
    except TypeError as exc:  # pragma: no cover - replace() names fields already
        raise FpspecError(str(exc)) from None


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


def presets_json() -> str:
    """JSON of every preset (``fpspec models --json``) with its operand contract (``operands``,
    FPS-GEMM-25); instruction-level presets also carry their architecture, instruction and
    arithmetic (:func:`arithmetic_summary`)."""
    out = {}
    for name, p in {**PRESETS, **LIBRARY}.items():
        c = CONTRACTS[name]
        entry = {"summary": p.summary, "source": p.source, "backing": p.backing.to_dict(),
                 "parameters": p.model.to_dict(),
                 "operands": {"takes": c.rule(), "tensor_scales": c.tensor_scales(p.model),
                              "tensor_scales_detail": c.tensor_scales_text(p.model), "source": c.source,
                              "epilogue_source": c.epilogue_source}}
        if p.library:
            entry["library"] = p.library
        if p.instruction:
            entry.update(architecture=p.architecture, instruction=p.instruction,
                         arithmetic=arithmetic_summary(p.model))
        out[name] = entry
    return json.dumps(out, indent=2)


def arithmetic_summary(model: GemmModel) -> dict[str, str]:
    """One line per aspect of an instruction-level model, derived from its parameters (the
    hardware-models table of docs/hardware-models.rst): k, group, window, alignment,
    rounding, specials, output (FPS-GEMM-21)."""
    g, k = model.group_size, model.instruction_k
    halves = f" = {k // g} x {g}" if (g and k and k != g) else ""
    if model.scale_placement == "block":
        t = model.block_term_size
        terms = f"{g // t} block terms of {t} products" if (g and t) else "block terms"
    else:
        terms = f"{g} products" if g else "all products"
    if model.fused:
        group = f"{terms} + C, fused"
    elif model.join_sum_bits is not None:
        group = f"{terms}; C joins after the window"
    else:
        group = f"{terms}; C added after rounding"
    window = "none" if model.window_bits is None else f"F = {model.window_bits}, {model.below_window}"
    if model.window_lanes > 1:
        window += f", {model.window_lanes} lanes (k mod {model.window_lanes}) merged by {model.join_below}"
    if model.join_sum_bits is not None:
        window += (f"; join: sum {model.join_below} to {model.join_sum_bits} bits, C to {model.join_c_bits}"
                   + (f", C dropped below M - {model.join_drop_bits}" if model.join_drop_bits is not None else ""))
    if model.block_exponent == "scales":
        align = "e(s_a) + e(s_b)" if model.scale_placement == "block" else "e(a) + e(b) + e(s_a) + e(s_b)"
    else:
        align = "e(a) + e(b)" if model.product_exponent == "operands" else "floor(log2 |p|)"
    align += "; zeros and C = 0 at -126" if model.zero_alignment == "emin" else "; zeros and C = 0 excluded"
    acc_bits = ACCUMULATOR_FORMATS[model.accumulator_format][2]
    mode = model.accumulate_rounding.upper().replace("RTZ", "RZ")
    width = {"fp32": "FP32", "fp16": "FP16"}[model.accumulator_format]
    rounding = f"{mode} to {width}" if model.accumulate_bits == acc_bits else \
        f"{mode} to {model.accumulate_bits} fraction bits (FP32 range)"
    rounding += " per group" if not model.fused or (g and k and g < k) else " per instruction"
    specials = []
    if model.accumulate_overflow == "inf" or model.accumulate_rounding == "rne":
        specials.append("overflow -> Inf")
    else:
        specials.append("RZ overflow -> max finite")
    if model.product_overflow == "inf":
        specials.append("product >= 2^128 -> Inf")
    specials.append(f"NaN {NAN_BITS[(model.nan_encoding, model.output_format)]:#x}")
    if model.chain_zero == "signed":
        specials.append("-0 on negative underflow")
    return {"k": f"{k}{halves}" if k else "any", "group": group, "window": window, "alignment": align,
            "rounding": rounding, "specials": ", ".join(specials), "output": model.output_format.upper()}
