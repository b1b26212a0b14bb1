#!/usr/bin/env bash
# Builds the Kubernetes control plane the tests run against, from the Go module proxy:
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl at KUBE_VERSION, etcd at
# ETCD_VERSION. `go install k8s.io/kubernetes/cmd/...@v1.37.2` cannot work (the kubernetes
# go.mod replaces every k8s.io/* staging module with ./staging/src/...), so the commands are
# built inside two small wrapper modules committed beside this script (kube/ and etcd/), whose
# go.mod pins the staging modules at their published v0.x versions (and etcd's server at its
# tag). Binaries and both Go caches live outside the checkout, so that a fresh clone reuses
# them: only the first build on a machine is cold (about 8 minutes on 2 cores).
set -euo pipefail

# tools/cluster/binaries.py names the versions and the directories (`python -m tools.cluster
# build` runs this script with them set).
: "${KUBE_VERSION:?}" "${ETCD_VERSION:?}" "${LWGPU_KUBE_CACHE:?}" "${LWGPU_KUBE_BIN:?}"
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=$LWGPU_KUBE_CACHE
BIN=$LWGPU_KUBE_BIN
export GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off

if ! command -v go >/dev/null; then
    echo "tools/cluster/build.sh: go not found; install Go 1.26+ (Debian: golang-go)" >&2
    exit 2
fi
mkdir -p "$BIN"
start=$(date +%s)

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
(
    cd "$HERE/kube"
    go build -trimpath -ldflags "$ldflags" -o "$BIN/" \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler \
        k8s.io/kubernetes/cmd/kubectl
    go build -trimpath -ldflags "-s -w" -o "$BIN/kubelet-atomic-writer" ./atomicwriter
)
(
    cd "$HERE/etcd"
    go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
)

echo "built in $(( $(date +%s) - start )) s, in $BIN:"
for b in kube-apiserver kube-controller-manager kube-scheduler; do
    printf '  %-24s %s\n' "$b" "$("$BIN/$b" --version)"
done
printf '  %-24s %s\n' kubectl "$("$BIN/kubectl" version --client | head -1)"
printf '  %-24s %s\n' etcd "$("$BIN/etcd" --version | head -1)"
