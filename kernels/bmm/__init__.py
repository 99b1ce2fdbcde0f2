"""Batch-Matmul: the docs/bmm_branches.md §10 planner (plan, legal_branches, Plan, estimate) and bmm(), which runs the planned
branch kernel (run_plan runs a given plan, e.g. one with Plan.with_tiling)."""
from .api import bmm, run_plan
from .cost import estimate
from .planner import Plan, legal_branches, plan

__all__ = ["Plan", "bmm", "estimate", "legal_branches", "plan", "run_plan"]
