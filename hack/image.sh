#!/usr/bin/env bash
# `make image`: build Lapilli's container image with podman and print its name and size.
#
#   IMAGE=localhost/lapilli:dev  BASE_IMAGE=python:3.11-slim  PYTHON=.venv/bin/python  bash hack/image.sh
#   BUILDER=docker bash hack/image.sh    (skaffold's custom build on a machine with Docker: plain `docker build`)
#
# 1. podman, buildah, runc and mmdebstrap are installed from Debian when missing (root + apt-get).
# 2. build/wheelhouse/ gets the wheels of Lapilli and its dependencies (the Dockerfile installs only from it).
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
PUBLIC_BASE=docker.io/library/python:3.11-slim
LOCAL_BASE=localhost/lapilli-base:bookworm
BUILD=build

# The wheelhouse: Lapilli's wheel and its dependencies' for the image's Python (3.11). Kept between builds
# (pip reuses the wheels already there); only Lapilli's own wheel is always rebuilt.
wheelhouse() {
    mkdir -p "$BUILD"
    rm -f "$BUILD"/wheelhouse/lapilli-*.whl
    "$PYTHON" -m pip wheel -q --disable-pip-version-check --find-links "$BUILD/wheelhouse" -w "$BUILD/wheelhouse" . \
        > "$BUILD/wheelhouse.log" 2>&1 || { cat "$BUILD/wheelhouse.log" >&2; exit 1; }
}

if [[ "$BUILDER" == docker ]]; then
    PYTHON=${PYTHON:-python3}
    [[ -x "$PYTHON" ]] || command -v "$PYTHON" > /dev/null || PYTHON=python3
    wheelhouse
    docker build --build-arg BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim}" -t "$IMAGE" -f Dockerfile .
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

version=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("lapilli"))')
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
podman build -q --isolation=chroot --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg VERSION="$version" \
    --build-arg REVISION="$revision" --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -t "$IMAGE" -f Dockerfile . > /dev/null
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "$IMAGE $((size / 1000000)) MB (base $BASE_IMAGE)"
