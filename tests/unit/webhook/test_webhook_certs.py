"""Serving certificates (`webhook.certs`) and in-place TLS reload (`webhook.tls`)."""

import ipaddress
import ssl
import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from webhook.certs import generate, read_ca, service_hosts, write_bundle
from webhook.tls import CertReloader, server_context


def handshake(server: ssl.SSLContext, ca_pem: bytes, hostname: str) -> x509.Certificate:
    """Run a TLS handshake in memory; return the certificate the server presented (client verifies it)."""
    client = ssl.create_default_context(cadata=ca_pem.decode())
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, side, out, peer_in in (("c", c, c_out, s_in), ("s", s, s_out, c_in)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            break
    der = c.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_sans_cover_the_service_names_and_loopback():
    assert service_hosts("lapilli-webhook", "lapilli-system") == [
        "lapilli-webhook",
        "lapilli-webhook.lapilli-system",
        "lapilli-webhook.lapilli-system.svc",
        "lapilli-webhook.lapilli-system.svc.cluster.local",
        "localhost",
        "127.0.0.1",
    ]
    bundle = generate(service_hosts("wh", "ns"))
    cert = x509.load_pem_x509_certificate(bundle.cert)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["wh", "wh.ns", "wh.ns.svc", "wh.ns.svc.cluster.local", "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert (constraints.ca, constraints.path_length) == (True, 0)
    cert.verify_directly_issued_by(ca)


@pytest.mark.parametrize("hostname", ["wh.ns.svc", "wh.ns.svc.cluster.local", "localhost", "127.0.0.1"])
def test_a_verifying_client_accepts_every_name(tmp_path, hostname):
    paths = write_bundle(generate(service_hosts("wh", "ns")), tmp_path)
    context = server_context(paths["tls.crt"], paths["tls.key"])
    handshake(context, paths["ca.crt"].read_bytes(), hostname)


def test_files_and_modes(tmp_path):
    paths = write_bundle(generate(["x"]), tmp_path / "out")
    assert sorted(paths) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert stat.S_IMODE(paths["tls.key"].stat().st_mode) == 0o600
    assert stat.S_IMODE(paths["ca.key"].stat().st_mode) == 0o600
    assert stat.S_IMODE(paths["tls.crt"].stat().st_mode) == 0o644
    assert not list((tmp_path / "out").glob(".*tmp"))


def test_leaf_rotation_can_keep_the_ca(tmp_path):
    first = generate(["x"])
    write_bundle(first, tmp_path)
    ca = read_ca(tmp_path)
    second = generate(["x"], ca=ca)
    assert second.ca_cert == first.ca_cert and second.cert != first.cert


def test_reloader_swaps_the_live_context(tmp_path):
    old = generate(["localhost"])
    paths = write_bundle(old, tmp_path)
    context = server_context(paths["tls.crt"], paths["tls.key"])
    results: list[str] = []
    reloader = CertReloader(context, paths["tls.crt"], paths["tls.key"], on_result=results.append)
    assert reloader.check() is False  # unchanged
    new = generate(["localhost"])  # a new CA too: a client trusting only the old one must now fail
    write_bundle(new, tmp_path)
    assert reloader.check() is True
    presented = handshake(context, new.ca_cert, "localhost")
    assert presented == x509.load_pem_x509_certificate(new.cert)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, old.ca_cert, "localhost")
    assert results == ["reloaded"]


def test_reloader_keeps_serving_when_the_pair_does_not_match(tmp_path):
    old = generate(["localhost"])
    paths = write_bundle(old, tmp_path)
    context = server_context(paths["tls.crt"], paths["tls.key"])
    reloader = CertReloader(context, paths["tls.crt"], paths["tls.key"], on_result=lambda _r: None)
    paths["tls.crt"].write_bytes(generate(["localhost"]).cert)  # half-way through a rotation: new cert, old key
    assert reloader.check() is False
    handshake(context, old.ca_cert, "localhost")  # still the old, consistent pair
    paths["tls.key"].write_bytes(b"garbage")
    assert reloader.check() is False
    paths["tls.crt"].unlink()
    assert reloader.check() is False
