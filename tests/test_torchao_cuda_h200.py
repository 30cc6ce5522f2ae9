"""torchao 0.18 run by torch on CUDA (an H200), against the ``-cuda`` profiles (FPS-BLK-29).

``vectors/provenance/h200-refs-cuda/tao_{mx,nv}_cuda.tgz`` hold what torchao computed on the
GPU for the level-1 quantize sets (tools/gpu/h200_refs_cuda.py).  The sets' inputs are read
from ``vectors/v1`` (their bytes have not changed since that run: the pack id of the run is
in the results' ``__pack__``, and every input is compared through the CPU profile's expected
outputs, which must still differ from the GPU's exactly where the device matters).
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from fpspec.quantization import quantize

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "vectors" / "provenance" / "h200-refs-cuda"


def _results(tgz: str, name: str) -> dict[str, np.ndarray]:
    with tarfile.open(DATA / tgz) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("/" + name + ".npz"))
        data = tf.extractfile(member).read()
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _run(set_name: str, tgz: str, profile: str, scheme: str, block: int, with_amax: bool):
    s = np.load(ROOT / "vectors" / "v1" / f"{set_name}.npz", allow_pickle=False)
    gpu = _results(tgz, set_name)
    cases = s["in_x"].shape[0]
    assert gpu["out_codes"].shape[0] == cases
    for i in range(cases):
        x = s["in_x"][i].view(np.float32)
        kw = {}
        if with_amax:
            g = s["in_amax"][i].view(np.float32)
            kw["amax"] = float(g if g != 0 else np.max(np.abs(x)))
        q = quantize(x, scheme, profile=profile, block=block, **kw)
        yield i, q, {k: gpu[k][i] for k in ("out_codes", "out_scales", "out_decode_scale", "out_dequant")}, \
            {k: s[k][i] for k in ("out_codes", "out_scales", "out_decode_scale", "out_dequant")}


def _outputs(q) -> dict[str, np.ndarray]:
    from fpspec.quantization import dequantize

    return {"out_codes": q.codes, "out_scales": q.scales.reshape(q.codes.shape[0], -1),
            "out_decode_scale": np.float32(q.decode_scale).view(np.uint32),
            "out_dequant": dequantize(q).astype(np.float32).view(np.uint32)}


@pytest.mark.parametrize("set_name,tgz,profile,scheme,block,with_amax", [
    ("quantize-mxfp4-torchao-0.18-rceil-1x32", "tao_mx_cuda.tgz", "torchao-0.18-rceil-cuda", "mxfp4", 32, False),
    ("quantize-nvfp4-torchao-0.18-1x16", "tao_nv_cuda.tgz", "torchao-0.18-cuda", "nvfp4", 16, True),
])
def test_fps_blk_29_cuda_profiles_reproduce_torchao_on_the_gpu(set_name, tgz, profile, scheme, block, with_amax):
    """FPS-BLK-29: every output torchao computed on the H200 equals the -cuda profile's; the CPU
    profile (the set's expected outputs) differs from the GPU on at least one case."""
    cpu_differs = 0
    for i, q, gpu, cpu in _run(set_name, tgz, profile, scheme, block, with_amax):
        mine = _outputs(q)
        for key in gpu:
            assert np.array_equal(np.asarray(mine[key]).reshape(np.shape(gpu[key])), gpu[key]), (set_name, i, key)
        cpu_differs += any(not np.array_equal(cpu[k], gpu[k]) for k in gpu)
    assert cpu_differs >= 1


@pytest.mark.parametrize("set_name,tgz", [
    ("quantize-mxfp4-torchao-0.18-floor-1x32", "tao_mx_cuda.tgz"),
    ("quantize-mxfp4-torchao-0.18-ceil-1x32", "tao_mx_cuda.tgz"),
    ("quantize-mxfp4-torchao-0.18-even-1x32", "tao_mx_cuda.tgz"),
    ("quantize-mxfp4-torchao-0.18-rceil-cuda-1x32", "tao_mx_cuda.tgz"),
    ("quantize-nvfp4-torchao-0.18-cuda-1x16", "tao_nv_cuda.tgz"),
])
def test_fps_blk_29_declared_sets_are_what_the_gpu_computed(set_name, tgz):
    """The sets that vectors/declarations/torchao-0.18-cuda.yaml declares: their expected outputs are
    what torchao computed on the H200 (FLOOR / CEIL / EVEN divide by no Python number and take no
    log2, so the CPU profiles hold there)."""
    gpu = _results(tgz, set_name)
    s = np.load(ROOT / "vectors" / "v1" / f"{set_name}.npz", allow_pickle=False)
    for key in ("out_codes", "out_scales", "out_decode_scale", "out_dequant"):
        assert np.array_equal(s[key], gpu[key]), key


def test_fps_blk_29_scalar_division_grid():
    """RCEIL's scale byte is CL(a / 6) + 127 on the CPU and CL(fp32(a fp32(1/6))) + 127 on CUDA: on a
    grid of amaxes within 8 ulps of 6 * 2^k, where the two quotients fall on either side of 2^k
    for some a, the profiles follow their formulas and differ somewhere."""
    from fpspec.fast.log2 import float_log2_ceil_f32

    r6 = np.float32(1.0) / np.float32(6.0)
    hits = 0
    for k in range(-20, 21):
        for j in range(-8, 9):
            a = np.float32(6.0 * 2.0 ** k) * np.float32(1 + j * 2.0 ** -23)
            x = np.zeros((1, 32), dtype=np.float32)
            x[0, 0] = a
            cpu = int(quantize(x, "mxfp4", profile="torchao-0.18-rceil").scales[0, 0])
            gpu = int(quantize(x, "mxfp4", profile="torchao-0.18-rceil-cuda").scales[0, 0])
            want_cpu = int(float_log2_ceil_f32(np.array([a / np.float32(6.0)]))[0]) + 127
            want_gpu = int(float_log2_ceil_f32(np.array([a * r6]))[0]) + 127
            assert (cpu, gpu) == (want_cpu, want_gpu), (k, j)
            hits += cpu != gpu
    assert hits > 0
