"""Network model and flow simulator: traffic patterns and bounds, routing, evaluation, route pinning (alone and
around other jobs' load), the fabric's link index and load ledger, plots.

Private to `planner`: import the public names from `planner` itself.
"""
