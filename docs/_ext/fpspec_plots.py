"""Plots of the spec, drawn from the code at build time with matplotlib (Agg) (FPS-DOC-3).

``.. fpspec-plot:: NAME`` renders the figure NAME (see :data:`PLOTS`) into
``docs/_generated/NAME.png`` (gitignored) and shows it with its caption.
A figure is redrawn only when the code changes: a stamp file beside the PNG
holds the SHA-256 of this module and of every source file of the fpspec package.  Drawing is deterministic (fixed data, no random numbers, no
timestamps in the PNG) and needs no network.

Every number plotted comes from the fpspec modules, computed exactly
(fractions.Fraction); matplotlib only draws.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

# ------------------------------------------------------------------ the data


def sr_bias_curve(mode: str, nbits: int, deltas: list[Fraction]) -> list[Fraction]:
    """Exact bias of a stochastic rounding mode, in units of the gap between the neighbours.

    For each position ``delta`` in [0, 1) between two neighbours lo < hi, every
    random value r in [0, 2^N) is enumerated; the mean rounded value minus the
    input is ``P(up) - delta`` (times hi - lo), where P(up) is the fraction of r
    for which :func:`fpspec.exact.rounding.round_up_decision` (step 7 of
    :func:`~fpspec.exact.rounding.round_to_code`) picks the upper neighbour.
    """
    from fpspec.choices import RoundingMode
    from fpspec.exact.rounding import round_up_decision

    m = RoundingMode.parse(mode)
    out = []
    total = 1 << nbits
    for d in deltas:
        if d == 0:
            out.append(Fraction(0))  # exact inputs are never rounded
            continue
        ups = sum(1 for r in range(total) if round_up_decision(m, d, 0, False, r, nbits))
        out.append(Fraction(ups, total) - d)
    return out


def sr_bias_by_round_to_code(mode: str, nbits: int, delta: Fraction) -> Fraction:
    """The same bias measured through the whole of round_to_code on E2M1 (x = 2 + delta, gap 1)."""
    from fpspec.exact.rounding import round_to_code
    from fpspec.formats import get_format

    e2m1 = get_format("e2m1")
    x = 2 + delta
    total = sum(e2m1.decode_exact(round_to_code(x, e2m1, mode, r=r, nbits=nbits)) for r in range(1 << nbits))
    return Fraction(total, 1 << nbits) - x


SR_MODES = ("sr-midpoint", "sr-add", "sr-unbiased")
SR_WIDTHS = (2, 4, 8)
SR_GRID = 512


def _plot_sr_bias(path: str) -> None:
    import matplotlib.pyplot as plt

    deltas = [Fraction(j, SR_GRID) for j in range(SR_GRID)] + [Fraction(1)]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.8), sharey=True)
    colours = {2: "#c0392b", 4: "#2471a3", 8: "#1e8449"}
    for ax, mode in zip(axes, SR_MODES):
        notes = []
        for n in SR_WIDTHS:
            ys = sr_bias_curve(mode, n, deltas[:-1]) + [Fraction(0)]
            ax.plot([float(d) for d in deltas], [float(y) for y in ys], color=colours[n], lw=1.1,
                    label=f"N = {n}")
            notes.append(f"N={n}: bias in [{_frac(min(ys))}, {_frac(max(ys))}]")
        ax.text(0.02, 0.03, "\n".join(notes), transform=ax.transAxes, fontsize=7.5, va="bottom",
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "#ccc"})
        ax.axhline(0, color="#888", lw=0.6)
        ax.set_title(mode)
        ax.set_xlabel("position delta of |x| between neighbours")
        ax.set_xlim(0, 1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("bias E[q] - |x|  (units of the gap)")
    axes[-1].legend(loc="upper right", fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def _plot_codebooks(path: str) -> None:
    import matplotlib.pyplot as plt

    from fpspec.formats import FORMATS, CodeKind

    fmts = [f for f in FORMATS.values() if f.bits <= 8]
    fig, axes = plt.subplots(len(fmts), 1, figsize=(9, 0.9 * len(fmts) + 0.7))
    for ax, f in zip(axes, fmts):
        pos = [c for c in range(f.magnitude_mask + 1) if f.kind(c) in (CodeKind.NORMAL, CodeKind.SUBNORMAL)]
        sub = [float(f.decode_exact(c)) for c in pos if f.kind(c) is CodeKind.SUBNORMAL]
        nor = [float(f.decode_exact(c)) for c in pos if f.kind(c) is CodeKind.NORMAL]
        ax.vlines(nor, 0, 1, color="#2471a3", lw=0.9, label="normal")
        if sub:
            ax.vlines(sub, 0, 1, color="#d35400", lw=0.9, label="subnormal")
        ax.set_xscale("log", base=2)
        ax.set_yticks([])
        ax.set_ylim(0, 1)
        lo, hi = float(f.min_positive), float(f.max_finite)
        ax.set_xlim(lo / 1.6, hi * 1.6)
        ax.set_ylabel(f.name, rotation=0, ha="right", va="center", fontsize=10)
        ax.text(1.0, 0.5, f"  max {_short(f.max_finite)}\n  min {_short(f.min_positive)}",
                transform=ax.transAxes, va="center", fontsize=9)
        ax.tick_params(axis="x", labelsize=9)
    axes[0].legend(loc="lower left", fontsize=9, ncol=2, bbox_to_anchor=(0, 1.0), frameon=False)
    axes[-1].set_xlabel("positive finite values (log2 axis); each line is one code")
    fig.tight_layout()
    fig.subplots_adjust(right=0.85)
    _save(fig, path)


def _plot_amax_window(path: str) -> None:
    """The representable window of block-to-tensor amax ratios rho against T, per scale format."""
    import matplotlib.pyplot as plt

    from fpspec.bounds import SCALE_FORMATS, range_bounds

    formats = [f for f in SCALE_FORMATS if f != "e4m3"]  # e4m3 as a scale is ue4m3's positive half
    ts = [Fraction(2) ** (k / 4) for k in range(0, 4 * 17 + 1)]  # T from 1 to 2^17 (quarter octaves)
    ts = [Fraction(float(t)).limit_denominator(1 << 20) for t in ts]
    fig, axes = plt.subplots(1, len(formats), figsize=(11, 4.2))
    for ax, sf in zip(axes, formats):
        bs = [range_bounds(sf, t) for t in ts]
        x = [float(t) for t in ts]
        hi = [float(b.headroom) for b in bs]
        lo = [float(b.min_nonzero_ratio) if b.min_nonzero_ratio else float(b.min_scale / b.target) for b in bs]
        full = [float(b.min_normal_ratio) for b in bs]
        ax.fill_between(x, lo, hi, color="#aed6f1", label="nonzero scale")
        ax.fill_between(x, full, hi, color="#2e86c1", alpha=0.7, label="full scale precision")
        ax.axhline(1.0, color="#c0392b", lw=0.9, ls="--", label="rho = 1 (current amax)")
        for t in (448, 2048):
            ax.axvline(t, color="#555", lw=0.7, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_title(sf + (" (no zero: clamps below)" if sf == "ue8m0" else ""), fontsize=10)
        ax.set_xlabel("target T (dotted: 448, 2048)")
        ax.grid(alpha=0.25)
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel("block amax / tensor amax  (rho)")
    axes[-1].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


GEMM_KS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


#: The operand kinds of the gemm-error figure, in the order a preset's contract is asked for one
#: (FPS-GEMM-25): quantized with the scheme's default profile, or plain codes (RNE) of the same inputs.
GEMM_ERROR_KINDS = ("nvfp4", "ue5m3", "bf16", "fp16", "e4m3")


def _gemm_error_operands(kind: str, a, b):
    """(A, BT, fmt, A's values, BT's values) of one figure kind: the values a preset multiplies
    (dequantized, tensor scale included, or decoded codes) as float64."""
    import numpy as np

    from fpspec.convert import decode, encode
    from fpspec.quantization import dequantize, quantize

    if kind in ("nvfp4", "ue5m3"):
        qa, qb = quantize(a, kind), quantize(b, kind)
        return qa, qb, None, dequantize(qa).astype(np.float64), dequantize(qb).astype(np.float64)
    ca, cb = encode(a, kind, "rne"), encode(b, kind, "rne")
    return ca, cb, kind, decode(ca, kind).astype(np.float64), decode(cb, kind).astype(np.float64)


def gemm_error_kind(name: str) -> str:
    """The operand kind the gemm-error figure gives a preset: the first of :data:`GEMM_ERROR_KINDS`
    its operand contract takes (FPS-GEMM-25)."""
    import numpy as np

    from fpspec.gemm_operands import contract_violation
    from fpspec.models import CONTRACTS

    x = np.ones((1, 64), np.float32)
    for kind in GEMM_ERROR_KINDS:
        a, b, fmt, _, _ = _gemm_error_operands(kind, x, x)
        if contract_violation(a, b, name, CONTRACTS[name], fmt) is None:
            return kind
    raise ValueError(f"{name} takes none of {GEMM_ERROR_KINDS}")


def gemm_error_data() -> dict[str, list[float | None]]:
    """Mean |y - y_exact| / sum_k |a_k b_k| over 8 x 8 outputs, per preset and K.

    Operands: standard normal float32 (seeded PCG64), given to each preset in the first
    kind of :data:`GEMM_ERROR_KINDS` its operand contract takes (NVFP4 and UE5M3 quantized
    with their schemes' default profiles, tensor scales applied as the preset's contract says;
    else RNE codes); y_exact is the ``exact`` preset on the same operands.  None where a
    preset matches the exact preset on every output (nothing to draw on a log axis).
    """
    import numpy as np

    from fpspec.matmul import gemm
    from fpspec.presets import PRESETS

    rng = np.random.default_rng(20261129)
    # the GEMM-level presets (the instruction presets of docs/hardware-models.rst need K in
    # whole instructions, and some accumulate in FP16)
    kinds = {name: gemm_error_kind(name) for name, p in PRESETS.items() if name != "exact" and not p.instruction}
    out: dict[str, list[float | None]] = {f"{name} ({kind})": [] for name, kind in kinds.items()}
    for k in GEMM_KS:
        a = rng.standard_normal((8, k)).astype(np.float32)
        b = rng.standard_normal((8, k)).astype(np.float32)
        for kind in sorted(set(kinds.values())):
            qa, qb, fmt, va, vb = _gemm_error_operands(kind, a, b)
            scale = np.abs(va) @ np.abs(vb).T  # exact enough for a normaliser: a plot, not a check
            ref = gemm(qa, qb, "exact", fmt=fmt).astype(np.float64)
            for name in (n for n, kd in kinds.items() if kd == kind):
                err = np.abs(gemm(qa, qb, name, fmt=fmt).astype(np.float64) - ref) / scale
                m = float(err.mean())
                out[f"{name} ({kind})"].append(m if m > 0 else None)
    return out


def _plot_gemm_error(path: str) -> None:
    import matplotlib.pyplot as plt

    raw = gemm_error_data()
    data: dict[str, list[float | None]] = {}
    for name, ys in raw.items():  # presets with identical errors share one line
        same = next((k for k, v in data.items() if v == ys), None)
        if same is None:
            data[name] = ys
        else:
            data[f"{same}, {name}"] = data.pop(same)
    fig, ax = plt.subplots(figsize=(9.5, 4.6))
    markers = "os^vD<>ph*"
    for i, (name, ys) in enumerate(data.items()):
        pts = [(k, y) for k, y in zip(GEMM_KS, ys) if y is not None]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[i % len(markers)], ms=4,
                lw=1.1, label="\n".join(_wrap_names(name)))
    never = [n for n, ys in data.items() if all(y is None for y in ys)]
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("K (reduction length)")
    ax.set_ylabel("mean |y - y_exact| / sum |a_k b_k|")
    ax.grid(alpha=0.3)
    title = "accumulation error of each GEMM preset against the exact preset (on the operands its contract takes)"
    ax.set_title(title, fontsize=10)
    if never:
        ax.text(0.01, 0.01, "equal to exact at every K: " + ", ".join(never), transform=ax.transAxes,
                fontsize=8, va="bottom")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    _save(fig, path)


def _wrap_names(names: str, width: int = 30) -> list[str]:
    lines, cur = [], ""
    for part in names.split(", "):
        if cur and len(cur) + len(part) + 2 > width:
            lines.append(cur + ",")
            cur = part
        else:
            cur = f"{cur}, {part}" if cur else part
    return lines + [cur]


def _frac(v: Fraction) -> str:
    return "0" if v == 0 else (f"{v.numerator}/{v.denominator}" if v.denominator != 1 else str(v.numerator))


def _short(v: Fraction) -> str:
    """A value for a plot label: plain when moderate, 2^e for far powers of two."""
    f = float(v)
    if 1e-2 <= f <= 1e6:
        return f"{f:g}"
    if v.numerator == 1 or v.denominator == 1:
        n = v.numerator if v.denominator == 1 else v.denominator
        if n & (n - 1) == 0:
            return f"2^{(n.bit_length() - 1) * (1 if v.denominator == 1 else -1)}"
    return f"{f:.3g}"


def _save(fig, path: str) -> None:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


@dataclass(frozen=True)
class Plot:
    draw: Callable[[str], None]
    #: modules whose source the figure depends on (the stamp hashes their files)
    modules: tuple[str, ...]
    caption: str
    alt: str


#: name -> figure (other modules may add entries before the build reads pages)
PLOTS: dict[str, Plot] = {
    "codebooks": Plot(
        _plot_codebooks, ("fpspec.formats",),
        "Every positive finite value of each format of at most 8 bits, on a log2 axis "
        "(drawn from fpspec.formats at build time). Subnormals in orange.",
        "codebooks of the 8-bit and smaller formats on a log axis"),
    "sr-bias": Plot(
        _plot_sr_bias, ("fpspec.exact.rounding", "fpspec.choices"),
        "Exact bias of each stochastic rounding variant against the position delta of the input "
        "between its two neighbours, for N = 2, 4 and 8 random bits: every r in [0, 2^N) is "
        "enumerated through fpspec.exact.rounding at delta = j/512. All three are unbiased where "
        "delta is a multiple of 2^-N. In between, sr-midpoint is biased by at most 2^-(N+1) either "
        "way, most (+2^-(N+1)) at the midpoints of the 2^-N steps; sr-add is biased toward zero by "
        "less than 2^-N; sr-unbiased is biased away from zero by less than 2^-N.",
        "bias of stochastic rounding against input position"),
    "amax-window": Plot(
        _plot_amax_window, ("fpspec.bounds", "fpspec.formats"),
        "The window of block-to-tensor amax ratios rho = a_B / g that a scale format represents, "
        "against the target T (fpspec.bounds, exact): above the window the block scale saturates, "
        "below it the scale rounds to zero (light: nonzero scale with fewer significant bits; "
        "dark: full precision). A stale (held) tensor amax needs rho > 1 to stay inside.",
        "representable block amax window against T for each scale format"),
    "gemm-error": Plot(
        _plot_gemm_error, ("fpspec.models", "fpspec.matmul", "fpspec.gemm_operands", "fpspec.exact.accumulate",
                           "fpspec.fast.accumulate", "fpspec.quantization"),
        "Mean accumulation error of each GEMM-level preset against the exact preset on the same operands, "
        "normalised by the sum of the magnitudes of the products, for 8 x 8 outputs of seeded standard-normal "
        "inputs given to each preset as the first of NVFP4, UE5M3 (quantized, tensor scales applied as the "
        "preset's operand contract says, FPS-GEMM-25), BF16, FP16, E4M3 codes that its contract takes (in "
        "brackets; fpspec.matmul, at build time). Presets with no point at some K match the exact preset bit "
        "for bit there.",
        "accumulation error against K for the GEMM presets"),
}


def register_plot(name: str, plot: Plot) -> None:
    PLOTS[name] = plot


# ------------------------------------------------------------------ building


def _stamp(plot: Plot) -> str:
    """SHA-256 of this module, of every source file of the fpspec package and of the
    matplotlib version: a figure is redrawn whenever any code it could depend on changes
    (the modules a figure names are only its direct dependencies)."""
    import matplotlib

    import fpspec

    h = hashlib.sha256()
    files = [os.path.abspath(__file__)]
    for mod in plot.modules:
        files.append(importlib.import_module(mod).__file__)
    pkg = os.path.dirname(os.path.abspath(fpspec.__file__))
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        files += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
    for path in files:
        h.update(os.path.relpath(path, pkg).encode())
        with open(path, "rb") as fh:
            h.update(fh.read())
    h.update(matplotlib.__version__.encode())
    return h.hexdigest()


def ensure_plot(name: str, outdir: str) -> str:
    """Draw PLOTS[name] into outdir/NAME.png unless its stamp is current; return the path."""
    import matplotlib

    matplotlib.use("Agg")
    plot = PLOTS[name]
    os.makedirs(outdir, exist_ok=True)
    png = os.path.join(outdir, f"{name}.png")
    stamp_path = png + ".sha256"
    stamp = _stamp(plot)
    if os.path.exists(png) and os.path.exists(stamp_path):
        with open(stamp_path) as fh:
            if fh.read().strip() == stamp:
                return png
    tmp = png + ".tmp.png"
    plot.draw(tmp)
    os.replace(tmp, png)
    with open(stamp_path, "w") as fh:
        fh.write(stamp + "\n")
    return png


class PlotDirective(Directive):
    """``.. fpspec-plot:: NAME``: a generated figure with its caption."""

    required_arguments = 1
    option_spec = {"width": directives.unchanged}

    def run(self):
        name = self.arguments[0]
        if name not in PLOTS:
            raise self.error(f"unknown fpspec plot {name!r}; known: {', '.join(sorted(PLOTS))}")
        env = self.state.document.settings.env
        try:
            ensure_plot(name, os.path.join(env.srcdir, "_generated"))
        except Exception as exc:
            raise self.error(f"drawing plot {name!r} failed: {type(exc).__name__}: {exc}")
        plot = PLOTS[name]
        for mod in plot.modules:
            env.note_dependency(os.path.abspath(importlib.import_module(mod).__file__))
        lines = [f".. figure:: /_generated/{name}.png",
                 f"   :width: {self.options.get('width', '100%')}",
                 f"   :alt: {plot.alt}", "",
                 f"   {plot.caption}", ""]
        from docutils import nodes

        holder = nodes.container()
        self.state.nested_parse(StringList(lines, source=f"<fpspec-plot {name}>"), self.content_offset, holder)
        return holder.children


def setup(app):
    app.add_directive("fpspec-plot", PlotDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
