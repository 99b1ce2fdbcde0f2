"""The machine: tracing, auto-sync, scheduling, sanitizer, data path and timing of a launch."""
from .run import Spec, run, run_options, spec

__all__ = ["run", "run_options", "spec", "Spec"]
