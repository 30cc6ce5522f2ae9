"""Generated tables of the GEMM presets, from :mod:`fpspec.models` so that they cannot drift from it.

``.. fpspec-backing-table::``
    what each GEMM preset is backed by (issue 13), from ``fpspec.presets.PRESETS[...].backing``.
``.. fpspec-gemm-contracts::``
    each preset's operand contract (FPS-GEMM-25), from ``fpspec.models.CONTRACTS``: what gemm
    refuses, and where the tensor scales go.
"""

from __future__ import annotations

from fpspec_tables import GeneratedDirective, Table, rst_escape

#: How each kind of evidence reads in the table, strongest first.
KIND_TEXT = {
    "measured": "measured on hardware by fpspec",
    "hardware-validated-model": "reproduced from a hardware-validated model",
    "paper": "taken from a paper, not measured",
    "fpspec-choice": "fpspec's own definition",
}


def _shapes(shapes) -> str:
    if not shapes:
        return ""
    text = ", ".join(f"{m}x{n}x{k}" for m, n, k in shapes[:6])
    return text + (f" and {len(shapes) - 6} more" if len(shapes) > 6 else "")


class BackingTableDirective(GeneratedDirective):
    """One row per preset: the kind of evidence, the device, how many outputs were compared
    bit for bit and at which shapes, and where the evidence is written down."""

    depends_on = ("fpspec.models",)

    def rst_lines(self) -> list:
        from fpspec.presets import PRESETS

        order = list(KIND_TEXT)
        presets = sorted(PRESETS.values(), key=lambda p: (order.index(p.backing.kind), list(PRESETS).index(p.name)))
        rows = []
        for p in presets:
            b = p.backing
            evidence = rst_escape(b.detail)
            if b.kind == "measured":
                evidence += f" ({b.device}; {b.outputs:,} outputs bit for bit at {_shapes(b.shapes)})"
            rows.append([f"``{p.name}``", KIND_TEXT[b.kind], evidence, rst_escape(b.reference)])
        return [Table(["preset", "backed by", "evidence", "where it is written down"], rows,
                      widths=(18, 17, 45, 20), classes="fpspec-table"), ""]


class GemmContractsDirective(GeneratedDirective):
    """One row per preset and library preset: the operands it takes, where their tensor scales
    go, and the sources of both."""

    depends_on = ("fpspec.models",)

    def rst_lines(self) -> list:
        from fpspec.cublas.library import LIBRARY
        from fpspec.models import CONTRACTS
        from fpspec.presets import PRESETS

        rows = []
        for name, c in CONTRACTS.items():
            model = (PRESETS.get(name) or LIBRARY[name]).model
            source = c.source + (f"; epilogue: {c.epilogue_source}" if c.epilogue is not None else "")
            rows.append([f"``{name}``", rst_escape(c.rule()), rst_escape(c.tensor_scales_text(model)),
                         rst_escape(source)])
        return [Table(["preset", "operands it takes", "tensor scales", "source"], rows,
                      widths=(16, 34, 22, 28), classes="fpspec-table"), ""]


def setup(app):
    app.add_directive("fpspec-backing-table", BackingTableDirective)
    app.add_directive("fpspec-gemm-contracts", GemmContractsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
