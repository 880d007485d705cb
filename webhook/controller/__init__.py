"""The rank-table controller: pure planning helpers, the reconciler, and the lease wiring that runs it."""
