"""cuBLAS as fpspec models it (docs/cublas-h200.rst): :mod:`fpspec.cublas.h200`, which kernel a
torch GEMM runs on the H200 and how it cuts K (with the recorded calls as data), and
:mod:`fpspec.cublas.library`, the library presets ``cublas-h200-*`` and ``resolve``.  Nothing is
imported here: :mod:`fpspec.models` and :mod:`fpspec.presets` load neither."""
