"""Kernels written with the public pyto DSL only: matmul and the Batch-Matmul branches."""
from .matmul import matmul  # noqa: F401  (the function; the module stays importable as kernels.matmul)
