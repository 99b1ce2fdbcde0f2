"""Small self-contained DSL kernels: a ladder from the seeds' examples to a multi-core matmul."""
