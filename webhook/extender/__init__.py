"""The Volcano scheduler extender: wire types, gang plans, scoring, the HTTP app, and Volcano's side emulated."""
