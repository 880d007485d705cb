#!/bin/sh
# Deploy ringroute with the image you built: write a kustomization that takes this repository's overlay and sets
# the image and the version label every object carries, then `kubectl apply -k` it. `make deploy` runs it; the
# variables below are its settings (docs/deploy.md, "Deploy").
#   IMAGE    the image `make image` pushed (required), e.g. registry.example.com/ringroute:0.1.0
#   OVERLAY  cert-manager | self-signed | base (default: cert-manager)
#   VERSION  the app.kubernetes.io/version label (default: the image's tag, else PROJECT_VERSION)
#   OUT      directory of the kustomization (default: build/deploy/OVERLAY); keep it to apply the same again
#   KUBECTL  the kubectl command (default: kubectl)
#   DRY_RUN  1 writes and prints the kustomization and the command without running it;
#            server runs `kubectl apply --dry-run=server`, which the API server checks and does not store
set -eu

IMAGE=${IMAGE:?set IMAGE to the image make image pushed, e.g. make deploy IMAGE=registry.example.com/ringroute:0.1.0}
OVERLAY=${OVERLAY:-cert-manager}
KUBECTL=${KUBECTL:-kubectl}
DRY_RUN=${DRY_RUN:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

say() { printf 'make deploy: %s\n' "$*" >&2; }

# `base` is the manifests without a certificate source (you create the Secret: docs/deploy.md).
case $OVERLAY in
  base) overlay_dir=manifests ;;
  *) overlay_dir=manifests/overlays/$OVERLAY ;;
esac
if [ ! -f "$ROOT/$overlay_dir/kustomization.yaml" ]; then
  say "OVERLAY must be cert-manager, self-signed or base, got '$OVERLAY'"
  exit 2
fi
case $IMAGE in
  *[[:space:]]* | "" | *@*@*)
    say "IMAGE must be an image reference such as registry.example.com/ringroute:0.1.0, got '$IMAGE'"
    exit 2
    ;;
esac

# name[:tag][@digest]; a ':' before the last '/' belongs to a registry port, not to the tag.
reference=$IMAGE
digest=
case $reference in *@*) digest=${reference#*@}; reference=${reference%@*} ;; esac
last=${reference##*/}
tag=
name=$reference
case $last in *:*) tag=${last##*:}; name=${reference%:*} ;; esac

VERSION=${VERSION:-${tag:-${PROJECT_VERSION:-}}}
# Without a tag or digest, a container runtime pulls `latest`; say so, or the placeholder tag would stay.
if [ -z "$tag" ] && [ -z "$digest" ]; then tag=latest; fi
# The label rule the API server applies (a valid label value), so a bad VERSION fails here, not half-applied.
if ! printf '%s' "$VERSION" | grep -Eq '^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'; then
  say "VERSION must be a label value (at most 63 letters, digits, '-', '_', '.'), got '$VERSION'"
  exit 2
fi

# The path from directory $1 to directory $2 (both absolute): kustomize takes only relative resource paths.
relative_path() {
  from=$1 to=$2 up=
  while :; do
    case $to/ in "$from"/*) break ;; esac
    if [ "$from" = / ]; then break; fi
    from=$(dirname "$from")
    up="../$up"
  done
  rest=${to#"$from"}
  path="$up${rest#/}"
  path=${path%/}
  printf '%s\n' "${path:-.}"
}

OUT=${OUT:-$ROOT/build/deploy/$OVERLAY}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
base="$(relative_path "$OUT" "$(cd "$ROOT" && pwd -P)")/$overlay_dir"

{
  printf '# Written by make deploy: ringroute (%s) with the image %s.\n' "$OVERLAY" "$IMAGE"
  printf '# Apply the same again with: kubectl apply -k %s\n' "$OUT"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n'
  printf 'resources:\n  - %s\n' "$base"
  printf 'images:\n  - name: ringroute\n    newName: %s\n' "$name"
  if [ -n "$tag" ]; then printf '    newTag: "%s"\n' "$tag"; fi
  if [ -n "$digest" ]; then printf '    digest: %s\n' "$digest"; fi
  printf 'labels:\n  - pairs:\n      app.kubernetes.io/version: "%s"\n' "$VERSION"
} >"$OUT/kustomization.yaml"
cat "$OUT/kustomization.yaml"

case $DRY_RUN in
  "")
    printf '+ %s apply -k %s\n' "$KUBECTL" "$OUT"
    $KUBECTL apply -k "$OUT"
    say "check it: kubectl -n ringroute-system get pods (docs/deploy.md, Check the deployment)"
    ;;
  server)
    printf '+ %s apply --dry-run=server -k %s\n' "$KUBECTL" "$OUT"
    $KUBECTL apply --dry-run=server -k "$OUT"
    ;;
  *)
    printf '+ %s apply -k %s\n' "$KUBECTL" "$OUT"
    ;;
esac
