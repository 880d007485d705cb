"""One frozen settings tree, built once at start-up from a YAML file (a ConfigMap in the cluster) and flags.

Every field says what its default means (`_model`). Nothing reads settings from globals: the tree is passed
explicitly. A bad file is refused with every problem at once, one line each naming the key as spelt (`_load`).
"""

from webhook.common.settings._hash_model import read_hash_model_file, settings_hash_model
from webhook.common.settings._load import default_settings, load_settings, settings_from_mapping
from webhook.common.settings._model import (
    DEFAULT_PROFILES,
    MIN_VOLCANO_RELEASE,
    NETWORK_TOPOLOGY_RELEASE,
    STEERING_TIME_LIMIT_S,
    AcceleratorProfile,
    AdmissionSettings,
    ControllerSettings,
    ExtenderServerLimits,
    ExtenderSettings,
    HostPathVolume,
    NetworkTopologySettings,
    PlanningSettings,
    PolicySettings,
    ServerLimits,
    Settings,
    SettingsError,
    TopologySettings,
    VolcanoSettings,
    volcano_release,
)

__all__ = [
    "DEFAULT_PROFILES",
    "MIN_VOLCANO_RELEASE",
    "NETWORK_TOPOLOGY_RELEASE",
    "STEERING_TIME_LIMIT_S",
    "AcceleratorProfile",
    "AdmissionSettings",
    "ControllerSettings",
    "ExtenderServerLimits",
    "ExtenderSettings",
    "HostPathVolume",
    "NetworkTopologySettings",
    "PlanningSettings",
    "PolicySettings",
    "ServerLimits",
    "Settings",
    "SettingsError",
    "TopologySettings",
    "VolcanoSettings",
    "default_settings",
    "load_settings",
    "read_hash_model_file",
    "settings_hash_model",
    "settings_from_mapping",
    "volcano_release",
]
