#!/usr/bin/env bash
# Build kube-apiserver and kube-scheduler from Debian's `kubernetes` source package, cached outside the repo.
#
# Idempotent: a finished build is reused; a half-finished one is thrown away so the next run starts clean.
# Prints the bin directory on its last line. LAPILLI_K8S_BIN=DIR short-circuits to a directory the user names.
set -euo pipefail

if [[ -n "${LAPILLI_K8S_BIN:-}" ]]; then
  for b in kube-apiserver kube-scheduler; do
    [[ -x "$LAPILLI_K8S_BIN/$b" ]] || { echo "LAPILLI_K8S_BIN=$LAPILLI_K8S_BIN has no executable $b" >&2; exit 1; }
  done
  echo "$LAPILLI_K8S_BIN"
  exit 0
fi

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/lapilli"
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"

log() { echo "build-k8s: $*" >&2; }

# An existing build of any version wins: the version is only known after `apt-get source`, which needs the
# network, and a cached build must keep working offline.
for bin in "$cache_root"/kubernetes-*/bin; do
  if [[ -x "$bin/kube-apiserver" && -x "$bin/kube-scheduler" && -f "$bin/.complete" ]]; then
    echo "$bin"
    exit 0
  fi
done

ensure_deb_src() {
  local f=/etc/apt/sources.list.d/debian.sources
  if [[ -f $f ]] && ! grep -q '^Types:.*deb-src' "$f"; then
    log "enabling deb-src in $f"
    $sudo sed -i 's/^Types: deb$/Types: deb deb-src/' "$f"
  fi
  if [[ -f /etc/apt/sources.list ]] && grep -q '^deb ' /etc/apt/sources.list \
      && ! grep -q '^deb-src ' /etc/apt/sources.list; then
    log "enabling deb-src in /etc/apt/sources.list"
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' | $sudo tee -a /etc/apt/sources.list >/dev/null
  fi
}

ensure_deb_src
log "installing build dependencies"
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq golang-go rsync etcd-server >&2

work="$cache_root/src"
mkdir -p "$work"
cd "$work"
if ! ls kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
  log "fetching the kubernetes source package"
  apt-get source --download-only kubernetes >&2
fi
tarball=$(ls kubernetes_*.orig.tar.gz | head -n1)
# kubernetes_1.20.5+really1.20.2.orig.tar.gz -> 1.20.2 (the "really" part is the true upstream version)
version=$(sed -E 's/^kubernetes_(.*)\.orig\.tar\.gz$/\1/; s/.*really//' <<<"$tarball")
dest="$cache_root/kubernetes-$version"
tree="$work/tree-$version"
gopath="$work/gopath"

cleanup_on_failure() {
  log "build failed; removing partial output so the next run starts clean"
  rm -rf "$tree/_output" "$dest"
}
trap cleanup_on_failure ERR

if [[ ! -d $tree ]]; then
  log "unpacking $tarball"
  mkdir -p "$tree.partial"
  tar -xzf "$tarball" -C "$tree.partial" --strip-components=1
  mv "$tree.partial" "$tree"
fi

mkdir -p "$gopath/src/k8s.io"
ln -sfn "$tree" "$gopath/src/k8s.io/kubernetes"
# A zero-byte generator left by an earlier run without rsync poisons every later build.
if [[ -d $tree/_output/bin ]] && find "$tree/_output/bin" -size 0 | grep -q .; then
  rm -rf "$tree/_output"
fi

log "building kube-apiserver and kube-scheduler (about 7 minutes on 2 cores)"
start=$(date +%s)
(
  cd "$gopath/src/k8s.io/kubernetes"
  export GOPATH="$gopath" GO111MODULE=off GOFLAGS="" CGO_ENABLED=0 GOCACHE="$work/gocache"
  make WHAT="cmd/kube-apiserver cmd/kube-scheduler" >&2
)
mkdir -p "$dest/bin"
for b in kube-apiserver kube-scheduler; do
  install -m 0755 "$(find "$tree/_output" -type f -name "$b" -path '*/bin/*' | head -n1)" "$dest/bin/$b"
done
touch "$dest/bin/.complete"
log "built in $(( $(date +%s) - start ))s"
echo "$dest/bin"
