# syntax=docker/dockerfile:1
# ringroute: admission webhook, rank-table controller and Volcano scheduler extender in one image.
#   make image REGISTRY=registry.example.com        (linux/amd64 and linux/arm64; docs/deploy.md)
#   docker build -t ringroute:0.1.0 .               (this machine's architecture only)

# A multi-arch base (amd64, arm64 among others). For a byte-identical rebuild, pin it by digest:
#   make image PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# The pip that resolves and builds the wheels; the build backend (setuptools) is pinned in pyproject.toml's
# build-system and the runtime dependencies in constraints.txt.
ARG PIP_VERSION=26.3

# Stage 1: build wheels for ringroute and every dependency (no compilers reach the runtime image).
FROM ${PYTHON_IMAGE} AS build
ARG PIP_VERSION
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m pip install "pip==${PIP_VERSION}"
COPY pyproject.toml README.md constraints.txt ./
COPY planner ./planner
COPY webhook ./webhook
COPY certs ./certs
# Dependencies come as the pinned binary wheels only (they exist for x86_64 and aarch64), so a build under
# emulation never compiles anything.
RUN pip wheel --wheel-dir /wheels --constraint constraints.txt --only-binary=:all: .

# Stage 2: the runtime, installed from those wheels only.
FROM ${PYTHON_IMAGE} AS runtime
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
# pip compiles bytecode at install time, so nothing is written at run time (read-only root filesystem).
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels ringroute
# A numeric non-root user: Kubernetes' runAsNonRoot can check it without an /etc/passwd entry.
USER 65532:65532
WORKDIR /tmp
EXPOSE 9443 8888
ENTRYPOINT ["ringroute", "serve"]
