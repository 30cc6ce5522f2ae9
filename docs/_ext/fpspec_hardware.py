"""Generated tables of the hardware-models page (docs/hardware-models.rst, FPS-DOC-3).

``.. fpspec-hardware-models::``
    one row per instruction-level preset of :mod:`fpspec.models`: architecture,
    instruction, and its arithmetic (k, group, window, alignment, rounding, specials,
    output) as :func:`fpspec.presets.arithmetic_summary` derives it from the parameters.
``.. fpspec-km-differences::``
    each Khattak-Mikaitis preset beside the instruction preset of its GPU: the parameters
    whose values differ.

Registered by :mod:`fpspec_tables` (its ``setup``), whose table machinery it uses.
"""

from __future__ import annotations

import dataclasses

from fpspec_tables import GeneratedDirective, Table, _param_value, rst_escape

__all__ = ["HardwareModelsDirective", "KmDifferencesDirective", "DIRECTIVES", "KM_COUNTERPARTS"]

#: Each km-* preset and the instruction preset of the same GPU and operand kind.
KM_COUNTERPARTS = {
    "km-v100-fp16": "sm70-f16",
    "km-a100-bf16": "sm80-f16",
    "km-h100-bf16": "sm90-f16",
    "km-h100-fp8": "sm90-fp8",
    "km-h100-fp8-promote128": "sm90-fp8",
    "km-b200-fp8": "sm100-f8f6f4",
}

_COLUMNS = ("k", "group", "window", "alignment", "rounding", "specials", "output")


class HardwareModelsDirective(GeneratedDirective):
    """``.. fpspec-hardware-models::`` architecture x instruction x arithmetic of every
    instruction-level preset, with its evidence kind."""

    depends_on = ("fpspec.models",)

    def rst_lines(self) -> list:
        from fpspec.presets import INSTRUCTION_PRESETS, PRESETS, arithmetic_summary

        rows = []
        for name in INSTRUCTION_PRESETS:
            p = PRESETS[name]
            arith = arithmetic_summary(p.model)
            rows.append([rst_escape(p.architecture), f"``{name}``", rst_escape(p.instruction),
                         *[rst_escape(arith[c]) for c in _COLUMNS], p.backing.kind])
        return [Table(["architecture", "preset", "instruction", *_COLUMNS, "evidence"], rows,
                      widths=(9, 9, 14, 6, 10, 12, 11, 8, 9, 5, 7), classes="fpspec-table fpspec-hardware"), ""]


class KmDifferencesDirective(GeneratedDirective):
    """``.. fpspec-km-differences::`` the parameters where each km-* preset differs from the
    instruction preset of its GPU."""

    depends_on = ("fpspec.models",)

    def rst_lines(self) -> list:
        from fpspec.models import GemmModel
        from fpspec.presets import PRESETS

        rows = []
        for km, sm in KM_COUNTERPARTS.items():
            a, b = PRESETS[km].model, PRESETS[sm].model
            diffs = [f"``{f.name}``: {_param_value(getattr(a, f.name))} / {_param_value(getattr(b, f.name))}"
                     for f in dataclasses.fields(GemmModel) if getattr(a, f.name) != getattr(b, f.name)]
            rows.append([f"``{km}``", f"``{sm}``", "; ".join(diffs) or "none"])
        return [Table(["km preset", "instruction preset", "parameters that differ (km / instruction)"], rows,
                      widths=(18, 16, 66), classes="fpspec-table fpspec-km-differences"), ""]


DIRECTIVES = {
    "fpspec-hardware-models": HardwareModelsDirective,
    "fpspec-km-differences": KmDifferencesDirective,
}
