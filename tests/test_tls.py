"""The throwaway TLS material: a valid loopback certificate that clients accept, and two bad
ones that clients reject for exactly the named reason. Checked with real TLS handshakes over
127.0.0.1 (Python's ssl module on both ends). And TLS from the command line: one flag for a
launched broker, mqtts:// for one given by URL."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from cli_runs import ROOT, SMALL, invoke, said, summary_of  # tests/ is on sys.path (no package)
from mqttlab.tls import TlsMaterial, make_tls_material, write_pkcs12


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _handshake(cert_file: Path, key_file: Path, ca_file: Path, server_hostname: str) -> None:
    """Serves one TLS handshake on 127.0.0.1 with the given certificate and connects to it as a
    client that trusts `ca_file`; raises what the client's handshake raises."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_file, key_file)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        listener.settimeout(5)
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            try:
                with server_context.wrap_socket(conn, server_side=True) as tls_conn:
                    tls_conn.recv(1)
            except (ssl.SSLError, OSError):
                pass  # the client refused us: that is the case under test

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        client_context = ssl.create_default_context(cafile=str(ca_file))
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with client_context.wrap_socket(raw, server_hostname=server_hostname):
                pass
    finally:
        server.join(timeout=5)
        listener.close()


def test_all_files_are_written_as_pem(material: TlsMaterial) -> None:
    for path in (material.ca_file, material.cert_file, material.expired_cert_file, material.wrong_name_cert_file):
        assert path.read_text().startswith("-----BEGIN CERTIFICATE-----")
    for path in (material.key_file, material.expired_key_file, material.wrong_name_key_file):
        assert path.read_text().startswith("-----BEGIN PRIVATE KEY-----")
        assert path.stat().st_mode & 0o077 == 0, "private keys must not be readable by others"


def test_server_certificate_names_loopback_and_is_signed_by_the_ca(material: TlsMaterial) -> None:
    ca, server = _load(material.ca_file), _load(material.cert_file)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert server.issuer == ca.subject
    server.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    now = dt.datetime.now(dt.timezone.utc)
    assert server.not_valid_before_utc < now < server.not_valid_after_utc


def test_valid_certificate_passes_a_verifying_handshake_by_ip_and_by_name(material: TlsMaterial) -> None:
    _handshake(material.cert_file, material.key_file, material.ca_file, "127.0.0.1")
    _handshake(material.cert_file, material.key_file, material.ca_file, "localhost")


def test_expired_certificate_is_rejected_as_expired(material: TlsMaterial) -> None:
    assert _load(material.expired_cert_file).not_valid_after_utc < dt.datetime.now(dt.timezone.utc)
    with pytest.raises(ssl.SSLCertVerificationError, match="expired"):
        _handshake(material.expired_cert_file, material.expired_key_file, material.ca_file, "127.0.0.1")


def test_wrong_name_certificate_is_rejected_for_its_name(material: TlsMaterial) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|match"):
        _handshake(material.wrong_name_cert_file, material.wrong_name_key_file, material.ca_file, "127.0.0.1")


def test_certificate_from_another_ca_is_rejected(material: TlsMaterial, tmp_path: Path) -> None:
    other = make_tls_material(tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer|self.signed|verify failed"):
        _handshake(other.cert_file, other.key_file, material.ca_file, "127.0.0.1")


def test_pkcs12_keystore_holds_the_server_identity(material: TlsMaterial, tmp_path: Path) -> None:
    path = write_pkcs12(material.cert_file, material.key_file, material.ca_file, tmp_path / "s.p12", "secret")
    key, cert, extra = pkcs12.load_key_and_certificates(path.read_bytes(), b"secret")
    assert key is not None
    assert cert == _load(material.cert_file)
    assert extra == [_load(material.ca_file)]
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(path.read_bytes(), b"wrong password")


# --- TLS from the command line ---------------------------------------------------------------


@pytest.mark.parametrize("args", [["--tls"], ["--insecure"], [str(ROOT / "scenarios" / "tls.yaml")]])
def test_tls_with_a_launched_broker_is_one_flag(tmp_path: Path, args: list[str]):
    from mqttlab.brokers import get_launcher

    if not get_launcher("mosquitto").find():
        pytest.skip("mosquitto is not installed (scripts/install-brokers.sh)")
    out = tmp_path / "run"
    # The file's own warm-up (2s) is the user's: a shorter run says so (--warmup).
    result = invoke("run", *args, "--broker", "mosquitto", "--duration", "1s", "--warmup", "200ms", *SMALL, "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    assert "at mqtts://127.0.0.1:" in said(result)
    assert summary_of(out)["latency"]["tls"]["count"] == 2


def test_tls_with_a_broker_url_points_to_mqtts():
    result = invoke("run", "--broker", "mqtt://127.0.0.1:1883", "--tls")
    assert result.exit_code == 2 and "for a broker given by URL, write mqtts://HOST:PORT (with --ca FILE, or --insecure)" in said(result)


def test_a_ca_file_with_a_launched_broker_points_to_tls(tmp_path: Path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not read: refused before")
    result = invoke("run", "--broker", "mosquitto", "--ca", str(ca), "--out", str(tmp_path / "run"))
    assert result.exit_code == 2 and "use --tls (launch.tls: true)" in said(result)
    assert not (tmp_path / "run").exists()
