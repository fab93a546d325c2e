#!/usr/bin/env bash
# Build kube-apiserver and kube-scheduler from Debian's `kubernetes` source package, cached outside the repo.
#
# Debian 12 (bookworm): the system's `kubernetes` source package (1.20.2, complete) and its Go 1.19.
# Elsewhere (Debian 13's `kubernetes` source holds kubectl only, and its Go is too new for 1.20): the same 1.20.2
# source and Debian 12's golang-1.19 are fetched explicitly through a private apt configuration whose only
# sources are bookworm's, pinned to that version, without touching the system's; Go is unpacked into the cache.
# Either way the unpacked tree must hold cmd/kube-apiserver before anything is built. etcd: the system's
# etcd-server where its repositories have one, else bookworm's, fetched the same way and linked into the bin dir.
#
# Idempotent: a finished build is reused; a half-finished one is thrown away so the next run starts clean.
# Concurrent runs wait for each other (flock). Prints the bin directory on its last line.
# LAPILLI_K8S_BIN=DIR short-circuits to a directory the user names (etcd then comes from PATH or DIR).
# LAPILLI_K8S_SOURCE=bookworm takes the pinned path on Debian 12 too, and LAPILLI_K8S_FETCH_ONLY=1 stops once the
# source tree is unpacked and checked (printing its directory): they let the Debian 13 path be tried on Debian 12.
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

# The one source with the complete 1.20.2 tree (Debian 12's), pinned: this upstream version, a Debian revision of it.
pinned_suite="bookworm"
pinned_upstream="1.20.5+really1.20.2"
mirror="${LAPILLI_DEBIAN_MIRROR:-http://deb.debian.org}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
bookworm_apt_dir="$cache_root/apt-$pinned_suite"

bookworm_apt() {
  # apt-get / apt-cache with only bookworm (main + security) as sources and state of their own under the cache:
  # the system's sources, lists and preferences are neither read nor changed.
  local tool=$1
  shift
  "$tool" -o Dir::Etc::SourceList="$bookworm_apt_dir/sources.list" -o Dir::Etc::SourceParts="$bookworm_apt_dir/parts" \
    -o Dir::Etc::Preferences="$bookworm_apt_dir/preferences" -o Dir::Etc::PreferencesParts="$bookworm_apt_dir/parts" \
    -o Dir::State::Lists="$bookworm_apt_dir/lists" -o Dir::Cache="$bookworm_apt_dir/cache" "$@"
}

bookworm_apt_update() {
  mkdir -p "$bookworm_apt_dir/lists/partial" "$bookworm_apt_dir/cache/archives/partial" "$bookworm_apt_dir/parts"
  local signed="signed-by=$keyring"
  {
    echo "deb [$signed] $mirror/debian $pinned_suite main"
    echo "deb-src [$signed] $mirror/debian $pinned_suite main"
    echo "deb [$signed] $mirror/debian-security $pinned_suite-security main"
    echo "deb-src [$signed] $mirror/debian-security $pinned_suite-security main"
  } >"$bookworm_apt_dir/sources.list"
  : >"$bookworm_apt_dir/preferences"
  log "reading the $pinned_suite package lists into $bookworm_apt_dir (a private apt configuration)"
  bookworm_apt apt-get update -qq >&2
}

pinned_version() {
  # The newest Debian revision of the pinned upstream version that the private bookworm sources list.
  bookworm_apt apt-cache showsrc kubernetes | sed -n 's/^Version: //p' | grep -F "$pinned_upstream-" \
    | sort -V | tail -n1
}

fetch_source() {
  # Download beside the cache and move in only when complete, so an interrupted fetch leaves nothing behind.
  rm -rf download.partial
  mkdir download.partial
  if [[ $source == system ]]; then
    log "fetching the kubernetes source package"
    (cd download.partial && apt-get source --download-only kubernetes >&2)
  else
    local version
    version=$(pinned_version)
    if [[ -z $version ]]; then
      log "no kubernetes $pinned_upstream-* source package in $pinned_suite"
      return 1
    fi
    log "fetching kubernetes $version from $pinned_suite (pinned)"
    (cd download.partial && bookworm_apt apt-get source --download-only "kubernetes=$version" >&2)
  fi
  mv download.partial/kubernetes_* .
  rmdir download.partial
}

bookworm_go() {
  # Debian 12's Go 1.19 (what 1.20.2 is built with there), unpacked into the cache, never installed.
  local root="$cache_root/go-$pinned_suite"
  local goroot="$root/usr/lib/go-1.19"
  if [[ ! -x $goroot/bin/go ]]; then
    log "fetching golang-1.19 from $pinned_suite into $root"
    rm -rf "$root.partial"
    mkdir -p "$root.partial/debs"
    (cd "$root.partial/debs" && bookworm_apt apt-get download golang-1.19-go golang-1.19-src >&2)
    local deb
    for deb in "$root.partial"/debs/*.deb; do
      dpkg-deb -x "$deb" "$root.partial"
    done
    rm -rf "$root.partial/debs" "$root"
    mv "$root.partial" "$root"
  fi
  "$goroot/bin/go" version >&2
  echo "$goroot"
}

bookworm_etcd() {
  # Debian 12's etcd-server (Debian 13 has none), unpacked into the cache, never installed; prints the binary.
  local root="$cache_root/etcd-$pinned_suite"
  if [[ ! -x $root/usr/bin/etcd ]]; then
    log "fetching etcd-server from $pinned_suite into $root"
    rm -rf "$root.partial"
    mkdir -p "$root.partial/debs"
    (cd "$root.partial/debs" && bookworm_apt apt-get download etcd-server >&2)
    dpkg-deb -x "$root.partial"/debs/etcd-server_*.deb "$root.partial"
    rm -rf "$root.partial/debs" "$root"
    mv "$root.partial" "$root"
  fi
  "$root/usr/bin/etcd" --version >&2
  echo "$root/usr/bin/etcd"
}

ensure_etcd() {
  # etcd on PATH or in the bin directory $1; else Debian's etcd-server from the system's repositories when they
  # have it (Debian 12), else bookworm's (Debian 13 has no etcd-server) unpacked into the cache and linked as $1/etcd.
  local bin=$1 etcd
  command -v etcd >/dev/null && return 0
  [[ -x $bin/etcd ]] && return 0
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  if apt-cache policy etcd-server 2>/dev/null | grep -q '^ *Candidate: [^(]'; then
    log "installing etcd-server (provides /usr/bin/etcd)"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq etcd-server >&2
    return 0
  fi
  log "the system's repositories have no etcd-server: taking $pinned_suite's"
  bookworm_apt_update
  etcd=$(bookworm_etcd)
  ln -sfn "$etcd" "$bin/etcd"
}

if bin=$(cached_build); then
  ensure_etcd "$bin"
  echo "$bin"
  exit 0
fi

# One build at a time: a second caller waits, then finds the first one's result.
mkdir -p "$cache_root"
exec 9>"$cache_root/.build.lock"
flock 9
if bin=$(cached_build); then
  ensure_etcd "$bin"
  echo "$bin"
  exit 0
fi

# Debian 12 builds from its own sources; any other system (Debian 13: kubectl-only source, newer Go) from the
# pinned bookworm ones.
source=system
if [[ ${LAPILLI_K8S_SOURCE:-} == bookworm ]] || ! grep -qx 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  source=pinned
fi

log "installing build dependencies"
if [[ $source == system ]]; then
  ensure_deb_src
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    golang-go rsync etcd-server golang-github-modern-go-reflect2-dev >&2
else
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    rsync dpkg-dev debian-archive-keyring golang-github-modern-go-reflect2-dev >&2
  bookworm_apt_update
fi

work="$cache_root/src"
mkdir -p "$work"
cd "$work"
if ! ls kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
  fetch_source
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
if [[ ! -d $tree/cmd/kube-apiserver || ! -d $tree/cmd/kube-scheduler ]]; then
  # Debian 13's `kubernetes` source is kubectl only: never build from such a tree.
  log "$tarball has no cmd/kube-apiserver and cmd/kube-scheduler (a client-only source?); removing it"
  rm -rf "$tree" "$work"/kubernetes_*
  hint="run again"
  [[ $source == pinned ]] || hint="run again with LAPILLI_K8S_SOURCE=bookworm"
  log "$hint to fetch the complete $pinned_upstream source of $pinned_suite"
  exit 1
fi
goroot=""
if [[ $source == pinned ]]; then
  goroot=$(bookworm_go)
fi
if [[ ${LAPILLI_K8S_FETCH_ONLY:-} == 1 ]]; then
  etcd=""
  if [[ $source == pinned ]]; then
    etcd=$(bookworm_etcd)  # what a system without etcd-server links into the bin directory
  fi
  log "source tree checked: $tree${goroot:+; Go: $goroot}${etcd:+; etcd: $etcd}"
  trap - ERR INT TERM
  echo "$tree"
  exit 0
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
  if [[ -n $goroot ]]; then
    export GOROOT="$goroot" PATH="$goroot/bin:$PATH" GOTOOLCHAIN=local
  fi
  make WHAT="cmd/kube-apiserver cmd/kube-scheduler" >&2
)
rm -rf "$dest"
mkdir -p "$dest/bin"
for b in kube-apiserver kube-scheduler; do
  install -m 0755 "$(find "$tree/_output" -type f -name "$b" -path '*/bin/*' | head -n1)" "$dest/bin/$b"
done
echo "recipe $recipe" >"$dest/bin/.complete"
log "built in $(( $(date +%s) - start ))s"
ensure_etcd "$dest/bin"
echo "$dest/bin"
