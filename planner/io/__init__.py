"""Inputs and rank-table formats: placements read from Pods, topology sources and file, HCCL rank tables.

Private to `planner`: import the public names from `planner` itself.
"""
