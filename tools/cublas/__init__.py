"""The cuBLAS-on-H200 tools: sweep, fit, rule, acceptance, observer and shape draws (run as python3 -m
tools.cublas.NAME from the repository root; docs/cublas-h200.rst)."""
