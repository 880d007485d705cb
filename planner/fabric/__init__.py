"""The fabric model: how the fabric's ECMP switches hash a 5-tuple onto a next hop, and what follows from it.

Evaluating a hash model (`_hashing`), learning and fitting one from switches' answers (`_calibrate`, with GF(2)
algebra in `_gf2`), the probes to ask the switches (`_probes`), and searching source ports whose hash takes each
queue pair onto its planned spine (`_port_search`). The hash model's data sits below, in `planner._hash_model`;
the network model it runs on is the simulator's (`planner.sim`).

Private to `planner`: import the public names from `planner` itself.
"""
