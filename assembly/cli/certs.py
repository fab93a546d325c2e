"""`lapilli certs`: make the CA and serving certificate the webhook needs."""

from __future__ import annotations

from pathlib import Path

import click

from webhook.certs import generate as make_bundle
from webhook.certs import read_ca, service_hosts, write_bundle


@click.group("certs")
def certs() -> None:
    """Certificates for serving the admission webhook over TLS (see certs/README.md)."""


@certs.command("generate")
@click.option("--service", default="lapilli-webhook", show_default=True, help="Service name the apiserver dials.")
@click.option("--namespace", default="lapilli-system", show_default=True, help="Namespace of that Service.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("certs/out"),
    show_default=True,
    help="Directory for ca.crt, ca.key, tls.crt, tls.key.",
)
@click.option("--host", "extra_hosts", multiple=True, help="Extra DNS name or IP for the certificate (repeatable).")
@click.option("--days", default=365, show_default=True, help="Validity of the serving certificate.")
@click.option(
    "--reuse-ca",
    is_flag=True,
    help="Sign with the CA already in --out (rotate the serving certificate; caBundle stays valid).",
)
def generate(
    service: str, namespace: str, out_dir: Path, extra_hosts: tuple[str, ...], days: int, reuse_ca: bool
) -> None:
    """Write a CA and a serving certificate whose SANs cover SERVICE, SERVICE.NAMESPACE, SERVICE.NAMESPACE.svc,
    SERVICE.NAMESPACE.svc.cluster.local, localhost and 127.0.0.1 (plus any --host)."""
    ca = read_ca(out_dir) if reuse_ca else None
    if reuse_ca and ca is None:
        raise click.UsageError(f"--reuse-ca: no ca.crt and ca.key in {out_dir}")
    hosts = service_hosts(service, namespace, extra_hosts)
    paths = write_bundle(make_bundle(hosts, ca=ca, days=days), out_dir)
    for name, path in paths.items():
        click.echo(f"{name}\t{path}")
    click.echo(f"SANs: {', '.join(hosts)}")
