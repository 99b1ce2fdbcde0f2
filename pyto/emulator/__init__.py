"""The machine: tracing, auto-sync, scheduling, sanitizer, data path and timing of a launch."""
from .run import CompiledKernel, Spec, compile, run, run_options, spec

__all__ = ["run", "compile", "CompiledKernel", "run_options", "spec", "Spec"]
