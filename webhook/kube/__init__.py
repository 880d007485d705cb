"""Kubernetes I/O: the only code that talks to the API server (client, informer, work queue, leases, Events)."""
