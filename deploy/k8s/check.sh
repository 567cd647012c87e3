#!/usr/bin/env bash
# Render every overlay under deploy/k8s/overlays with `kubectl kustomize` and
# validate each object offline against a pinned Kubernetes version's schemas
# (kubernetes-validate, strict: unknown fields fail too). Installs what it needs:
# Debian's kubectl (apt) and kubernetes-validate (PyPI, run by uv).
#
#   deploy/k8s/check.sh                  # what `make k8s-check` runs
#   K8S_DIR=/tmp/copy deploy/k8s/check.sh   # another tree (the tests break a copy)
set -euo pipefail

K8S_DIR=${K8S_DIR:-$(dirname "$0")}
K8S_VERSION=${K8S_VERSION:-1.32.0}            # the cluster version the manifests target
VALIDATE=kubernetes-validate==1.37.0          # its schemas cover 1.32
UV=${UV:-uv}
OUT=${K8S_OUT:-$(mktemp -d)}

if ! command -v kubectl >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "k8s-check: installing Debian's kubectl"
        apt-get update -qq && apt-get install -y -qq kubectl >/dev/null
    else
        echo "k8s-check: kubectl is missing; install it (apt-get install kubectl) and retry" >&2
        exit 2
    fi
fi

status=0
for overlay in "$K8S_DIR"/overlays/*/; do
    name=$(basename "$overlay")
    rendered="$OUT/$name.yaml"
    if ! kubectl kustomize "$overlay" > "$rendered"; then
        echo "k8s-check: $name: kustomize could not render the overlay" >&2
        status=1
        continue
    fi
    count=$(grep -c '^kind:' "$rendered" || true)
    if "$UV" tool run --quiet --from "$VALIDATE" kubernetes-validate \
        --kubernetes-version "$K8S_VERSION" --strict --quiet "$rendered"; then
        echo "k8s-check: $name: $count objects valid against Kubernetes $K8S_VERSION"
    else
        echo "k8s-check: $name: invalid objects (above)" >&2
        status=1
    fi
done
exit $status
