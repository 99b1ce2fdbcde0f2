"""Commands that kernels adds to `pyto` (entry point group ``pyto.commands``)."""
from __future__ import annotations

import argparse

from pyto.errors import ShapeError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the kernels' subcommands to the `pyto` parser."""
    register_plan(sub)


def plan_shapes(B: int, M: int, N: int, K: int, batch_a: int | None = None, batch_b: int | None = None,
                transpose_a: bool = False, transpose_b: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Operand shapes for `pyto plan`: equal batches, a batch-1 side, or a cross broadcast BA x BB = B."""
    ba = B if batch_a is None else batch_a
    bb = B if batch_b is None else batch_b
    a_mat = (K, M) if transpose_a else (M, K)
    b_mat = (N, K) if transpose_b else (K, N)
    if ba == bb == B or (1 in (ba, bb) and max(ba, bb) == B):
        return (ba,) + a_mat, (bb,) + b_mat
    if ba * bb == B:
        return (ba, 1) + a_mat, (1, bb) + b_mat
    raise ShapeError(f"--batch-a {ba} and --batch-b {bb} do not give B = {B}: use equal batches, one side 1, "
                     f"or BA * BB = B (cross broadcast)")


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan's explanation."""
    from kernels.bmm import plan
    a_shape, b_shape = plan_shapes(args.B, args.M, args.N, args.K, args.batch_a, args.batch_b,
                                   args.transpose_a, args.transpose_b)
    p = plan(a_shape, b_shape, dtype=args.dtype, chip=args.chip, bias=args.bias, transpose_a=args.transpose_a,
             transpose_b=args.transpose_b, branch=args.branch, reduce=args.reduce)
    print(p.explain())
    return 0


def register_plan(sub: argparse._SubParsersAction) -> None:
    """`pyto plan B M N K ...`: choose a BMM branch (seeds/000) and explain every condition."""
    p = sub.add_parser("plan", help="choose a BMM branch (seeds/000) and explain the decision")
    for dim in ("B", "M", "N", "K"):
        p.add_argument(dim, type=int, help=f"{dim} of C[B, M, N] = A[B, M, K] @ B[B, K, N]")
    p.add_argument("--batch-a", type=int, default=None, help="BatchA (default B)")
    p.add_argument("--batch-b", type=int, default=None, help="BatchB (default B)")
    p.add_argument("--dtype", default="bf16", help="fp16, bf16, fp32 or int8 (default bf16)")
    p.add_argument("--chip", default="ascend950pr", help="chip name or .toml path (default ascend950pr)")
    p.add_argument("--bias", action="store_true", help="add a bias [B, 1, N]")
    p.add_argument("--transpose-a", action="store_true", help="A stored (B, K, M)")
    p.add_argument("--transpose-b", action="store_true", help="B stored (B, N, K)")
    p.add_argument("--branch", default=None, help="force a branch (only its structural preconditions are checked)")
    p.add_argument("--reduce", default="workspace", choices=("workspace", "atomic"), help="StreamK reduction")
    p.set_defaults(func=cmd_plan)
