"""Running the rendered pods' containers with podman on this host, as a kubelet would run them.

`container_argv` turns one container of a rendered pod spec into `podman run`: the same image, command, args
(with `$(VAR)` expanded from its env as the kubelet does) and env; the security context as podman options
(user, read-only root, no capabilities, no privilege escalation; podman's default seccomp profile is the
runtime default); each volume mount mapped to a directory of the test (ConfigMaps written out, emptyDirs as
writable directories) and the ServiceAccount token where the kubelet projects it. Host networking, so what
the pod reaches on loopback it reaches here; the hostname is the pod's name, as in a pod.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.install.manifests import ROOT

IMAGE = "localhost/lapilli:dev"  # what manifests/install names (images:), built by `make image`
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def podman_env() -> dict[str, str]:
    """The environment hack/podman-env.sh sets up (runc, ulimits this machine allows)."""
    done = subprocess.run(["bash", "-c", "source hack/podman-env.sh && echo \"$CONTAINERS_CONF\""], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return {**os.environ, "CONTAINERS_CONF": done.stdout.strip()}


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, env=podman_env(), check=check,
                          timeout=timeout)


def build_image() -> str:
    """`make image`'s script (it installs podman when missing); returns its last line (name and size)."""
    env = {**os.environ, "IMAGE": IMAGE, "PYTHON": sys.executable}
    done = subprocess.run(["bash", "hack/image.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"hack/image.sh failed:\n{done.stderr[-3000:]}"
    return done.stdout.strip().splitlines()[-1]


_VAR = re.compile(r"\$\((\w+)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion in command and args (unknown references stay as written)."""
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), text)


@dataclass
class PodFiles:
    """Where a pod's volumes live on this host."""

    root: Path
    config_maps: Mapping[str, Mapping[str, str]]
    """ConfigMap name → data, from the render."""
    service_account: Path
    """A directory with token, ca.crt and namespace."""
    dirs: dict[str, Path] = field(default_factory=dict)

    def volume(self, pod_spec: dict[str, Any], name: str) -> Path:
        if name in self.dirs:
            return self.dirs[name]
        volume = next(v for v in pod_spec["volumes"] if v["name"] == name)
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        if "configMap" in volume:
            for key, text in self.config_maps[volume["configMap"]["name"]].items():
                (path / key).write_text(text)
        elif "emptyDir" in volume:
            path.chmod(0o1777)  # writable by the pod's user, as an emptyDir is
        else:
            raise AssertionError(f"volume {name}: only configMap and emptyDir are mapped")
        self.dirs[name] = path
        return path


def container_argv(
    pod_spec: dict[str, Any], container: dict[str, Any], *, name: str, hostname: str, image: str,
    files: PodFiles, env: Mapping[str, str], args: list[str] | None = None, extra_mounts: Mapping[str, Path] = {},
) -> list[str]:
    """`podman run` for `container` of `pod_spec`. `env` adds what the kubelet provides (KUBERNETES_SERVICE_*
    and the values of fieldRefs); `args` replaces the rendered args (after expansion) where a test must map a
    port; `extra_mounts` adds a host file or directory (the kube-scheduler binary in place of its image)."""
    values: dict[str, str] = dict(env)
    for item in container.get("env", []):
        values[item["name"]] = item["value"] if "value" in item else values[item["name"]]
    argv = ["run", "-d", "--name", name, "--network=host", "--hostname", hostname, "--pull=never"]
    pod_sc, sc = pod_spec.get("securityContext", {}), container.get("securityContext", {})
    if "runAsUser" in pod_sc:
        argv += ["--user", f"{pod_sc['runAsUser']}:{pod_sc.get('runAsGroup', pod_sc['runAsUser'])}"]
    if sc.get("readOnlyRootFilesystem"):
        argv += ["--read-only", "--read-only-tmpfs=false"]
    if "ALL" in sc.get("capabilities", {}).get("drop", []):
        argv.append("--cap-drop=ALL")
    if sc.get("allowPrivilegeEscalation") is False:
        argv.append("--security-opt=no-new-privileges")
    for key, value in values.items():
        argv += ["--env", f"{key}={value}"]
    for mount in container.get("volumeMounts", []):
        host = files.volume(pod_spec, mount["name"])
        argv += ["--volume", f"{host}:{mount['mountPath']}:{'ro' if mount.get('readOnly') else 'rw'}"]
    argv += ["--volume", f"{files.service_account}:{SA_DIR}:ro"]
    for target, host in extra_mounts.items():
        argv += ["--volume", f"{host}:{target}:ro"]
    command = [expand(c, values) for c in container.get("command", [])]
    if command:
        argv += ["--entrypoint", command[0]]
    rendered = [expand(a, values) for a in container.get("args", [])]
    return [*argv, image, *command[1:], *(rendered if args is None else args)]
