"""Stage data: full mode's data pass (every instruction's effect on the numbers, in the schedule's order)."""
