"""Batch-Matmul: the seeds/000 planner (plan, legal_branches, Plan); the branch kernels come later."""
from .planner import Plan, legal_branches, plan

__all__ = ["Plan", "legal_branches", "plan"]
