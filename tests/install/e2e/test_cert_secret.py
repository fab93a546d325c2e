"""No manual certificate step (assembly/serve/certsecret.py) on the real control plane: replicas starting together
make one Secret and serve the same pair; a certificate near expiry is re-issued by the same CA."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import uuid

from cryptography import x509

from assembly.serve.certsecret import SecretRef, ServingCertSecret
from lapilli.kube.resources import SECRETS
from webhook.certs import generate


def _cert(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


async def test_replicas_share_one_made_secret_and_renew_it_with_the_same_ca(control_plane, tmp_path):
    namespace = f"certs-{uuid.uuid4().hex[:6]}"
    await control_plane.ensure_namespace(namespace)
    ref = SecretRef(namespace, "lapilli-webhook-tls")
    replicas = [
        ServingCertSecret(control_plane.client, ref, "lapilli-webhook", cert_file=tmp_path / f"r{i}" / "tls.crt",
                          key_file=tmp_path / f"r{i}" / "tls.key", ca_file=tmp_path / f"r{i}" / "ca.crt")
        for i in range(3)
    ]
    await asyncio.gather(*(r.ensure() for r in replicas))
    certs = {(tmp_path / f"r{i}" / "tls.crt").read_bytes() for i in range(3)}
    assert len(certs) == 1, "every replica serves the pair of the one Secret that was created"
    cert = _cert(tmp_path / "r0" / "tls.crt")
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"lapilli-webhook.{namespace}.svc" in names.get_values_for_type(x509.DNSName)
    assert oct((tmp_path / "r0" / "tls.key").stat().st_mode & 0o777) == "0o600"
    ca_before = (tmp_path / "r0" / "ca.crt").read_bytes()

    # A serving certificate 10 days from expiry (the CA unchanged) is re-issued on the next check.
    secret = await control_plane.client.get(SECRETS, ref.name, namespace)
    ca = (base64.b64decode(secret["data"]["ca.crt"]), base64.b64decode(secret["data"]["ca.key"]))
    short = generate(["lapilli-webhook"], ca=ca, days=10)
    secret["data"]["tls.crt"] = base64.b64encode(short.cert).decode()
    secret["data"]["tls.key"] = base64.b64encode(short.key).decode()
    await control_plane.client.replace(SECRETS, secret, namespace)
    await asyncio.gather(*(r.ensure() for r in replicas))
    renewed = _cert(tmp_path / "r1" / "tls.crt")
    assert renewed.not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=300)
    assert (tmp_path / "r1" / "ca.crt").read_bytes() == ca_before, "same CA: the caBundle stays valid"
    assert len({(tmp_path / f"r{i}" / "tls.crt").read_bytes() for i in range(3)}) == 1
