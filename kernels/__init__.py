"""Kernels written with the public pyto DSL only: matmul and the Batch-Matmul branches."""
