"""Rank planning: `plan_ranks` (input validation, search, result), ring and halving-doubling orders, baselines.

Private to `planner`: import the public names from `planner` itself.
"""
