"""Credentials of a dev cluster: the service-account signing key pair and static bearer tokens.

The API server makes its own self-signed serving certificate (`--cert-dir`); clients trust the CA it
writes next to it. Users authenticate with tokens from `--token-auth-file`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


@dataclass(frozen=True, slots=True)
class StaticUser:
    """One line of the token file: token,user,uid,"group1,group2"."""

    name: str
    groups: tuple[str, ...] = ()
    token: str = ""

    def line(self) -> str:
        groups = ",".join(self.groups)
        return f'{self.token},{self.name},{self.name},"{groups}"'


def new_token() -> str:
    return secrets.token_hex(24)


def write_token_file(path: Path, users: list[StaticUser]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text("".join(u.line() + "\n" for u in users))
    return path


def write_service_account_keys(directory: Path) -> tuple[Path, Path]:
    """An RSA key pair for signing and verifying service-account tokens: (private key, public key)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = directory / "sa.key", directory / "sa.pub"
    private.touch(mode=0o600)
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public
