"""Training recipes: how each operand of a linear layer's three GEMMs is quantized (FPS-SCL-8).

A linear layer Y = X W^T runs three GEMMs:

* ``fprop``  Y  = X  * W^T   operands X (role x, rowwise) and W (role w, rowwise);
* ``dgrad``  dX = dY * W     operands dY (role dy, rowwise) and W (role w, columnwise);
* ``wgrad``  dW = dY^T * X   operands dY (role dy, columnwise) and X (role x, columnwise).

A :class:`Recipe` states for every operand its tiling, rounding, Hadamard
transform, amax period D and target T, plus the scheme and profile.  The
presets in :data:`RECIPES` cite their sources in docs/tensor-scaling.rst.

Per-module T overrides are data (FPS-SCL-9): a :class:`TargetOverride` names the
operand role, the GEMM, the kind of module and the layer range, as the seed's
``ScaleTargetOverride`` does; a :class:`ModelLayout` says which blocks of a model
are MLPs, so that :meth:`Recipe.for_model` can list the modules an override covers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

from .errors import FpspecError
from .scaling import TargetTable
from .schemes import get_scheme

__all__ = ["OperandRecipe", "GemmRecipe", "Recipe", "RECIPES", "get_recipe", "ModelLayout", "TargetOverride",
           "NEMOTRON_H_8B", "SEED_FINAL_DOWN_PROJ"]


@dataclass(frozen=True)
class OperandRecipe:
    role: str            # x, w or dy
    columnwise: bool     # the transposed view of the tensor
    tile: str            # 1xB or BxB
    rounding: str        # payload rounding
    rht: bool = False    # 16-point random Hadamard transform before quantization
    period: int | None = 1   # amax period D; None: no tensor scale (MX)


@dataclass(frozen=True)
class GemmRecipe:
    name: str
    a: OperandRecipe
    b: OperandRecipe


@dataclass(frozen=True)
class ModelLayout:
    """The block structure of a model: one character per block (``M`` Mamba-2, ``*``
    attention, ``-`` MLP), and the module-name template of an MLP's down-projection."""

    name: str
    pattern: str
    down_proj: str = "layers.{i}.mixer.down_proj"
    source: str = ""

    def mlp_layers(self) -> tuple[int, ...]:
        return tuple(i for i, kind in enumerate(self.pattern) if kind == "-")


#: Nemotron-H 8B as the seed trains it: 52 blocks, MLPs at 1, 3, 5, ..., 45, 47, 49, 51.
NEMOTRON_H_8B = ModelLayout(
    name="nemotron-h-8b", pattern="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    source="MrHuff/ue5m3-fp4 src/ue5m3_fp4/integrations/torchtitan/selection.py "
           "(REPORTED_NEMOTRON_H_8B_PATTERN, 52 layers)")


@dataclass(frozen=True)
class TargetOverride:
    """T for one operand role in one GEMM of the MLP down-projections of the blocks
    ``layer_start..layer_end`` (inclusive) (FPS-SCL-9)."""

    role: str
    gemm: str
    layer_start: int
    layer_end: int
    target: Fraction
    source: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.layer_start <= self.layer_end:
            raise FpspecError(f"a target override needs 0 <= layer_start <= layer_end, got "
                              f"{self.layer_start}..{self.layer_end}")

    def layers(self, layout: ModelLayout) -> tuple[int, ...]:
        """The MLP blocks of ``layout`` this override covers."""
        return tuple(i for i in layout.mlp_layers() if self.layer_start <= i <= self.layer_end)

    def table_entries(self, layout: ModelLayout) -> dict:
        """The :class:`~fpspec.scaling.TargetTable` overrides for ``layout``."""
        return {(layout.down_proj.format(i=i), self.role, self.gemm): self.target for i in self.layers(layout)}

    @classmethod
    def final_mlps(cls, layout: ModelLayout, count: int, role: str, gemm: str, target: Fraction) -> "TargetOverride":
        """An override of the last ``count`` MLP blocks of ``layout`` (blocks of other kinds
        in between are not MLPs and have no down-projection)."""
        mlps = layout.mlp_layers()
        if not 1 <= count <= len(mlps):
            raise FpspecError(f"{layout.name} has {len(mlps)} MLP blocks; cannot select the last {count}")
        return cls(role, gemm, mlps[-count], mlps[-1], Fraction(target),
                   f"the last {count} MLP blocks of {layout.name}")


#: The seed's T = 2048 for dY in the wgrad GEMM of ``mixer.down_proj`` in layers 44..51 of
#: Nemotron-H 8B, i.e. the four final MLP blocks 45, 47, 49 and 51.
SEED_FINAL_DOWN_PROJ = TargetOverride(
    role="dy", gemm="wgrad", layer_start=44, layer_end=51, target=Fraction(2048),
    source="MrHuff/ue5m3-fp4 src/ue5m3_fp4/recipe.py UE5M3Recipe.proposed(): ScaleTargetOverride("
           "role=WGRAD_UPSTREAM_GRADIENT, module_kind='mixer.down_proj', layer_start=44, layer_end=51, "
           "scale_target=2048)")


@dataclass(frozen=True)
class Recipe:
    name: str
    scheme: str
    profile: str
    block: int
    scale_format: str
    zero_scale_rule: bool | None
    gemms: tuple[GemmRecipe, ...]
    targets: TargetTable = field(default_factory=TargetTable)
    #: per-module T overrides, instantiated for a model by :meth:`for_model`
    target_overrides: tuple[TargetOverride, ...] = ()
    source: str = ""

    def for_model(self, layout: ModelLayout = NEMOTRON_H_8B) -> "Recipe":
        """This recipe with its :attr:`target_overrides` instantiated for the modules of ``layout``."""
        if not isinstance(layout, ModelLayout):
            raise FpspecError(f"for_model takes a ModelLayout (e.g. fpspec.recipes.NEMOTRON_H_8B), got {layout!r}")
        over = dict(self.targets.overrides)
        for o in self.target_overrides:
            over.update(o.table_entries(layout))
        return replace(self, targets=TargetTable(self.targets.default, over))

    def gemm(self, name: str) -> GemmRecipe:
        for g in self.gemms:
            if g.name == name:
                return g
        raise FpspecError(f"recipe {self.name} has no GEMM {name!r}; GEMMs: fprop, dgrad, wgrad")

    @property
    def tensor_scale(self) -> bool:
        return get_scheme(self.scheme).tensor_scale

    def target(self, module: str, role: str, gemm: str) -> Fraction | None:
        """T for this operand of this module's GEMM (None for schemes without a tensor scale)."""
        if not self.tensor_scale:
            return None
        return self.targets.lookup(module, role, gemm)

    def quantize_kwargs(self, module: str, gemm: str, operand: str) -> dict:
        """Keyword arguments of :func:`fpspec.quantization.quantize` for one operand ("a" or "b")."""
        g = self.gemm(gemm)
        op = g.a if operand == "a" else g.b
        kw = dict(scheme=self.scheme, profile=self.profile, block=self.block, tile=op.tile,
                  rounding=op.rounding, columnwise=op.columnwise, rht=op.rht,
                  scale_format=self.scale_format)
        if self.tensor_scale:
            kw["target"] = float(self.target(module, op.role, gemm))
            kw["zero_scale_rule"] = self.zero_scale_rule
        return kw


def _linear(*, w_tile: str, dy_rounding: str, rht_wgrad: bool, period: int | None) -> tuple[GemmRecipe, ...]:
    x_row = OperandRecipe("x", False, "1xB", "rne", False, period)
    w_row = OperandRecipe("w", False, w_tile, "rne", False, period)
    w_col = OperandRecipe("w", True, w_tile, "rne", False, period)
    dy_row = OperandRecipe("dy", False, "1xB", dy_rounding, False, period)
    dy_col = OperandRecipe("dy", True, "1xB", dy_rounding, rht_wgrad, period)
    x_col = OperandRecipe("x", True, "1xB", "rne", rht_wgrad, period)
    return (GemmRecipe("fprop", x_row, w_row), GemmRecipe("dgrad", dy_row, w_col),
            GemmRecipe("wgrad", dy_col, x_col))


def _seed(block: int) -> Recipe:
    return Recipe(
        name=f"seed-ue5m3-block{block}", scheme="ue5m3", profile="seed-fp32", block=block,
        scale_format="ue5m3", zero_scale_rule=True,
        gemms=_linear(w_tile="BxB", dy_rounding="sr", rht_wgrad=False, period=50),
        targets=TargetTable(Fraction(448)), target_overrides=(SEED_FINAL_DOWN_PROJ,),
        source="Hu, Luschi, Balanca (arXiv 2609.02846): D = 50 per operand, 2-D weight tiles, SR on dY "
               "only, no RHT, T = 448, T = 2048 for dY in wgrad of mixer.down_proj in layers 44..51 "
               "(instantiate with Recipe.for_model(layout)).")


RECIPES: dict[str, Recipe] = {
    "seed-ue5m3-block16": _seed(16),
    "seed-ue5m3-block32": _seed(32),
    "ue5m3-te-settings": Recipe(
        name="ue5m3-te-settings", scheme="ue5m3", profile="seed-fp32", block=16, scale_format="ue5m3",
        zero_scale_rule=True,
        gemms=_linear(w_tile="BxB", dy_rounding="sr", rht_wgrad=True, period=1),
        source="seed paper's 'UE5M3 with Transformer Engine settings': UE5M3 scales, TE's current "
               "scaling (D = 1), RHT on the wgrad operands, 2-D weights, SR on dY."),
    "te-nvfp4": Recipe(
        name="te-nvfp4", scheme="nvfp4", profile="te-fp32", block=16, scale_format="ue4m3",
        zero_scale_rule=False,
        gemms=_linear(w_tile="BxB", dy_rounding="sr-add", rht_wgrad=True, period=1),
        source="NVIDIA, Pretraining LLMs with NVFP4 (arXiv 2509.25149) and TransformerEngine's NVFP4 "
               "recipe: current scaling, 16x16 weight tiles, RHT on the wgrad operands, SR on gradients."),
    "ocp-mxfp4": Recipe(
        name="ocp-mxfp4", scheme="mxfp4", profile="floor", block=32, scale_format="ue8m0",
        zero_scale_rule=None,
        gemms=_linear(w_tile="1xB", dy_rounding="rne", rht_wgrad=False, period=None),
        source="OCP Microscaling Formats (MX) v1.0: 1x32 blocks, E8M0 scales, no tensor scale, RNE."),
}


def get_recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise FpspecError(f"unknown recipe {name!r}; known: {', '.join(RECIPES)}") from None
