"""The Volcano scheduler extender: wire types, gang plans, scoring, its HTTP endpoints, and Volcano's side emulated."""
