"""The H200 probe reports page, rendered from docs/probe-reports/h200-*.json at build time (FPS-PRB-15).

``.. fpspec-probe-reports::`` (docs/probe-h200.rst) renders the machine, how the reports were made,
the summary and one section per target from the committed reports, so that the page cannot drift
from them; the build re-reads the page when a report changes.
"""

from __future__ import annotations

import json
from pathlib import Path

from fpspec_tables import GeneratedDirective

REPORTS = Path(__file__).resolve().parents[1] / "probe-reports"
ORDER = ["torch-scaled-mm", "torch-scaled-mm-fast", "torch-bf16", "torch-fp16", "torch-bf16-rpr0"]
FIELDS = ["group_size", "window_bits", "below_window", "product_exponent", "fused", "accumulate_rounding",
          "accumulate_bits", "promotion_interval", "promotion_rounding", "split_k", "snap_bits"]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """An RST list-table."""
    out = [".. list-table::", "   :header-rows: 1", ""]
    for r in [header] + rows:
        out.append("   * - " + (r[0] or " "))
        out += ["     - " + (c or " ") for c in r[1:]]
    return out + [""]


def pct(m: int, c: int) -> str:
    return f"{m:,}/{c:,} ({100 * m / c:.4f} %)" if c else "-"


def fitted_label(f: dict) -> str:
    p = f["parameters"]
    s = f"G={p['group_size']}, F={p['window_bits']}, acc={p['accumulate_bits']} bits, {p['accumulate_rounding']}"
    if p["promotion_interval"]:
        s += f", promote {p['promotion_interval']} ({p['promotion_rounding']})"
    if p.get("split_k"):
        s += f", split_k={p['split_k']}"
    return s


def render(reports: Path = REPORTS) -> list[str]:
    """The page below its title, as RST lines, from the committed reports (in ORDER)."""
    reps = {}
    for name in ORDER:
        path = reports / f"h200-{name}.json"
        if path.exists():
            reps[name] = json.loads(path.read_text())
    first = next(iter(reps.values()))
    t = first["target"]
    L = ["These reports are the provenance of the ``km-h100-*`` presets (:doc:`gemm`): what",
         "``fpspec probe`` (:doc:`probe`) found when it ran against cuBLAS on an NVIDIA H200",
         "through PyTorch, and how the fitted models fared in the acceptance test (every sampled",
         "FP32 output compared bit for bit; 100 % is the only pass).", "",
         "Machine and software", "--------------------", ""]
    L += table(["item", "value"], [
        ["GPU (nvidia-smi: name, driver, memory)", first["gpu"]["nvidia_smi"]],
        ["compute capability, SMs", f"{t.get('compute_capability')}, {t.get('sm_count')}"],
        ["torch, CUDA runtime, cuBLAS (compiled)", f"{t['torch']}, {t['cuda_runtime']}, {t.get('cublas')}"],
        ["Python", first["python"].split()[0]],
        ["collected (UTC)", first["started"]],
    ])
    L += ["How they were made", "------------------", "",
          "On the GPU machine, from a checkout of this repository::", "",
          "    python3 -m tools.gpu.h200_probe --out OUT", "",
          "(every recipe at 256 x 256 x 1024, the recipes again at each acceptance shape, the",
          "acceptance GEMMs), then on any machine::", "",
          "    python3 -m tools.gpu.h200_probe --finish OUT --reports docs/probe-reports",
          "    python3 -m tools.gpu.h200_probe --preset-check OUT --reports docs/probe-reports", "",
          "This page is rendered from the reports ``docs/probe-reports/h200-*.json`` when the docs",
          "build (``docs/_ext/fpspec_probe.py``).", "",
          "The raw device output and the sampled FP32 bits are kept in ``vectors/provenance/h200/``",
          "(``h200_reports.json``, ``h200_samples.npz``, ``h200_log.txt``);",
          "``--finish vectors/provenance/h200`` refits every target from the recorded findings and",
          "repeats the acceptance test offline with fpspec's own GEMM (:func:`fpspec.matmul.gemm`,",
          "the Numba fast path; the operands are regenerated from their seeds), and",
          "``--preset-check vectors/provenance/h200`` checks the nearest preset itself, with the",
          "library's ``split_k`` set per shape.", "",
          "Summary", "-------", ""]
    rows = []
    for name, r in reps.items():
        a = r["acceptance"]
        pc = r.get("preset_check")
        splits = [f"{s['split_k']} at {' x '.join(map(str, s['shape']))}"
                  for s in (pc or {}).get("per_shape", []) if s.get("split_k")]
        rows.append([f"``{name}``", fitted_label(r["fitted"]), f"``{r['nearest_preset']['name']}``",
                     "; ".join(splits) or "none",
                     pct(pc["matched"], pc["compared"]) if pc else "-",
                     pct(a["matched"], a["compared"])])
    L += table(["target", "fitted at 256x256x1024", "preset that reproduces it",
                "split_k (cuBLAS split of K) per shape", "preset + split_k, every shape",
                "fitted model probed per shape"], rows)
    L += ["What this means for the presets", "-------------------------------", "",
          "* **FP8** (``torch._scaled_mm``, float8_e4m3fn, both ``use_fast_accum`` settings): fused",
          "  blocks of 32 products, a 13-bit window anchored at ``ea + eb`` with magnitude truncation,",
          "  RZ, and a **block result kept to 13 fraction bits** (``accumulate_bits = 13``;",
          "  Khattak & Mikaitis' ``GEMM.m`` narrows the output to 23 + neab bits when neab < 0,",
          "  neab = -10 here).  The first device run found that the presets then rounded each block",
          "  result to FP32 (23 bits) and matched only 34.4 % (``km-h100-fp8-promote128``) and",
          "  92.2 % (``km-h100-fp8``) of the samples with K <= 4096; ``GemmModel`` now has",
          "  ``accumulate_bits`` (FPS-GEMM-13), every ``km-*`` preset keeps min(23, 23 + neab) bits",
          "  (FPS-GEMM-15), and the fixed presets reproduce every sampled output.",
          "  ``use_fast_accum=False`` adds promotion into an FP32 accumulator every 128 products",
          "  with RNE (``km-h100-fp8-promote128``); ``True`` never promotes (``km-h100-fp8``).",
          "* **The library splits K by shape.**  At some shapes cuBLAS cuts K into slices (2816",
          "  products for FP8 at 64 x 64 x 16384, both accumulation modes; 1408 for BF16/FP16 at",
          "  64 x 64 x 4096 and 64 x 64 x 16384, 8192 at 128 x 4096 x 16384, 4096 at",
          "  512 x 512 x 16384), runs each as its own chain (with the promotion every 128 inside",
          "  each slice for FP8 without fast accumulation) and adds the slice results in order",
          "  with FP32 RNE additions: ``split_k`` (FPS-GEMM-14).  A probe sees a split without",
          "  promotion as chain boundaries every ``split_k`` products (the fitted",
          "  ``promotion_interval`` in the per-shape tables, which is the same reduction); the",
          "  preset column sets ``split_k`` at exactly those shapes.  fpspec cannot predict from",
          "  the shape alone where cuBLAS splits: a user modelling another shape probes it",
          "  (``fpspec probe --shape``) or sets ``--set split_k=S``.",
          "* **BF16 and FP16** with FP32 output: ``km-h100-bf16`` (G = 16, neab = 2, 23 kept bits,",
          "  RZ), with ``split_k`` where cuBLAS splits; ``allow_bf16_reduced_precision_reduction``",
          "  does not change anything for FP32 output.",
          "* Every target was deterministic over repeats; ``_scaled_mm`` forms",
          "  ``alpha = RNE32(scale_a * scale_b)`` and returns ``RNE32(alpha * acc)``.", ""]
    for name, r in reps.items():
        title = f"``{name}``"
        L += [title, "-" * len(title), "", f"Call: ``{r['target']['call']}``", ""]
        det = r["findings"].get("determinism", {})
        epi = r["findings"].get("epilogue", {})
        L += [f"Deterministic over {det.get('repeats')} repeats at {det.get('shape')}: "
              f"{det.get('deterministic')}.  Epilogue: {epi.get('alpha', epi.get('note', '-'))}.  "
              f"GEMM calls of the probe at 256 x 256 x 1024: {r['gemm_calls']['count']}.", ""]
        p = r["fitted"]["parameters"]
        L += table(["fitted parameter (256 x 256 x 1024)", "value"],
                   [[f, f"``{p[f]}``"] for f in FIELDS])
        if r["fitted"]["outside_family"]:
            L += ["Outside the ``GemmModel`` family: " + "; ".join(r["fitted"]["outside_family"]) + ".", ""]
        diffs = r["nearest_preset"]["differences"]
        L += [f"Nearest preset ``{r['nearest_preset']['name']}``"
              + (f" with ``split_k = {r['nearest_preset']['split_k']}``" if r["nearest_preset"].get("split_k") else "")
              + (": identical on every probed field." if not diffs else
                 ", differing in " + ", ".join(f"``{k}`` (fitted {v['fitted']}, preset {v['preset']})"
                                               for k, v in diffs.items()) + "."), ""]
        srows = []
        acc = {tuple(s["shape"]): s for s in r["acceptance"]["per_shape"]}
        pcs = {tuple(s["shape"]): s for s in r.get("preset_check", {}).get("per_shape", [])}
        for e in r["per_shape"]:
            shp = tuple(e["shape"])
            a = acc.get(shp, {})
            pc = pcs.get(shp, {})
            b = e.get("findings", {}).get("boundaries", {}).get("boundaries", [])
            srows.append([" x ".join(map(str, shp)), a.get("model", "-"),
                          ", ".join(map(str, b[:5])) + (" ..." if len(b) > 5 else "") or "none",
                          pct(a.get("matched", 0), a.get("compared", 0)),
                          f"``{pc['split_k']}``" if pc.get("split_k") else "none",
                          pct(pc.get("matched", 0), pc.get("compared", 0))])
        L += table(["M x N x K", "model probed at this shape", "chain boundaries", "acceptance",
                    f"split_k for ``{r['nearest_preset']['name']}``", "preset + split_k"], srows)
    return L


class ProbeReports(GeneratedDirective):
    """``.. fpspec-probe-reports::``: everything of the H200 page below its title."""

    def rst_lines(self) -> list:
        for path in sorted(REPORTS.glob("h200-*.json")):
            self.state.document.settings.env.note_dependency(str(path))
        return render()


def setup(app):
    app.add_directive("fpspec-probe-reports", ProbeReports)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
