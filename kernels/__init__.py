"""Kernels written with the public pyto DSL only: matmul and the Batch-Matmul branches.

`kernels.matmul` is the 2-D matmul function (`from kernels import matmul`); its module, with plan_matmul and
matmul_kernel, is `sys.modules["kernels.matmul"]` or `from kernels.matmul import plan_matmul, matmul_kernel`.
"""
from .matmul import matmul  # noqa: F401
