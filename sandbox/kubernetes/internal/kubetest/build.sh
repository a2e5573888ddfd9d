#!/usr/bin/env bash
# Builds the test cluster's binaries from the Go module proxy: etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler, into
# ${PROCTOR_KUBE_BIN:-$HOME/.cache/proctor/kube-v1.34.4} (what kubetest.Start
# looks for). Idempotent: a binary already there is not built again.
#
# Neither module can be installed with `go install`: both carry replace
# directives pointing at directories their published zips do not have. So
# each is copied out of the module cache into a temporary directory, its
# replaces are pointed at the published modules, and it is built there.
# Nothing of either enters proctor's go.mod.
set -euo pipefail

KUBE_VERSION=v1.34.4
STAGING_VERSION=v0.34.4
ETCD_VERSION=v3.6.16
BIN=${PROCTOR_KUBE_BIN:-$HOME/.cache/proctor/kube-$KUBE_VERSION}
mkdir -p "$BIN"

# Run the build outside any module (ours sets GOFLAGS or a go.work in some
# setups); the module cache is shared.
export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# copy_module MODULE@VERSION DIR: a writable copy of a module from the cache.
copy_module() {
  local dir
  dir=$(cd "$work" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "build.sh: go mod download $1 gave no directory" >&2; exit 1; }
  cp -r "$dir" "$2"
  chmod -R u+w "$2"
  rm -rf "$2/vendor" "$2/go.work" "$2/go.work.sum"
}

need_kube=()
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  [ -x "$BIN/$b" ] || need_kube+=("$b")
done

if [ ${#need_kube[@]} -gt 0 ]; then
  start=$SECONDS
  src=$work/kubernetes
  copy_module "k8s.io/kubernetes@$KUBE_VERSION" "$src"
  (
    cd "$src"
    # Every k8s.io/X => ./staging/src/k8s.io/X replace goes to the published k8s.io/X.
    sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' go.mod | while read -r m; do
      go mod edit -replace "$m=$m@$STAGING_VERSION"
    done
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=34 -X $pkg.gitTreeState=clean"
    for b in "${need_kube[@]}"; do
      t=$SECONDS
      go build -trimpath -ldflags "$ldflags" -o "$BIN/$b.tmp" "./cmd/$b"
      mv "$BIN/$b.tmp" "$BIN/$b"
      echo "build.sh: $b built in $((SECONDS - t)) s"
    done
  )
  echo "build.sh: Kubernetes $KUBE_VERSION binaries built in $((SECONDS - start)) s"
fi

if ! [ -x "$BIN/etcd" ]; then
  start=$SECONDS
  src=$work/etcd
  copy_module "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "$src"
  (
    cd "$src"
    # The server module's replaces point at sibling directories of the etcd
    # repository; use the published modules of the same version instead.
    sed -n 's#^[[:space:]]*\(go.etcd.io/[^ ]*\) => \.\./.*#\1#p' go.mod | while read -r m; do
      go mod edit -dropreplace "$m"
    done
    go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" .
    mv "$BIN/etcd.tmp" "$BIN/etcd"
  )
  echo "build.sh: etcd $ETCD_VERSION built in $((SECONDS - start)) s"
fi

echo "build.sh: binaries in $BIN"
