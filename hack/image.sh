#!/usr/bin/env bash
# `make image`: build Lapilli's container image with podman and print its name and size.
#
#   IMAGE=localhost/lapilli:dev  BASE_IMAGE=python:3.11-slim  PYTHON=.venv/bin/python  bash hack/image.sh
#   BUILDER=docker bash hack/image.sh    (skaffold's custom build on a machine with Docker: plain `docker build`)
#
# 1. podman, buildah, runc and mmdebstrap are installed from Debian when missing (root + apt-get).
# 2. build/wheelhouse/ gets Lapilli's own wheel (pure Python, built by any host interpreter) and its dependencies'
#    wheels for the image, not for the host: CPython 3.11 on Linux $IMAGE_ARCH (default: this machine's arch;
#    amd64/x86_64 or arm64/aarch64), manylinux up to glibc 2.36 (Debian bookworm's: python:3.11-slim is bookworm or newer).
#    So a macOS, arm64 or Python 3.13 host fills it for the image it builds. The Dockerfile installs only from it.
# 3. The base: $BASE_IMAGE if given; else the public python:3.11-slim if a registry answers; else a Debian
#    bookworm base (python3 3.11 + venv) made here with mmdebstrap from Debian's archive, kept as
#    localhost/lapilli-base:bookworm for the next build.
# Runs through a private containers.conf (runc, ulimits within this machine's hard limits, see
# shared/reference/container-notes.md) so nothing under /etc is changed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILDER=${BUILDER:-podman}

IMAGE=${IMAGE:-localhost/lapilli:dev}
PYTHON=${PYTHON:-.venv/bin/python}
[[ -x "$PYTHON" ]] || command -v "$PYTHON" > /dev/null || PYTHON=python3
PUBLIC_BASE=docker.io/library/python:3.11-slim
LOCAL_BASE=localhost/lapilli-base:bookworm
BUILD=build

case "${IMAGE_ARCH:-$(uname -m)}" in
    x86_64 | amd64) ARCH=x86_64 PLATFORM=linux/amd64 ;;
    aarch64 | arm64) ARCH=aarch64 PLATFORM=linux/arm64 ;;
    *) echo "IMAGE_ARCH=${IMAGE_ARCH:-$(uname -m)}: only x86_64 (amd64) and aarch64 (arm64) images are built" >&2
       exit 1 ;;
esac

# The wheelhouse. Wheels already there are reused (pip download skips them); only Lapilli's is always rebuilt.
# Wheels of another arch may sit beside them: the image's pip takes only those for its own platform.
wheelhouse() {
    local house=$BUILD/wheelhouse log=$BUILD/wheelhouse.log platforms=(--platform "manylinux2014_$ARCH")
    for glibc in $(seq 17 36); do platforms+=(--platform "manylinux_2_${glibc}_$ARCH"); done
    mkdir -p "$house"
    rm -f "$house"/lapilli-*.whl
    { "$PYTHON" -m pip wheel -q --disable-pip-version-check --no-deps --ignore-requires-python -w "$house" . &&
      "$PYTHON" -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.11 \
          --implementation cp --abi cp311 "${platforms[@]}" -d "$house" "$house"/lapilli-*.whl
    } > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
}

# The same build arguments for podman and docker: the platform, and the OCI labels' version (the wheel's, so no
# interpreter needs Lapilli installed), revision and creation time.
build_args() {
    local wheel
    wheel=$(basename "$BUILD"/wheelhouse/lapilli-*.whl)
    wheel=${wheel#lapilli-}
    BUILD_ARGS=(--platform "$PLATFORM" --build-arg VERSION="${wheel%%-*}"
        --build-arg REVISION="$(git rev-parse --short HEAD 2> /dev/null || echo unknown)"
        --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)")
}

if [[ "$BUILDER" == docker ]]; then
    wheelhouse
    build_args
    docker build "${BUILD_ARGS[@]}" --build-arg BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim}" -t "$IMAGE" \
        -f Dockerfile .
    exit 0
fi

need=()
for tool in podman buildah runc mmdebstrap; do command -v "$tool" > /dev/null || need+=("$tool"); done
if ((${#need[@]})); then
    echo "installing ${need[*]} from Debian" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq > /dev/null
    apt-get install -y -qq --no-install-recommends podman buildah runc mmdebstrap uidmap \
        containernetworking-plugins > /dev/null
fi

# shellcheck source=hack/podman-env.sh
source hack/podman-env.sh

wheelhouse

base_exists() { podman image exists "$1"; }
if [[ -z "${BASE_IMAGE:-}" ]]; then
    if base_exists "$PUBLIC_BASE" || timeout 60 podman pull -q "$PUBLIC_BASE" > /dev/null 2>&1; then
        BASE_IMAGE=$PUBLIC_BASE
    elif base_exists "$LOCAL_BASE"; then
        BASE_IMAGE=$LOCAL_BASE
    else
        echo "no registry answers: making $LOCAL_BASE from Debian's archive (mmdebstrap, ~2 min)" >&2
        tarball=$BUILD/lapilli-base.tar
        mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
            bookworm "$tarball" http://deb.debian.org/debian >&2
        podman import -q "$tarball" "$LOCAL_BASE" > /dev/null
        rm -f "$tarball"
        BASE_IMAGE=$LOCAL_BASE
    fi
fi

build_args
podman build -q --isolation=chroot "${BUILD_ARGS[@]}" --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$IMAGE" \
    -f Dockerfile . > /dev/null
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "$IMAGE $((size / 1000000)) MB (base $BASE_IMAGE)"
