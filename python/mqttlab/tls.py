"""Throwaway TLS material for brokers on loopback: a private CA, a server certificate for
127.0.0.1/localhost signed by it, and two deliberately bad certificates (expired, wrong name)
so that TLS failure paths can be tested against real brokers.

Everything is written as PEM files into one directory; keys are unencrypted because they
live only as long as a run's working directory."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

# cryptography takes a tenth of a second to import: only runs that make certificates pay for it.
if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

LOOPBACK_NAMES = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class TlsMaterial:
    """Paths of the PEM files that `make_tls_material` wrote."""

    directory: Path
    ca_file: Path
    cert_file: Path
    key_file: Path
    expired_cert_file: Path
    expired_key_file: Path
    wrong_name_cert_file: Path
    wrong_name_key_file: Path


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _new_key() -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    # P-256 keys are quick to generate and every broker's TLS stack (OpenSSL, rustls, Node, JDK) takes them.
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mqttlab"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _make_ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = _new_key()
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("mqttlab throwaway CA"))
        .issuer_name(_name("mqttlab throwaway CA"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue_server_cert(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    dns_names: tuple[str, ...],
    ip_addresses: tuple[str, ...],
    not_before: dt.datetime,
    not_after: dt.datetime,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = _new_key()
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    common_name = dns_names[0] if dns_names else ip_addresses[0]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    from cryptography.hazmat.primitives import serialization

    # PKCS#8 is the one key format that all the brokers' TLS stacks read.
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def make_tls_material(directory: Path, extra_ips: tuple[str, ...] = ()) -> TlsMaterial:
    """Writes a fresh CA, a valid server certificate for loopback (and `extra_ips`, the address a
    broker in a network namespace is reached at), an expired one and one for the wrong host name
    (both signed by the same CA, so only the named defect fails)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _make_ca()
    now = _now()

    good, good_key = _issue_server_cert(
        ca_cert, ca_key, dns_names=LOOPBACK_NAMES,
        ip_addresses=tuple(dict.fromkeys((*LOOPBACK_IPS, *extra_ips))),
        not_before=now - dt.timedelta(minutes=5), not_after=now + dt.timedelta(days=30),
    )
    expired, expired_key = _issue_server_cert(
        ca_cert, ca_key, dns_names=LOOPBACK_NAMES, ip_addresses=LOOPBACK_IPS,
        not_before=now - dt.timedelta(days=30), not_after=now - dt.timedelta(days=1),
    )
    wrong_name, wrong_name_key = _issue_server_cert(
        ca_cert, ca_key, dns_names=("wrong-name.invalid",), ip_addresses=("192.0.2.1",),
        not_before=now - dt.timedelta(minutes=5), not_after=now + dt.timedelta(days=30),
    )

    material = TlsMaterial(
        directory=directory,
        ca_file=directory / "ca.pem",
        cert_file=directory / "server.pem",
        key_file=directory / "server.key",
        expired_cert_file=directory / "expired.pem",
        expired_key_file=directory / "expired.key",
        wrong_name_cert_file=directory / "wrong-name.pem",
        wrong_name_key_file=directory / "wrong-name.key",
    )
    _write_cert(material.ca_file, ca_cert)
    _write_cert(material.cert_file, good)
    _write_key(material.key_file, good_key)
    _write_cert(material.expired_cert_file, expired)
    _write_key(material.expired_key_file, expired_key)
    _write_cert(material.wrong_name_cert_file, wrong_name)
    _write_key(material.wrong_name_key_file, wrong_name_key)
    return material


def write_pkcs12(cert_file: Path, key_file: Path, ca_file: Path, path: Path, password: str) -> Path:
    """Bundles a PEM certificate and key (with its CA) into a PKCS#12 keystore, the form JVM
    brokers load their server identity from."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
    blob = pkcs12.serialize_key_and_certificates(
        name=b"mqttlab",
        key=key,  # type: ignore[arg-type]
        cert=cert,
        cas=[ca],
        encryption_algorithm=serialization.BestAvailableEncryption(password.encode()),
    )
    path.write_bytes(blob)
    path.chmod(0o600)
    return path
