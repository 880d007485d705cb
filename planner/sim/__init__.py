"""Network model and flow simulator: traffic patterns and bounds, routing, evaluation, route pinning, plots.

Private to `planner`: import the public names from `planner` itself.
"""
