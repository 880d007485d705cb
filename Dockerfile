# syntax=docker/dockerfile:1
# ringroute: admission webhook, rank-table controller and Volcano scheduler extender in one image.
#   docker build -t ringroute:0.1.0 .

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Stage 1: build wheels for ringroute and every dependency (no compilers reach the runtime image).
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY planner ./planner
COPY webhook ./webhook
COPY certs ./certs
RUN pip wheel --wheel-dir /wheels .

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
