"""The Dockerfile's essentials, checked by parsing it (no container engine is needed to run the tests)."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def last(self, keyword: str) -> str | None:
        values = [arg for kw, arg in self.instructions if kw == keyword]
        return values[-1] if values else None


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the build stages, with line continuations joined."""
    joined = re.sub(r"\\\n", " ", text)
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
            stage_name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(image, stage_name))
        else:
            assert stages, f"{keyword} before the first FROM"
            stages[-1].instructions.append((keyword, rest))
    return args, stages


def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text(encoding="utf-8"))


def test_image_is_built_in_two_stages_on_a_slim_python_matching_requires_python() -> None:
    _, stages = dockerfile()
    assert len(stages) >= 2
    runtime = stages[-1]
    assert re.fullmatch(r"python:3\.(\d+)-slim(-\w+)?", runtime.image)
    minor = int(runtime.image.split(".")[1].split("-")[0])
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11"
    assert minor >= 11
    # The runtime installs wheels built by an earlier stage, from those wheels only.
    run = runtime.last("RUN") or ""
    assert "from=build" in run
    assert "--no-index" in run
    assert any(s.name == "build" and "pip wheel" in (s.last("RUN") or "") for s in stages[:-1])


def test_runtime_runs_as_a_numeric_non_root_user_and_starts_ringroute_serve() -> None:
    _, stages = dockerfile()
    runtime = stages[-1]
    user = runtime.last("USER")
    assert user is not None
    uid = user.split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0
    entrypoint = runtime.last("ENTRYPOINT")
    assert entrypoint is not None
    assert json.loads(entrypoint) == ["ringroute", "serve"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["ringroute"] == "webhook.cli.main:main"


def test_runtime_writes_nothing_at_run_time_so_a_read_only_root_filesystem_works() -> None:
    _, stages = dockerfile()
    env = " ".join(arg for kw, arg in stages[-1].instructions if kw == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "HOME=/tmp" in env  # /tmp is an emptyDir in the Deployment


def test_exposed_ports_match_the_deployments(objects: list[dict[str, object]]) -> None:
    _, stages = dockerfile()
    exposed = {int(p) for p in (stages[-1].last("EXPOSE") or "").split()}
    ports = {
        port["containerPort"]
        for o in objects
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]  # type: ignore[index]
        for port in c["ports"]
    }
    assert exposed == ports


def test_build_context_holds_the_packages_and_leaves_out_the_rest() -> None:
    rules = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        result = False
        for rule in rules:
            negate = rule.startswith("!")
            pattern = rule.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
                result = not negate
        return result

    _, stages = dockerfile()
    copied = [source for kw, arg in stages[0].instructions if kw == "COPY" for source in arg.split()[:-1]]
    for source in [*copied, "README.md", "constraints.txt"]:
        assert not ignored(source), source
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for include in packages["include"]:
        assert include.rstrip("*") in copied
    for path in (".venv/bin/python", ".git/HEAD", "tests/conftest.py", "webhook/__pycache__/x.pyc"):
        assert ignored(path), path


def pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def constraints() -> dict[str, Version]:
    """constraints.txt as {canonical name: pinned version}; every line must be an exact `name==version` pin."""
    pins: dict[str, Version] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", line
        assert not requirement.marker, line
        assert not requirement.extras, line
        pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def test_the_build_backend_is_one_exact_setuptools_that_reads_the_spdx_license_string() -> None:
    project = pyproject()
    build_system = project["build-system"]
    assert isinstance(build_system, dict)
    (backend,) = [Requirement(r) for r in build_system["requires"]]
    (specifier,) = backend.specifier
    assert backend.name == "setuptools"
    assert specifier.operator == "=="
    # PEP 639 license expressions: setuptools 77.0.3 and later (the table form is refused from 2027).
    assert Version(specifier.version) >= Version("77.0.3")
    metadata = project["project"]
    assert isinstance(metadata, dict)
    assert metadata["license"] == "Apache-2.0"


def test_the_image_installs_pinned_binary_wheels_with_a_pinned_pip() -> None:
    args, stages = dockerfile()
    build = next(s for s in stages if s.name == "build")
    runs = [arg for kw, arg in build.instructions if kw == "RUN"]
    assert Version(args["PIP_VERSION"]) >= Version("23.1")
    assert any('"pip==${PIP_VERSION}"' in run for run in runs)
    wheel = build.last("RUN") or ""
    assert "pip wheel" in wheel
    assert "--constraint constraints.txt" in wheel
    assert "--only-binary=:all:" in wheel  # nothing compiles, also not under arm64 emulation
    copied = [source for kw, arg in build.instructions if kw == "COPY" for source in arg.split()[:-1]]
    assert "constraints.txt" in copied


def test_constraints_pin_every_direct_dependency_within_its_range() -> None:
    pins = constraints()
    metadata = pyproject()["project"]
    assert isinstance(metadata, dict)
    for line in metadata["dependencies"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {requirement.specifier}"
    assert "ringroute" not in pins


def test_parser_reads_continuations_and_stage_names() -> None:
    args, stages = parse_dockerfile("ARG B=img:1\nFROM ${B} AS one\nRUN a \\\n  b\nFROM one\nUSER 1\n")
    assert args == {"B": "img:1"}
    assert [(s.image, s.name) for s in stages] == [("img:1", "one"), ("one", None)]
    assert stages[0].last("RUN") == "a    b"
