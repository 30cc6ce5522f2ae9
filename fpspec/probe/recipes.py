"""The probe recipes (docs/probe.rst, FPS-PRB-3 .. FPS-PRB-13).

Each recipe builds a batch of probes (exact products at chosen reduction indices),
runs it as one GEMM (probe i in row i of A and BT, read on the diagonal), and turns
the FP32 outputs into a *finding*: a small JSON-ready dict with the rows' outcome
and a conclusion.  Recipes run in order because later ones use earlier findings
(the group members, the window width); :func:`run_recipes` drives them.

Notation: ``P = 2^E`` a large product, ``X = 1.5 * 2^E`` (not a power of two, so
its ulp is the same on both sides), ``s_j = 2^(E - j)`` a small one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import FpspecError
from ..formats import get_format
from .operands import ProbeRow, ProductSplitter, pow2
from .targets import CallLog, run_rows

__all__ = ["ProbeContext", "run_recipes", "ROUNDING_MODES", "classify_rounding"]

ROUNDING_MODES = ("rz", "rne", "rna", "ru", "rd")
OFFSETS = (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))


def _f(y: np.float32) -> Fraction | float:
    y = float(y)
    return Fraction(y) if np.isfinite(y) else y


def _hex(y: np.ndarray) -> list[str]:
    return [format(int(v), "08x") for v in np.asarray(y, dtype=np.float32).view(np.uint32)]


def round_magnitude(v: Fraction, quantum: Fraction, mode: str) -> Fraction:
    """v rounded to a multiple of quantum under a directed / nearest mode."""
    q = v / quantum
    lo = q.numerator // q.denominator
    frac = q - lo
    if frac == 0:
        return v
    if mode == "rz":
        k = lo if v > 0 else lo + 1
    elif mode == "ru":
        k = lo + 1
    elif mode == "rd":
        k = lo
    elif mode == "rne":
        k = lo + 1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and lo % 2) else lo
    elif mode == "rna":
        if frac == Fraction(1, 2):
            k = lo + 1 if v > 0 else lo
        else:
            k = lo + 1 if frac > Fraction(1, 2) else lo
    else:  # pragma: no cover
        raise ValueError(mode)
    return k * quantum


def classify_rounding(cases: list[tuple[Fraction, Fraction, Any]]) -> list[str]:
    """Modes of ROUNDING_MODES that explain every (exact value, quantum, observed) case."""
    return [m for m in ROUNDING_MODES if all(round_magnitude(v, q, m) == y for v, q, y in cases)]


@dataclass
class ProbeContext:
    """State shared by the recipes of one probe run."""

    target: Any
    fmt: str
    K: int
    shape: tuple[int, int] | None = None
    scan_k: int = 512
    log: CallLog = field(default_factory=CallLog)
    findings: dict[str, dict] = field(default_factory=dict)
    raw: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.splitter = ProductSplitter(self.fmt)
        f = get_format(self.fmt)
        # The large product P = 2^E: room for carries above and small terms far below.
        self.E = min(2 * f.emax - 2, 30)
        if not self.splitter.can_split(pow2(self.E)) or not self.splitter.can_split(3 * pow2(self.E - 1)):
            raise FpspecError(f"format {self.fmt} cannot form the probe products 2^{self.E}, 1.5*2^{self.E}")
        j = 1
        while j < 60 and self.splitter.can_split(pow2(self.E - j - 1)):
            j += 1
        self.jmax = j  # the smallest product used is 2^(E - jmax)
        self.members: list[int] = [0, 1]

    # ---------------------------------------------------------------- helpers
    @property
    def P(self) -> Fraction:
        return pow2(self.E)

    @property
    def X(self) -> Fraction:
        return 3 * pow2(self.E - 1)

    def s(self, j: int) -> Fraction:
        return pow2(self.E - j)

    def run(self, name: str, rows: list[ProbeRow], K: int | None = None) -> list[Fraction | float]:
        y = run_rows(self.target, rows, K or self.K, self.splitter, self.log, name, self.shape)
        self.raw[name] = _hex(y)
        return [_f(v) for v in y]

    def splittable(self, *values: Fraction) -> bool:
        return all(self.splitter.can_split(v) for v in values)


# ------------------------------------------------------------- the recipes
def recipe_groups(ctx: ProbeContext) -> dict:
    """FPS-PRB-4 (group size and membership) and FPS-PRB-6 (fused truncating vs exact sum).

    Cancel row i:  P at 0, -P at 1, s (far below any window) at i.  A fused
    truncating block holding 0, 1 and i drops s (output 0); when i is in another
    block the first block cancels to exactly 0 and s survives.
    Pair row i: X at 0, h at 1 and h at i, h = ulp32(X) / 2.  Summed exactly (one
    group, or no groups at all) the two halves make X + ulp; rounded in two steps
    (ties to even, or toward zero) each half is lost and the output is X.
    """
    span = min(ctx.K, ctx.scan_k)
    tiny = ctx.s(ctx.jmax)
    h = pow2(ctx.E - 24)
    ulp = 2 * h
    idx = list(range(2, span))
    cancel = [ProbeRow.of({0: ctx.P, 1: -ctx.P, i: tiny}) for i in idx]
    pairs = [ProbeRow.of({0: ctx.X, 1: h, i: h}) for i in idx] if ctx.splittable(h) else []
    y = ctx.run("groups", cancel + pairs)
    yc, yp = y[:len(cancel)], y[len(cancel):]
    same_cancel = [i for i, v in zip(idx, yc) if v == 0]
    odd_cancel = [i for i, v in zip(idx, yc) if v not in (0, tiny)]
    finding: dict[str, Any] = {"span": span, "tiny": str(tiny), "odd_cancel_rows": odd_cancel[:16]}
    up = [i for i, v in zip(idx, yp) if v == ctx.X + ulp]
    down = [i for i, v in zip(idx, yp) if v == ctx.X]
    finding["pair_rows"] = {"exact_sum_at": _ranges(up), "split_at": _ranges(down)}
    if same_cancel:
        members = [0, 1] + same_cancel
        finding["kind"] = "fused-truncating"
    elif pairs and len(up) == len(idx):
        members = list(range(span))
        finding["kind"] = "exact-accumulation"
        finding["note"] = f"no rounding between any two products of the first {span}: one exact sum"
    elif up:
        members = [0, 1] + up
        finding["kind"] = "exact-sum"
    else:
        members = [0, 1]
        finding["kind"] = "none-visible"
        finding["note"] = "no truncating group and no exact group: a chain that rounds after every product"
    g = len(members)
    contiguous = members == list(range(g))
    finding["members_of_group_0"] = _ranges(members)
    finding["group_size"] = {"none-visible": 1, "exact-accumulation": None}.get(finding["kind"], g)
    finding["layout"] = "contiguous" if contiguous else "interleaved"
    if finding["kind"] in ("fused-truncating", "exact-sum") and g >= span:
        finding["note"] = f"group 0 covers the whole scan span {span}: raise scan_k"
    ctx.members = members
    return finding


def _ranges(ix: list[int]) -> list[list[int]]:
    """[0, 1, 2, 5, 6] -> [[0, 2], [5, 6]]: compact index sets for reports."""
    out: list[list[int]] = []
    for i in ix:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _in_group(ctx: ProbeContext, count: int, last: bool = False) -> list[int] | None:
    """``count`` reduction indices that share a group with index 0 (None when too few).

    ``last=True`` moves them to the last group of K (contiguous groups dividing K):
    a fused block re-aligns the accumulator in every later block, so what the
    group result itself keeps is only visible in the last one.
    """
    g = len(ctx.members)
    if g < 3:  # no group seen: a sequential chain, any indices do
        if count > ctx.K:
            return None
        return list(range(ctx.K - count, ctx.K)) if last else list(range(count))
    if g < count:
        return None
    m = ctx.members[:count]
    if last and ctx.members == list(range(g)) and ctx.K % g == 0:
        m = [ctx.K - g + i for i in m]
    return m


def recipe_window(ctx: ProbeContext, groups: dict) -> dict:
    """FPS-PRB-5: kept window width F, how a term below it is treated, product exponent.

    Row j: P, -P, s_j in one group; the output is s_j while s_j is inside the window
    (F = the largest such j).  Then, one LSB = 2^(E-F): P - LSB/2 (magnitude
    truncation gives P, two's-complement floor P - LSB), P + 0.75 LSB (truncation P,
    round-to-nearest alignment P + LSB), and the anchor of a product whose
    significand is >= 2 (2.25 * 2^E: anchored at ea+eb keeps s_F, anchored at its
    own exponent drops it).
    """
    slots = _in_group(ctx, 3)
    if slots is None:
        return {"window_bits": None, "note": "fewer than 3 slots in a group"}
    i0, i1, i2 = slots
    js = list(range(1, ctx.jmax + 1))
    rows = [ProbeRow.of({i0: ctx.P, i1: -ctx.P, i2: ctx.s(j)}) for j in js]
    y = ctx.run("window", rows)
    kept = [j for j, v in zip(js, y) if v == ctx.s(j)]
    dropped = [j for j, v in zip(js, y) if v == 0]
    finding: dict[str, Any] = {"kept_max": max(kept) if kept else 0,
                               "dropped_min": min(dropped) if dropped else None}
    if not dropped:
        finding["window_bits"] = None
        finding["below_window"] = "exact"
        finding["note"] = f"every term down to 2^-{ctx.jmax} relative survives: no alignment window"
        return finding
    F = min(dropped) - 1
    if kept != list(range(1, F + 1)):
        finding["note"] = "kept terms are not the contiguous range 1..F"
    finding["window_bits"] = F
    lsb = pow2(ctx.E - F)
    extra = [ProbeRow.of({i0: ctx.P, i1: -lsb / 2}), ProbeRow.of({i0: ctx.P, i1: 3 * lsb / 4})]
    big = Fraction(9, 4) * ctx.P  # significand 2.25: ea + eb = E, floor(log2) = E + 1
    half = ctx.E // 2
    fa, fb = Fraction(3, 2) * pow2(half), Fraction(3, 2) * pow2(ctx.E - half)
    have_big = ctx.splitter.representable(fa) and ctx.splitter.representable(fb)
    if have_big:
        # split 2.25*2^E as (1.5*2^a)(1.5*2^b): the operands' exponents sum to E
        ctx.splitter.force(fa, fb)
        extra.append(ProbeRow.of({i0: big, i1: -big, i2: ctx.s(F)}))
    y2 = ctx.run("window-below", extra)
    neg, pos = y2[0], y2[1]
    if neg == ctx.P and pos == ctx.P:
        finding["below_window"] = "truncate"
    elif neg == ctx.P - lsb and pos == ctx.P:
        finding["below_window"] = "floor"
    elif pos == ctx.P + lsb:
        finding["below_window"] = "round-nearest"
    else:
        finding["below_window"] = f"unexplained (P - LSB/2 -> {neg}, P + 0.75 LSB -> {pos})"
    if have_big:
        finding["product_exponent"] = ("operands" if y2[2] == ctx.s(F) else
                                       "exact" if y2[2] == 0 else f"unexplained ({y2[2]})")
        finding["big_product_operands"] = [str(fa), str(fb)]
    return finding


def _rounding_rows(base: Fraction, copies: int, quantum: Fraction, slots: list[int],
                   offset_slot: int) -> tuple[list[ProbeRow], list[tuple[Fraction, Fraction]]]:
    """Rows copies x base + t*quantum for t in OFFSETS, both signs; with their exact values."""
    rows, cases = [], []
    for sign in (1, -1):
        for t in OFFSETS:
            prods = {k: sign * base for k in slots[:copies]}
            prods[offset_slot] = sign * t * quantum
            rows.append(ProbeRow.of(prods))
            cases.append((sign * (copies * base + t * quantum), quantum))
    return rows, cases


def recipe_accumulator(ctx: ProbeContext, window: dict) -> dict:
    """FPS-PRB-7: fraction bits the group result keeps, and its rounding.

    Row j with n = 2^m copies of P and s_j in the last group of K: the sum
    2^(E+m) + s_j needs j + m fraction bits, so it survives while j + m <= F_acc
    (and j <= F).  Then rounding rows n x X + t ulp (t = 1/4, 1/2, 3/4, both signs)
    name the rounding.  (In an earlier group a fused model would cut the result
    again when the next block aligns it to its window.)
    """
    F = window.get("window_bits")
    limit = ctx.jmax if F is None else F
    finding: dict[str, Any] = {}
    f_acc = None
    for m in (1, 2, 3, 4):
        slots = _in_group(ctx, (1 << m) + 1, last=True)
        if slots is None:
            break
        n = 1 << m
        js = [j for j in range(1, limit + 1)]
        rows = [ProbeRow.of({**{k: ctx.P for k in slots[:n]}, slots[n]: ctx.s(j)}) for j in js]
        y = ctx.run(f"accumulator-bits-m{m}", rows)
        kept = [j for j, v in zip(js, y) if v == n * ctx.P + ctx.s(j)]
        kmax = max(kept) if kept else 0
        finding[f"kept_max_with_{n}_copies"] = kmax
        if kmax < limit:
            f_acc = kmax + m
            break
    if f_acc is None:
        finding["accumulate_bits"] = None
        finding["rounding"] = "unobservable (the group result kept every bit the window let through)"
        return finding
    finding["accumulate_bits"] = f_acc
    # rounding of the group result: choose m so that a quarter ulp is inside the window
    m = 0 if F is None else max(0, f_acc - F + 2)
    slots = _in_group(ctx, (1 << m) + 1, last=True)
    if slots is None:
        finding["rounding"] = "unobservable (group too small for the carries needed)"
        return finding
    quantum = pow2(ctx.E + m - f_acc)
    rows, cases = _rounding_rows(ctx.X, 1 << m, quantum, slots, slots[1 << m])
    if not all(ctx.splittable(*[v for _, v in r.products]) for r in rows):
        finding["rounding"] = "unobservable (offsets not representable as products)"
        return finding
    y = ctx.run("accumulator-rounding", rows)
    modes = classify_rounding([(v, q, o) for (v, q), o in zip(cases, y)])
    finding["rounding_candidates"] = modes
    finding["rounding"] = modes[0] if len(modes) == 1 else ("unexplained" if not modes else "ambiguous")
    return finding


def recipe_cross(ctx: ProbeContext, groups: dict, window: dict, acc: dict) -> dict:
    """FPS-PRB-8: rounding when a later group meets the running accumulator.

    Group 0 holds n x X (an exact accumulator), the first index of group 1 holds
    t ulp; under a fused block whose window is no wider than the accumulator the
    offset is cut by the window (reported as such).
    """
    g = groups.get("group_size")
    if not g or g >= ctx.K:
        return {"rounding": "unobservable (no second group)"}
    f_acc = acc.get("accumulate_bits") or 23
    F = window.get("window_bits")
    first = ctx.K - 2 * g if ctx.K % g == 0 and ctx.K >= 2 * g else 0  # the last two groups
    quantum = pow2(ctx.E - f_acc)
    rows, cases = _rounding_rows(ctx.X, 1, quantum, [first], first + g)
    y = ctx.run("cross-group-rounding", rows)
    modes = classify_rounding([(v, q, o) for (v, q), o in zip(cases, y)])
    finding: dict[str, Any] = {"rounding_candidates": modes}
    if F is not None and F < f_acc + 2 and groups.get("kind") == "fused-truncating":
        finding["rounding"] = "window-truncated"
        finding["note"] = (f"window F={F} cuts sub-ulp offsets before any rounding "
                           f"(consistent with {', '.join(modes) or 'nothing'})")
    else:
        finding["rounding"] = modes[0] if len(modes) == 1 else ("unexplained" if not modes else "ambiguous")
    return finding


def recipe_boundaries(ctx: ProbeContext, groups: dict, window: dict, cross: dict) -> dict:
    """FPS-PRB-9 (promotion interval, split of K) and FPS-PRB-10 (its rounding).

    For every group start i: P at i - G, u at i with u below the window but exact in
    an FP32 sum.  Inside one chain the window drops u (output P); across a promotion
    or split boundary the two partials meet in an FP32 addition (output P + u).
    When the window is too wide for u, X at i - G and t = 0.75 ulp32 at i: a
    round-to-nearest combination gives X + ulp.
    """
    g = groups.get("group_size") or 1
    F = window.get("window_bits")
    starts = list(range(g, ctx.K, g))
    if not starts:
        return {"boundaries": [], "note": "K holds one group"}
    ulp = pow2(ctx.E - 23)
    fused = F is not None and groups.get("kind") == "fused-truncating"
    use_u = fused and F <= 20
    # a wider window: g terms t below it (t < 2^(E - F)) whose sum reaches an FP32 ulp of P
    # (g t >= ulp: F < 23 + log2 g) vanish inside one chain and survive a fresh partial
    tj = 23 + (g - 1).bit_length()
    use_sum = fused and not use_u and F < tj and g > 1 and tj <= ctx.jmax
    signal = "below-window term" if use_u else ("summed below-window terms" if use_sum else "round-to-nearest combine")
    finding: dict[str, Any] = {"signal": signal}
    if use_u:
        u = ctx.s(F + 2)
        rows = [ProbeRow.of({i - g: ctx.P, i: u}) for i in starts]
        y = ctx.run("boundaries", rows)
        bnd = [i for i, v in zip(starts, y) if v == ctx.P + u]
        odd = [i for i, v in zip(starts, y) if v not in (ctx.P, ctx.P + u)]
    elif use_sum:
        t = ctx.s(tj)
        rows = [ProbeRow.of({i - g: ctx.P, **{i + q: t for q in range(min(g, ctx.K - i))}}) for i in starts]
        y = ctx.run("boundaries", rows)
        whole = {i: min(g, ctx.K - i) * t for i in starts}
        bnd = [i for i, v in zip(starts, y) if v == ctx.P + whole[i] and whole[i] >= ulp]
        odd = [i for i, v in zip(starts, y) if v not in (ctx.P, ctx.P + whole[i])]
    else:
        t = 3 * ulp / 4
        rows = [ProbeRow.of({i - g: ctx.X, i: t}) for i in starts]
        y = ctx.run("boundaries", rows)
        if cross.get("rounding") in ("rne", "rna", "ru") or groups.get("kind") == "none-visible":
            finding["note"] = "the chain itself rounds to nearest: a boundary is invisible to this signal"
            bnd, odd = [], []
        else:
            bnd = [i for i, v in zip(starts, y) if v == ctx.X + ulp]
            odd = [i for i, v in zip(starts, y) if v not in (ctx.X, ctx.X + ulp)]
    finding["boundaries"] = bnd
    if odd:
        finding["unexplained_rows"] = odd[:16]
    if bnd:
        p = bnd[0]
        periodic = bnd == list(range(p, ctx.K, p))
        finding["promotion_interval"] = p if periodic else None
        finding["pattern"] = "periodic from 0" if periodic else "irregular (a split of K?)"
        # FPS-PRB-10: rounding of the combining addition, offsets of an FP32 ulp
        slots = _in_group(ctx, 1)
        rows, cases = _rounding_rows(ctx.X, 1, ulp, slots, p)
        y = ctx.run("promotion-rounding", rows)
        modes = classify_rounding([(v, q, o) for (v, q), o in zip(cases, y)])
        finding["rounding_candidates"] = modes
        finding["rounding"] = modes[0] if len(modes) == 1 else ("unexplained" if not modes else "ambiguous")
    else:
        finding["promotion_interval"] = None
    return finding


def recipe_slices(ctx: ProbeContext, groups: dict, bnd: dict) -> dict:
    """FPS-PRB-9: a split of K into slices whose results are added at the end.

    With p the promotion interval (or G), row c: X at 0, h at c - p and h at c,
    h = ulp32(X) / 2.  One sequential chain (promoted or not) loses both halves
    (X + h ties to even, twice): output X.  When c - p and c lie in one slice that
    is not X's, that slice sums h + h = ulp exactly first: output X + ulp.  The
    first such c is L + p for slices of length L.
    """
    p = bnd.get("promotion_interval") or groups.get("group_size") or 1
    h = pow2(ctx.E - 24)
    starts = list(range(2 * p, ctx.K, p))
    if not starts or not ctx.splittable(h):
        return {"slice": None, "note": "K too short for two promotion intervals after the first"}
    rows = [ProbeRow.of({0: ctx.X, c - p: h, c: h}) for c in starts]
    y = ctx.run("slices", rows)
    ulp = 2 * h
    together = [c for c, v in zip(starts, y) if v == ctx.X + ulp]
    odd = [c for c, v in zip(starts, y) if v not in (ctx.X, ctx.X + ulp)]
    finding: dict[str, Any] = {"step": p, "joined_pairs_at": _ranges(together)}
    if odd:
        finding["unexplained_rows"] = odd[:16]
    if not together:
        finding["slice"] = None
        return finding
    L = together[0] - p
    # predicted: c - p and c in one slice >= 1  <=>  (c - p) // L == c // L >= 1
    predicted = [c for c in starts if (c - p) // L == c // L >= 1]
    finding["slice"] = L if predicted == together else None
    if predicted != together:
        finding["note"] = f"joined pairs do not follow slices of {L}: another reduction order"
    return finding


def recipe_lattice(ctx: ProbeContext) -> dict:
    """FPS-PRB-11: an absolute output lattice (snap to 2^-L) and the sign of exact zeros.

    Single products 2^-j and 3 * 2^-j alone in a row: an output snapped to 2^-L
    loses those below 2^-L.  P - P gives the sign of an exact cancellation.
    """
    js, rows = [], []
    for j in range(0, 40):
        for v in (pow2(-j), 3 * pow2(-j - 1)):
            if ctx.splittable(v):
                js.append(v)
                rows.append(ProbeRow.of({0: v}))
    rows.append(ProbeRow.of({0: ctx.P, 1: -ctx.P}))
    rows.append(ProbeRow.of({}))
    y = ctx.run("lattice", rows)
    exact = [v for v, o in zip(js, y) if o == v]
    off = [(v, o) for v, o in zip(js, y) if o != v]
    # later recipes use no product smaller than every product that came out exactly
    if off:
        floor_v = max(v for v, _ in off)
        while ctx.jmax > 1 and ctx.s(ctx.jmax) <= floor_v:
            ctx.jmax -= 1
    finding: dict[str, Any] = {"smallest_exact": str(min(exact)) if exact else None,
                               "cancellation_zero": "-0" if np.signbit(float(y[-2])) else "+0",
                               "empty_row": "-0" if np.signbit(float(y[-1])) else "+0"}
    if off:
        largest_lost = max(v for v, _ in off)
        finding["snap_bits"] = None
        finding["lost"] = [[str(v), str(o)] for v, o in off[:8]]
        # the lattice 2^-L with every exact value a multiple of it
        L = 0
        while L < 200 and any((v * pow2(L)).denominator != 1 for v in exact):
            L += 1
        finding["snap_bits"] = L
        finding["note"] = f"products below the lattice are rounded (largest lost {largest_lost})"
    else:
        finding["snap_bits"] = None
    return finding


def recipe_determinism(ctx: ProbeContext, repeats: int = 3) -> dict:
    """FPS-PRB-3: the same random wide-range GEMM repeated gives identical bits."""
    from .accept import operand_codes

    K = ctx.K
    small = 8 if hasattr(ctx.target, "rowdot") else 128  # models: the bits are a function anyway
    m = ctx.shape[0] if ctx.shape else small
    n = ctx.shape[1] if ctx.shape else small
    a = operand_codes(ctx.fmt, 101, np.arange(m), K)
    bt = operand_codes(ctx.fmt, 202, np.arange(n), K)
    outs = []
    for r in range(repeats):
        import time
        t0 = time.perf_counter()
        y = np.asarray(ctx.target.matmul(a, bt), dtype=np.float32)
        ctx.log.add("determinism", m, n, K, time.perf_counter() - t0, "matmul")
        outs.append(y.view(np.uint32).copy())
    same = all(np.array_equal(outs[0], o) for o in outs[1:])
    diff = int(sum(int(np.count_nonzero(outs[0] != o)) for o in outs[1:]))
    return {"repeats": repeats, "shape": [m, n, K], "deterministic": same, "differing_outputs": diff}


def recipe_epilogue(ctx: ProbeContext) -> dict:
    """FPS-PRB-12: how FP32 tensor scales (alpha) meet the accumulator.

    A row holding one exact product v is run with scales (sa, sb); candidates:
    RNE32(RNE32(sa sb) v) ("once"), RNE32(sa sb v) ("exact"), RNE32(RNE32(v sa) sb)
    and RNE32(RNE32(v sb) sa) (one scale after the other).
    """
    if not hasattr(ctx.target, "matmul_scaled"):
        return {"note": "target takes no tensor scales"}
    rng = np.random.default_rng(7)
    vals = []
    for j in range(64):
        v = Fraction(int(rng.integers(9, 16)), 8) * Fraction(int(rng.integers(9, 16)), 8) * pow2(int(rng.integers(-4, 5)))
        if ctx.splittable(v):
            vals.append(v)
    rows = [ProbeRow.of({0: v}) for v in vals]
    from .operands import build_operands

    def rne32(x: Fraction) -> Fraction:
        # exact rounding via fpspec's spec (no double rounding through float64)
        from ..exact.rounding import round_to_code
        from ..formats import FP32
        return FP32.decode_exact(round_to_code(x, FP32, "rne"))

    tally = {"once": 0, "exact": 0, "a-then-b": 0, "b-then-a": 0}
    total = 0
    for trial in range(6):
        sa = Fraction(float(np.float32(1 + rng.random())))
        sb = Fraction(float(np.float32(1 + rng.random())))
        n = len(rows)
        a, bt = build_operands(rows, ctx.K, ctx.splitter, n_rows=n)
        import time
        t0 = time.perf_counter()
        y = np.asarray(ctx.target.matmul_scaled(a, bt, float(sa), float(sb)), dtype=np.float32)
        ctx.log.add("epilogue", n, n, ctx.K, time.perf_counter() - t0, "matmul_scaled")
        d = np.diagonal(y)
        for v, o in zip(vals, d):
            o = Fraction(float(o))
            total += 1
            tally["once"] += o == rne32(rne32(sa * sb) * v)
            tally["exact"] += o == rne32(sa * sb * v)
            tally["a-then-b"] += o == rne32(rne32(v * sa) * sb)
            tally["b-then-a"] += o == rne32(rne32(v * sb) * sa)
    best = [k for k, c in tally.items() if c == total]
    return {"cases": total, "matches": tally, "alpha": best[0] if len(best) == 1 else (best or "unexplained")}


def run_recipes(ctx: ProbeContext, epilogue: bool = True, determinism: bool = True) -> dict[str, dict]:
    """Run every recipe in order; returns the findings (also kept in ``ctx.findings``)."""
    f = ctx.findings
    f["lattice"] = recipe_lattice(ctx)
    f["groups"] = recipe_groups(ctx)
    f["window"] = recipe_window(ctx, f["groups"])
    f["accumulator"] = recipe_accumulator(ctx, f["window"])
    f["cross_group"] = recipe_cross(ctx, f["groups"], f["window"], f["accumulator"])
    f["boundaries"] = recipe_boundaries(ctx, f["groups"], f["window"], f["cross_group"])
    f["slices"] = recipe_slices(ctx, f["groups"], f["boundaries"])
    if epilogue:
        f["epilogue"] = recipe_epilogue(ctx)
    if determinism:
        f["determinism"] = recipe_determinism(ctx)
    return f
