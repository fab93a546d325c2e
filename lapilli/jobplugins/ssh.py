"""The `ssh` job plugin (`pkg/controllers/job/plugins/ssh`): password-less ssh between a Job's pods.

* object: Secret `<job>-ssh` with `id_rsa` (2048-bit RSA, PKCS#1 PEM — generated unless `--ssh-private-key`
  is given), `id_rsa.pub` and `authorized_keys` (the OpenSSH public key) and `config`
  (`StrictHostKeyChecking no`, `UserKnownHostsFile /dev/null`, then `Host`/`HostName`/`Port` per replica);
* pod: the Secret as a volume whose items land under `.ssh/`, mounted at `--ssh-key-file-path`
  (default `/root/.ssh`) with `subPath: .ssh` in every container and init container; mode 0600, or 0644 when a
  non-default path is used (a non-root user must be able to read it).
Key generation draws randomness but does no I/O; callers that must not regenerate (Volcano never rewrites the
Secret on update) pass the existing pair to `job_resources`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from lapilli.jobplugins.base import PodContext
from lapilli.jobplugins.flags import FlagValue, parse_flags
from lapilli.jobplugins.naming import JobShape, make_pod_name, object_meta
from lapilli.jobplugins.podspec import add_mount, add_volume, containers

NAME: Final = "ssh"
DEFAULT_PATH: Final = "/root/.ssh"
RELATIVE_PATH: Final = ".ssh"
KEYS: Final = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
DEFAULT_PORT: Final = 22
FLAGS: Final[Mapping[str, FlagValue]] = {
    "ssh-key-file-path": DEFAULT_PATH, "ssh-private-key": "", "ssh-public-key": "", "ssh-port": 22,
}


@dataclass(frozen=True, slots=True)
class SSHKeyPair:
    """PKCS#1 PEM private key and OpenSSH `authorized_keys` line (both bytes, newline-terminated)."""

    private_pem: bytes
    public_openssh: bytes


def generate_keypair(bits: int = 2048) -> SSHKeyPair:
    """A fresh RSA key pair, encoded as Volcano's `generateRsaKey` encodes it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return SSHKeyPair(private, public + b"\n")


def secret_name(job_name: str) -> str:
    return f"{job_name}-{NAME}"


def ssh_config(job: JobShape, port: int) -> str:
    """`generateSSHConfig`: one `Host` block per replica (one per task with an explicit hostname)."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in job.tasks:
        count = min(task.replicas, 1) if task.hostname else task.replicas
        for i in range(count):
            hostname = task.hostname or make_pod_name(job.name, task.name, i)
            lines += [f"Host {hostname}", f"  HostName {hostname}.{task.subdomain or job.name}", f"  Port {port}"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class SshPlugin:
    key_path: str = DEFAULT_PATH
    private_key: str = ""
    public_key: str = ""
    port: int = DEFAULT_PORT
    keypair: SSHKeyPair | None = None
    error: str = ""
    name: str = NAME

    @classmethod
    def build(cls, args: Sequence[object]) -> SshPlugin:
        flags = parse_flags(args, FLAGS)
        port = flags.number("ssh-port")
        return cls(
            key_path=flags.text("ssh-key-file-path") or DEFAULT_PATH,
            private_key=flags.text("ssh-private-key"),
            public_key=flags.text("ssh-public-key"),
            port=port if 0 < port < 65536 else DEFAULT_PORT,
            error=flags.error,
        )

    def with_keypair(self, keypair: SSHKeyPair | None) -> SshPlugin:
        return replace(self, keypair=keypair)

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        name = secret_name(ctx.job.name)
        items = [{"key": key, "path": f"{RELATIVE_PATH}/{key}"} for key in KEYS]
        mode = 0o600 if self.key_path == DEFAULT_PATH else 0o644
        add_volume(pod, {"name": name, "secret": {"secretName": name, "items": items, "defaultMode": mode}})
        for container in containers(pod):
            add_mount(container, {"name": name, "mountPath": self.key_path, "subPath": RELATIVE_PATH})

    def _keys(self) -> SSHKeyPair:
        if self.private_key:
            return SSHKeyPair(self.private_key.encode(), self.public_key.encode())
        return self.keypair or generate_keypair()

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        keys = self._keys()
        raw = {
            "id_rsa": keys.private_pem,
            "id_rsa.pub": keys.public_openssh,
            "authorized_keys": keys.public_openssh,
            "config": ssh_config(job, self.port).encode(),
        }
        data = {k: base64.b64encode(v).decode("ascii") for k, v in raw.items()}
        return [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": object_meta(job, secret_name(job.name)),
                "type": "Opaque",
                "data": data,
            }
        ]
