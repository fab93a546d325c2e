# Sourced by hack/image.sh and the installed-mode tests: podman through a private containers.conf, because on
# these machines crun cannot set up cgroups (hybrid v1) and the default ulimits exceed the hard limits here
# (nofile 20000). Nothing under /etc is touched. Override with your own CONTAINERS_CONF.
if [[ -z "${CONTAINERS_CONF:-}" ]]; then
    _lapilli_conf="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/containers.conf"
    mkdir -p "$(dirname "$_lapilli_conf")"
    cat > "$_lapilli_conf" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
    export CONTAINERS_CONF=$_lapilli_conf
fi
