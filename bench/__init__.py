"""Benchmarks: scripts that print JSON lines (run with `make bench`)."""
