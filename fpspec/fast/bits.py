"""Bit casts and 32-bit shifts for the Numba kernels of the encoder and the block quantizer.

Each is a single LLVM instruction, no conversion: the IEEE bits of a binary32 value as a
uint32 (:func:`f32_bits`) and back (:func:`bits_f32`), the same for binary64 and uint64
(:func:`f64_bits`, :func:`bits_f64`), and a logical right shift that stays 32 bits wide
(:func:`shr_u32`).  Numba widens ``uint32 >> uint32`` to a 64-bit shift, and a loop with
such a shift is vectorized in 64-bit lanes (half as many per vector, with widenings and
narrowings around each shift); the casts spare a loop a second load of the same value
as another type.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["f32_bits", "bits_f32", "f64_bits", "bits_f64", "shr_u32"]


def _bit_cast(name: str, src: types.Type, dst: types.Type, llvm_type: ir.Type, doc: str):
    """An intrinsic that reinterprets a ``src`` value as ``dst`` (one LLVM ``bitcast``)."""
    def typer(typingctx, v):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llvm_type)
        return dst(src), codegen
    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    return intrinsic(typer)


f32_bits = _bit_cast("f32_bits", types.float32, types.uint32, ir.IntType(32),
                     "The IEEE bits of a binary32 value as a uint32.")
bits_f32 = _bit_cast("bits_f32", types.uint32, types.float32, ir.FloatType(),
                     "The binary32 value whose IEEE bits are the given uint32.")
f64_bits = _bit_cast("f64_bits", types.float64, types.uint64, ir.IntType(64),
                     "The IEEE bits of a binary64 value as a uint64.")
bits_f64 = _bit_cast("bits_f64", types.uint64, types.float64, ir.DoubleType(),
                     "The binary64 value whose IEEE bits are the given uint64.")


@intrinsic
def shr_u32(typingctx, a, s):
    """``a >> s`` as one 32-bit logical shift (``a``, ``s`` uint32, ``s < 32``)."""
    def codegen(context, builder, signature, args):
        return builder.lshr(args[0], args[1])
    return types.uint32(types.uint32, types.uint32), codegen
