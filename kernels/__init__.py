"""Kernels written with the public pyto DSL only: matmul and the Batch-Matmul branches.

`pyto_kernels.matmul` is the 2-D matmul function (`from pyto_kernels import matmul`); its module, with plan_matmul and
matmul_kernel, is `sys.modules["pyto_kernels.matmul"]` or `from pyto_kernels.matmul import plan_matmul, matmul_kernel`.
"""
from .matmul import matmul  # noqa: F401
