"""The verbs' doors with torch tensors (fpspec.twins.choose_twin, docs/torch.rst): the twin is chosen
by the input's kind, torch in gives torch out on the input's device, and mixed kinds, mixed devices
and a numpy twin given a tensor are refused by name, never copied behind the caller's back."""

from __future__ import annotations

import numpy as np
import pytest

import fpspec
from fpspec.errors import FpspecError
from fpspec.quantization import dequantize, quantize
from fpspec.twins import choose_twin

torch = pytest.importorskip("torch")


def _x(m: int = 16, k: int = 64, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)) * 2.0 ** rng.uniform(-6, 6, (m, 1))).astype(np.float32)


def test_a_numpy_twin_refuses_a_tensor_and_the_torch_twin_refuses_numpy():
    x = _x()
    t = torch.from_numpy(x)
    for impl in ("fast", "exact"):
        with pytest.raises(FpspecError, match=rf"impl '{impl}' computes on numpy arrays on the host, got a torch "
                                              r"float32 tensor of shape \(16, 64\) on cpu"):
            fpspec.encode(t, "e2m1", impl=impl)
        with pytest.raises(FpspecError, match=rf"impl '{impl}' computes on numpy arrays"):
            quantize(t, "ue5m3", impl=impl)
    with pytest.raises(FpspecError, match=r"impl 'torch' computes on torch tensors, got a float32 array"):
        fpspec.encode(x, "e2m1", impl="torch")
    assert choose_twin(None, x).name == "fast"


def test_mixed_kinds_and_devices_are_refused():
    x = _x()
    t = torch.from_numpy(x)
    with pytest.raises(FpspecError, match="encode: x and rbits: torch tensors and numpy arrays are mixed"):
        fpspec.encode(t, "e2m1", "sr", rbits=np.zeros(x.shape, np.uint8))
    qa = quantize(x, "ue5m3")
    qt = qa.to("cpu")
    with pytest.raises(FpspecError, match="A and BT: torch tensors and numpy arrays are mixed"):
        fpspec.gemm(qt, qa, "seed-probe-matched", impl="torch")


def test_torch_in_torch_out_on_the_inputs_device():
    """encode, decode, quantize, dequantize and gemm given CPU tensors answer with CPU tensors equal
    to the fast path's arrays bit for bit."""
    x = _x()
    t = torch.from_numpy(x)
    codes = fpspec.encode(t, "e2m1")
    assert isinstance(codes, torch.Tensor) and codes.device == t.device
    np.testing.assert_array_equal(codes.numpy(), fpspec.encode(x, "e2m1"))
    values = fpspec.decode(codes, "e2m1")
    assert isinstance(values, torch.Tensor)
    np.testing.assert_array_equal(values.numpy(), fpspec.decode(fpspec.encode(x, "e2m1"), "e2m1"))
    q = quantize(t, "mxfp4")
    q_np = quantize(x, "mxfp4")
    assert q.device == "cpu" and q_np.device == "numpy"
    np.testing.assert_array_equal(q.codes.numpy(), q_np.codes)
    np.testing.assert_array_equal(q.scales.numpy(), q_np.scales)
    assert q.decode_scale == q_np.decode_scale and q.spec == q_np.spec
    d = dequantize(q)
    assert isinstance(d, torch.Tensor)
    np.testing.assert_array_equal(d.numpy().view(np.uint32), dequantize(q_np).view(np.uint32))
    c = fpspec.gemm(q, q, "seed-probe-matched")
    assert isinstance(c, torch.Tensor)
    np.testing.assert_array_equal(c.numpy().view(np.uint32),
                                  fpspec.gemm(q_np, q_np, "seed-probe-matched").view(np.uint32))


def test_a_quantized_tensor_moves_only_when_asked():
    q = quantize(_x(), "nvfp4")
    t = q.to("cpu")
    assert t.device == "cpu" and isinstance(t.codes, torch.Tensor) and t.spec is q.spec
    back = t.to("numpy")
    assert back.device == "numpy" and back.spec == q.spec
    np.testing.assert_array_equal(back.codes, q.codes)
    np.testing.assert_array_equal(back.scales, q.scales)
    np.testing.assert_array_equal(t[2:5].codes.numpy(), q[2:5].codes)


def test_rbits_out_of_range_is_named_for_tensors():
    x = torch.from_numpy(_x())
    r = torch.zeros(x.shape, dtype=torch.int32)
    r[3, 7] = 300
    with pytest.raises(FpspecError, match=r"random value 300 is not in 0..2\^8 - 1 \(nbits = 8\)") as e:
        fpspec.encode(x, "e2m1", "sr", rbits=r, nbits=8)
    assert "(3, 7)" in str(e.value) or "[3, 7]" in str(e.value)


def test_a_non_finite_tensor_input_is_refused_by_index():
    x = _x()
    x[5, 9] = np.inf
    with pytest.raises(FpspecError, match="non-finite input value inf") as e:
        quantize(torch.from_numpy(x), "mxfp4")
    assert "(first at index [5, 9])" in str(e.value)


def test_nv_profiles_not_carried_yet_are_refused_by_name():
    """The NV-family block profiles (ue5m3, nvfp4) are not in this version of the torch twin: refused,
    naming the profile, never quantized by another rule."""
    with pytest.raises(FpspecError, match="the torch twin does not carry the ue5m3 profile 'exact'"):
        quantize(torch.from_numpy(_x()), "ue5m3", profile="exact")
