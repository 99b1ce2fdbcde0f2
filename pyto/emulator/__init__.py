"""The machine: tracing, auto-sync, scheduling, sanitizer, data path and timing of a launch."""
from .run import Spec, run, spec

__all__ = ["run", "spec", "Spec"]
