"""Batch-Matmul: the seeds/000 planner (plan, legal_branches, Plan) and bmm(), which runs the planned branch kernel."""
from .api import bmm
from .planner import Plan, legal_branches, plan

__all__ = ["Plan", "bmm", "legal_branches", "plan"]
