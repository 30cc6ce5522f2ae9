"""Kernels of a torch profiler trace, attributed to the call that launched them (FPS-CUB-8).

Trace format (kineto's Chrome trace, torch 2.x): a CUDA kernel is an event with
``cat == "kernel"`` whose ``args`` hold ``correlation``, ``grid`` ``[x, y, z]``,
``block`` ``[x, y, z]``, ``registers per thread``, ``shared memory``, ``stream``,
``device`` and ``External id``; its launch is a ``cuda_runtime`` or ``cuda_driver``
event on the CPU thread with the same ``correlation``; ``record_function(tag)`` shows
as a ``user_annotation`` event (and a ``gpu_user_annotation`` on the GPU timeline).
A kernel belongs to the annotation whose CPU time range holds its launch.

Used by the torch observer (:func:`fpspec.adapters.torch_gemm.observe`) and by the
H200 sweep (tools/cublas/sweep.py).  Pure Python: no torch needed to read a trace.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LAUNCH_CATS", "KERNEL_CATS", "attribute_kernels"]

#: Event categories of a kernel launch on the CPU side.
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "runtime", "driver")
#: Event categories of a device kernel.
KERNEL_CATS = ("kernel",)


# ================================================================== trace attribution
def attribute_kernels(trace: dict, prefix: str, kernel_cats: tuple[str, ...] = KERNEL_CATS) -> dict[str, dict]:
    """Kernel events of a kineto trace grouped by the ``record_function`` annotation
    (names starting with ``prefix``) that launched them.

    Returns {annotation name: {"kernels": [...], "method": how}} with each kernel as
    {"name", "grid", "block", "ts", "dur_us", "args"} in launch order.  Methods, in the
    order tried: "correlation" (the launch event's CPU time inside the annotation),
    "external-id" (the CPU op that shares the kernel's External id inside the
    annotation), "gpu-annotation" (the kernel's GPU time inside the annotation's GPU
    range).  ``kernel_cats`` lets a CPU-only run treat ``cpu_op`` events as kernels.
    """
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    cat = lambda e: str(e.get("cat", "")).lower()  # noqa: E731
    anns = [e for e in events if cat(e) == "user_annotation" and str(e.get("name", "")).startswith(prefix)]
    gpu_anns = [e for e in events if cat(e) == "gpu_user_annotation" and str(e.get("name", "")).startswith(prefix)]
    launches: dict[Any, dict] = {}
    cpu_ops: dict[Any, dict] = {}
    for e in events:
        args = e.get("args") or {}
        if cat(e) in LAUNCH_CATS and "correlation" in args:
            launches[args["correlation"]] = e
        if cat(e) == "cpu_op" and "External id" in args:
            cpu_ops.setdefault(args["External id"], e)
    kernels = [e for e in events if cat(e) in kernel_cats]

    def inside(t: float, a: dict, tid_of: dict | None) -> bool:
        if tid_of is not None and (tid_of.get("pid"), tid_of.get("tid")) != (a.get("pid"), a.get("tid")):
            return False
        return float(a["ts"]) <= t <= float(a["ts"]) + float(a.get("dur", 0))

    out: dict[str, dict] = {str(a["name"]): {"kernels": [], "method": None} for a in anns + gpu_anns}
    for kev in kernels:
        args = kev.get("args") or {}
        owner, method = None, None
        if cat(kev) == "cpu_op":  # CPU-only run: the op itself lies in the annotation
            cands = [a for a in anns if inside(float(kev["ts"]), a, kev)]
            owner, method = (min(cands, key=lambda a: float(a.get("dur", 0))), "cpu-op") if cands else (None, None)
        if owner is None and args.get("correlation") in launches:
            le = launches[args["correlation"]]
            cands = [a for a in anns if inside(float(le["ts"]), a, le)]
            if cands:
                owner, method = min(cands, key=lambda a: float(a.get("dur", 0))), "correlation"
        if owner is None and args.get("External id") in cpu_ops:
            op = cpu_ops[args["External id"]]
            cands = [a for a in anns if inside(float(op["ts"]), a, op)]
            if cands:
                owner, method = min(cands, key=lambda a: float(a.get("dur", 0))), "external-id"
        if owner is None:
            cands = [a for a in gpu_anns if inside(float(kev["ts"]), a, None)]
            if cands:
                owner, method = min(cands, key=lambda a: float(a.get("dur", 0))), "gpu-annotation"
        if owner is None:
            continue
        slot = out.setdefault(str(owner["name"]), {"kernels": [], "method": None})
        slot["kernels"].append({"name": str(kev.get("name", "")), "grid": args.get("grid"),
                                "block": args.get("block"), "ts": kev.get("ts"), "dur_us": kev.get("dur"),
                                "args": args})
        slot["method"] = slot["method"] or method
    for slot in out.values():
        slot["kernels"].sort(key=lambda k: float(k["ts"] or 0))
    return out
