"""The torch twin: every numeric rule of fpspec on torch tensors, on any torch device.

The third twin beside :mod:`fpspec.exact` (the spec) and :mod:`fpspec.fast` (Numba), with the same
module names and numbered steps (docs/architecture.rst, docs/torch.rst): ``rounding.py``
(conversion), ``scan.py``, ``blocks.py``, ``mx.py``, ``rht.py``, ``dequant.py``, ``transpose.py``
(block quantization), ``chain.py`` and ``accumulate.py`` (the GEMM models).  It is chosen by
``impl="torch"``, or by giving a verb torch tensors (:func:`fpspec.twins.choose_twin`); its
outputs are torch tensors on the input's device, and no step copies data to the host.

Importing this package does not import torch: the modules do, when the twin is first chosen.
"""
