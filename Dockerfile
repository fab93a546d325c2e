# Lapilli's service image: `lapilli serve` (webhook + controllers in the lapilli Deployment, the extender beside
# each kube-scheduler). Build it with `make image`, which first fills build/wheelhouse/ with the wheels of Lapilli
# and its dependencies for this image's platform, so this file never reaches a package index (and builds offline).
#
# The base is an argument: the usual public image on a user's machine, a Debian base made locally where no
# registry answers (hack/image.sh). Any image with Python 3.11 and its venv module works.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="lapilli" \
      org.opencontainers.image.description="Volcano-style batch scheduling for stock Kubernetes: scheduler extender, admission webhook and Volcano Job controllers" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"

# No bytecode written at run time (the root filesystem is read-only), logs unbuffered, HOME and TMPDIR on the
# one writable place the manifests mount (an emptyDir at /tmp).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    PATH=/opt/lapilli/bin:${PATH}

# The wheelhouse is bind-mounted into this one step, so no wheel stays in a layer; --no-index: nothing is
# downloaded here. pip compiles the bytecode now, while the filesystem is still writable.
RUN --mount=type=bind,source=build/wheelhouse,target=/wheelhouse \
    python3 -m venv /opt/lapilli \
    && /opt/lapilli/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse lapilli \
    && /opt/lapilli/bin/pip uninstall -y -q pip setuptools \
    && /opt/lapilli/bin/lapilli --help > /dev/null

# A numeric user (runAsNonRoot can check it without an /etc/passwd entry) that owns nothing in the image.
USER 65532:65532
WORKDIR /tmp
EXPOSE 8443 8080
ENTRYPOINT ["lapilli", "serve"]
