#!/usr/bin/env bash
# Build kube-apiserver and kube-scheduler from Debian's `kubernetes` source package, cached outside the repo.
#
# Idempotent: a finished build is reused; a half-finished one is thrown away so the next run starts clean.
# Concurrent runs wait for each other (flock). Prints the bin directory on its last line.
# LAPILLI_K8S_BIN=DIR short-circuits to a directory the user names (etcd then comes from PATH or DIR).
set -euo pipefail

# Bump when the recipe changes what the binaries contain: a cached build with another stamp is rebuilt.
#   2: vendored modern-go/reflect2 1.0.1 replaced by Debian's 1.0.2 (1.0.1 crashes under Go >= 1.18 as soon as
#      the apiserver encodes a map, e.g. a Node's capacity: "fatal error: fault" in mapiterinit).
recipe="2"

log() { echo "build-k8s: $*" >&2; }

if [[ -n "${LAPILLI_K8S_BIN:-}" ]]; then
  for b in kube-apiserver kube-scheduler; do
    [[ -x "$LAPILLI_K8S_BIN/$b" ]] || { echo "LAPILLI_K8S_BIN=$LAPILLI_K8S_BIN has no executable $b" >&2; exit 1; }
  done
  if [[ ! -x "$LAPILLI_K8S_BIN/etcd" ]] && ! command -v etcd >/dev/null; then
    echo "no etcd in LAPILLI_K8S_BIN=$LAPILLI_K8S_BIN or on PATH (Debian: apt-get install etcd-server)" >&2
    exit 1
  fi
  echo "$LAPILLI_K8S_BIN"
  exit 0
fi

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/lapilli"
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"

cached_build() {
  # An existing build of any version wins: the version is only known after `apt-get source`, which needs
  # the network, and a cached build must keep working offline.
  local bin
  for bin in "$cache_root"/kubernetes-*/bin; do
    if [[ -x "$bin/kube-apiserver" && -x "$bin/kube-scheduler" \
          && "$(cat "$bin/.complete" 2>/dev/null)" == "recipe $recipe" ]]; then
      echo "$bin"
      return 0
    fi
  done
  return 1
}

ensure_etcd() {
  command -v etcd >/dev/null && return 0
  log "installing etcd-server (provides /usr/bin/etcd)"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq etcd-server >&2
}

if bin=$(cached_build); then
  ensure_etcd
  echo "$bin"
  exit 0
fi

# One build at a time: a second caller waits, then finds the first one's result.
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if bin=$(cached_build); then
  ensure_etcd
  echo "$bin"
  exit 0
fi

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
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
  golang-go rsync etcd-server golang-github-modern-go-reflect2-dev >&2

work="$cache_root/src"
mkdir -p "$work"
cd "$work"
if ! ls kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
  log "fetching the kubernetes source package"
  # Download beside the cache and move in only when complete, so an interrupted fetch leaves nothing behind.
  rm -rf download.partial
  mkdir download.partial
  (cd download.partial && apt-get source --download-only kubernetes >&2)
  mv download.partial/kubernetes_* .
  rmdir download.partial
fi
tarball=$(ls kubernetes_*.orig.tar.gz | head -n1)
# kubernetes_1.20.5+really1.20.2.orig.tar.gz -> 1.20.2 (the "really" part is the true upstream version)
version=$(sed -E 's/^kubernetes_(.*)\.orig\.tar\.gz$/\1/; s/.*really//' <<<"$tarball")
dest="$cache_root/kubernetes-$version"
tree="$work/tree-$version"
gopath="$work/gopath"

cleanup_on_failure() {
  log "build failed or interrupted; removing partial output so the next run starts clean"
  rm -rf "$tree.partial" "$tree/_output" "$dest" "$work/download.partial"
}
trap cleanup_on_failure ERR
trap 'cleanup_on_failure; exit 130' INT TERM

if [[ ! -d $tree ]]; then
  log "unpacking $tarball"
  rm -rf "$tree.partial"
  mkdir -p "$tree.partial"
  tar -xzf "$tarball" -C "$tree.partial" --strip-components=1
  mv "$tree.partial" "$tree"
fi

# Go >= 1.18 needs reflect2 >= 1.0.2; Debian packages it, so vendor that copy in place of 1.0.1.
reflect2_src=/usr/share/gocode/src/github.com/modern-go/reflect2
reflect2_dst="$tree/vendor/github.com/modern-go/reflect2"
if [[ ! -f $reflect2_dst/go_above_118.go ]]; then
  log "replacing vendored modern-go/reflect2 with Debian's $(dpkg-query -W -f '${Version}' golang-github-modern-go-reflect2-dev)"
  find "$reflect2_dst" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) -delete
  cp "$reflect2_src"/*.go "$reflect2_src"/*.s "$reflect2_dst/"
fi

mkdir -p "$gopath/src/k8s.io"
ln -sfn "$tree" "$gopath/src/k8s.io/kubernetes"
# A zero-byte generator left by an earlier run without rsync poisons every later build.
if [[ -d $tree/_output/bin ]] && find "$tree/_output/bin/" -size 0 | grep -q .; then
  rm -rf "$tree/_output"
fi

log "building kube-apiserver and kube-scheduler (about 4-7 minutes on 2 cores)"
start=$(date +%s)
(
  cd "$gopath/src/k8s.io/kubernetes"
  export GOPATH="$gopath" GO111MODULE=off GOFLAGS="" CGO_ENABLED=0
  make WHAT="cmd/kube-apiserver cmd/kube-scheduler" >&2
)
rm -rf "$dest"
mkdir -p "$dest/bin"
for b in kube-apiserver kube-scheduler; do
  install -m 0755 "$(find "$tree/_output" -type f -name "$b" -path '*/bin/*' | head -n1)" "$dest/bin/$b"
done
echo "recipe $recipe" >"$dest/bin/.complete"
log "built in $(( $(date +%s) - start ))s"
echo "$dest/bin"
