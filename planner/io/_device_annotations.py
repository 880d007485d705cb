"""The pod annotations Ascend device plugins write device information to."""

from __future__ import annotations

DEFAULT_ANNOTATION_KEYS: tuple[str, ...] = (
    "cce.kubectl.kubernetes.io/ascend-1980-configuration",
    "ascend.kubectl.kubernetes.io/ascend-910-configuration",
)
"""`annotation_keys` for `read_placement` and `placement_from_pods`, first match wins: the 1980 device plugin's
key (910B/910C), then the Ascend 910 plugin's. They are also the built-in accelerator profiles' keys."""
