#!/bin/sh
# Build (and push) ringroute's container image with docker, podman or nerdctl, whichever is installed:
# linux/amd64 and linux/arm64 in one multi-arch image where the tool can, this machine's architecture otherwise.
# `make image` runs it; the variables below are its settings (docs/deploy.md, "Build the image").
#   IMAGE         image reference to build and push (required)
#   PLATFORMS     platforms of a multi-arch build (linux/amd64,linux/arm64)
#   PUSH          1 pushes the image (a multi-arch image only exists in a registry); 0 keeps a local,
#                 single-architecture image
#   ENGINE        docker | podman | nerdctl (default: the first one found, in that order)
#   PYTHON_IMAGE  base image, e.g. pinned by digest (default: the Dockerfile's)
#   DRY_RUN       1 prints the commands instead of running them (it still asks the tool what exists)
set -eu

IMAGE=${IMAGE:?set IMAGE, e.g. make image REGISTRY=registry.example.com}
PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
PUSH=${PUSH:-1}
DRY_RUN=${DRY_RUN:-}
PYTHON_IMAGE=${PYTHON_IMAGE:-}
BUILDER=${BUILDER:-ringroute-multiarch}

run() {
  printf '+ %s\n' "$*"
  if [ -z "$DRY_RUN" ]; then "$@"; fi
}

say() { printf 'make image: %s\n' "$*" >&2; }

if [ -z "${ENGINE:-}" ]; then
  for candidate in docker podman nerdctl; do
    if command -v "$candidate" >/dev/null 2>&1; then ENGINE=$candidate; break; fi
  done
fi
if [ -z "${ENGINE:-}" ]; then
  say "none of docker, podman or nerdctl is installed; install one (docs/deploy.md, Build the image)"
  exit 2
fi

# Passing the base image only when it is set keeps the Dockerfile's default in one place.
set --
if [ -n "$PYTHON_IMAGE" ]; then set -- --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE"; fi

case "$ENGINE" in
  docker)
    # The Dockerfile needs BuildKit (RUN --mount); docker's classic builder cannot build it.
    if ! docker buildx version >/dev/null 2>&1; then
      say "docker has no buildx plugin, which this Dockerfile needs (BuildKit): install docker-buildx-plugin"
      say "(Docker Desktop and docker-ce ship it), or build with ENGINE=podman or ENGINE=nerdctl"
      exit 2
    fi
    if [ "$PUSH" = 1 ]; then
      # A multi-platform build needs a BuildKit builder of its own (docker-container driver); it is created once.
      # On an amd64 machine, arm64 steps run under QEMU: docs/deploy.md says how to install it once.
      if ! docker buildx inspect "$BUILDER" >/dev/null 2>&1; then
        run docker buildx create --name "$BUILDER" --driver docker-container
      fi
      run docker buildx build --builder "$BUILDER" --platform "$PLATFORMS" "$@" --tag "$IMAGE" --push .
    else
      say "PUSH=0: building for this machine's architecture only (a multi-arch image lives in a registry)"
      run docker buildx build "$@" --tag "$IMAGE" --load .
    fi
    ;;
  podman)
    # podman builds one image per platform into a manifest list (qemu-user-static runs the foreign one).
    if podman manifest exists "$IMAGE" >/dev/null 2>&1; then
      run podman manifest rm "$IMAGE"
    fi
    run podman build --platform "$PLATFORMS" "$@" --manifest "$IMAGE" .
    if [ "$PUSH" = 1 ]; then run podman manifest push --all "$IMAGE" "docker://$IMAGE"; fi
    ;;
  nerdctl)
    # nerdctl builds through BuildKit (buildkitd must run) and keeps every platform in containerd.
    run nerdctl build --platform "$PLATFORMS" "$@" --tag "$IMAGE" .
    if [ "$PUSH" = 1 ]; then run nerdctl push --all-platforms "$IMAGE"; fi
    ;;
  *)
    say "ENGINE must be docker, podman or nerdctl, got '$ENGINE'"
    exit 2
    ;;
esac
if [ "$PUSH" = 1 ] && [ -z "$DRY_RUN" ]; then say "next: make deploy IMAGE=$IMAGE"; fi
