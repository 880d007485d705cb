"""The fabric's hash model named by `topology.hashModelFile`: resolved against the settings file, read once.

A relative path is taken from the settings file's directory (in the cluster both are keys of one mounted
ConfigMap), so `hashModelFile: hash-model.yaml` works wherever the settings are mounted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.common.settings._model import Settings

if TYPE_CHECKING:
    from planner import HashModel

MAX_HASH_MODEL_BYTES = 64 * 1024 * 1024
"""Largest hash model file read (a learned model of 10,000 switches is a few MB)."""

_loaded: dict[str, tuple[tuple[int, int, int], HashModel]] = {}
"""The last model read, by path, with the file's (device, inode, mtime) it was read from: one entry."""


def resolve_hash_model_path(value: str, settings_path: str | Path | None) -> str:
    """`value` as an absolute path: relative ones from the settings file's directory (else the working one)."""
    path = Path(value)
    if not path.is_absolute():
        base = Path(settings_path).resolve().parent if settings_path is not None else Path.cwd()
        path = base / path
    return str(path)


def read_hash_model_file(path: str) -> HashModel:
    """The hash model in the file at `path` (cached while the file stays the same); raises ValueError with one line
    naming the problem (unreadable, too large, or the model file's own error)."""
    from planner import InputError, load_hash_model

    try:
        stat = os.stat(path)
        identity = (stat.st_dev, stat.st_ino, stat.st_mtime_ns)
        cached = _loaded.get(path)
        if cached is not None and cached[0] == identity:
            return cached[1]
        if stat.st_size > MAX_HASH_MODEL_BYTES:
            raise ValueError(f"{path}: larger than {MAX_HASH_MODEL_BYTES >> 20} MiB; is it a hash model file?")
        with open(path, encoding="utf-8") as stream:
            text = stream.read(MAX_HASH_MODEL_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    try:
        model = load_hash_model(text, where=path)
    except InputError as exc:
        raise ValueError(str(exc)) from None
    _loaded.clear()
    _loaded[path] = (identity, model)
    return model


def settings_hash_model(settings: Settings) -> HashModel | None:
    """The hash model `settings.topology.hash_model_file` names (load_settings checked it), or None."""
    path = settings.topology.hash_model_file
    return None if path is None else read_hash_model_file(path)


__all__ = ["read_hash_model_file", "resolve_hash_model_path", "settings_hash_model"]
