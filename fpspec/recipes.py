"""Training recipes: how each operand of a linear layer's three GEMMs is quantized (FPS-SCL-8).

A linear layer Y = X W^T runs three GEMMs:

* ``fprop``  Y  = X  * W^T   operands X (role x, rowwise) and W (role w, rowwise);
* ``dgrad``  dX = dY * W     operands dY (role dy, rowwise) and W (role w, columnwise);
* ``wgrad``  dW = dY^T * X   operands dY (role dy, columnwise) and X (role x, columnwise).

A :class:`Recipe` states for every operand its tiling, rounding, Hadamard
transform, amax period D and target T, plus the scheme and profile.  The
presets in :data:`RECIPES` cite their sources in docs/tensor-scaling.rst.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

from .errors import FpspecError
from .scaling import TargetTable

__all__ = ["OperandRecipe", "GemmRecipe", "Recipe", "RECIPES", "get_recipe", "seed_down_proj_overrides"]


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
class Recipe:
    name: str
    scheme: str
    profile: str
    block: int
    scale_format: str
    zero_scale_rule: bool | None
    gemms: tuple[GemmRecipe, ...]
    targets: TargetTable = field(default_factory=TargetTable)
    #: the seed's T for dY in wgrad of the four final MLP down_proj layers (see :meth:`for_model`)
    final_down_proj_target: Fraction | None = None
    source: str = ""

    def for_model(self, n_layers: int, pattern: str = "layers.{i}.mlp.down_proj") -> "Recipe":
        """This recipe with its per-module T overrides instantiated for a model of n_layers."""
        if self.final_down_proj_target is None:
            return self
        over = dict(self.targets.overrides)
        over.update({k: self.final_down_proj_target
                     for k in seed_down_proj_overrides(n_layers, pattern)})
        return replace(self, targets=TargetTable(self.targets.default, over))

    def gemm(self, name: str) -> GemmRecipe:
        for g in self.gemms:
            if g.name == name:
                return g
        raise FpspecError(f"recipe {self.name} has no GEMM {name!r}; GEMMs: fprop, dgrad, wgrad")

    def target(self, module: str, role: str, gemm: str) -> Fraction | None:
        """T for this operand of this module's GEMM (None for schemes without a tensor scale)."""
        if self.scheme == "mxfp4":
            return None
        return self.targets.lookup(module, role, gemm)

    def quantize_kwargs(self, module: str, gemm: str, operand: str) -> dict:
        """Keyword arguments of :func:`fpspec.quantization.quantize` for one operand ("a" or "b")."""
        g = self.gemm(gemm)
        op = g.a if operand == "a" else g.b
        kw = dict(scheme=self.scheme, profile=self.profile, block=self.block, tile=op.tile,
                  rounding=op.rounding, columnwise=op.columnwise, rht=op.rht,
                  scale_format=self.scale_format)
        if self.scheme != "mxfp4":
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


def seed_down_proj_overrides(n_layers: int, pattern: str = "layers.{i}.mlp.down_proj") -> dict:
    """The seed's T = 2048 for dY in the wgrad GEMM of the four final MLP down_proj layers."""
    if n_layers < 4:
        raise FpspecError("the seed override names the four final layers: n_layers must be >= 4")
    return {(pattern.format(i=i), "dy", "wgrad"): Fraction(2048) for i in range(n_layers - 4, n_layers)}


def _seed(block: int) -> Recipe:
    return Recipe(
        name=f"seed-ue5m3-block{block}", scheme="ue5m3", profile="seed-fp32", block=block,
        scale_format="ue5m3", zero_scale_rule=True,
        gemms=_linear(w_tile="BxB", dy_rounding="sr", rht_wgrad=False, period=50),
        targets=TargetTable(Fraction(448)), final_down_proj_target=Fraction(2048),
        source="Hu, Luschi, Balanca (arXiv 2609.02846): D = 50 per operand, 2-D weight tiles, SR on dY "
               "only, no RHT, T = 448, T = 2048 for dY in wgrad of the four final MLP down_proj layers "
               "(instantiate with Recipe.for_model(n_layers)).")


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
