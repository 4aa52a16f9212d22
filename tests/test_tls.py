"""TLS with client certificates (issue 15 item 5): a CA made here with openssl, a server that
requires client certificates, and every way a handshake should be refused: a rogue CA, a wrong
host name, no client certificate, a client certificate from another CA. Each is a TLSError (a
BackendError) that says nothing ran and what to check, never OutcomeUnknown, and nothing reaches
the queue."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import pressure
from pressure.testing import RedisServer, ServerUnavailable
from pressure.testing._server import _free_port

from .test_refusals import _refused

FAST = "socket_timeout=2&socket_connect_timeout=2"


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _ca(d: Path, name: str) -> tuple[Path, Path]:
    key, cert = d / f"{name}.key", d / f"{name}.pem"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
             "-subj", f"/CN={name}")
    return key, cert


def _signed(d: Path, ca: tuple[Path, Path], name: str, san: str) -> tuple[Path, Path]:
    key, csr, cert, ext = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.pem", d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    _openssl("x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial", "-out", cert,
             "-days", "2", "-extfile", ext)
    return key, cert


@dataclass
class Pki:
    server: RedisServer
    port: int
    ca: Path
    client: tuple[Path, Path]
    rogue_ca: Path
    rogue_client: tuple[Path, Path]

    def url(self, host: str = "127.0.0.1", ca: Path | None = None,
            client: tuple[Path, Path] | None = None) -> str:
        url = f"rediss://{host}:{self.port}/0?ssl_ca_certs={ca or self.ca}&{FAST}"
        if client:
            url += f"&ssl_keyfile={client[0]}&ssl_certfile={client[1]}"
        return url


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pki]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the certificates")
    d = tmp_path_factory.mktemp("pki")
    ca = _ca(d, "ca")
    rogue = _ca(d, "rogue-ca")
    server_key, server_cert = _signed(d, ca, "server", "IP:127.0.0.1")  # not 'localhost'
    client = _signed(d, ca, "client", "DNS:client")
    rogue_client = _signed(d, rogue, "rogue-client", "DNS:client")
    port = _free_port()
    srv = RedisServer(extra_args=("--tls-port", str(port), "--tls-cert-file", str(server_cert),
                                  "--tls-key-file", str(server_key), "--tls-ca-cert-file", str(ca[1]),
                                  "--tls-auth-clients", "yes"))
    try:
        srv.start()
    except ServerUnavailable as exc:
        pytest.skip(f"this redis-server cannot serve TLS here: {exc}")
    yield Pki(srv, port, ca[1], client, rogue[1], rogue_client)
    srv.cleanup()


def test_a_client_certificate_signed_by_the_ca_works(pki: Pki, prefix: str) -> None:
    q: pressure.Queue[str] = pressure.Queue("tls", url=pki.url(client=pki.client), prefix=prefix)
    q.put("over mutual TLS")
    assert q.get_nowait() == "over mutual TLS"
    q.delete()


@pytest.mark.parametrize("case", ["rogue CA", "wrong host name", "no client certificate",
                                  "client certificate from another CA"])
def test_a_handshake_that_must_fail_is_refused_and_says_so(pki: Pki, prefix: str, case: str) -> None:
    distrust = "does not trust the server's certificate"
    refused = "requires a client certificate signed by a CA it trusts"
    url, says = {
        "rogue CA": (pki.url(ca=pki.rogue_ca, client=pki.client), distrust),
        "wrong host name": (pki.url(host="localhost", client=pki.client), distrust),
        "no client certificate": (pki.url(), refused),
        "client certificate from another CA": (pki.url(client=pki.rogue_client), refused),
    }[case]
    with pytest.raises(pressure.TLSError) as info:
        pressure.Queue("tls", url=url, prefix=prefix)
    _refused(info.value)
    assert says in str(info.value), str(info.value)
    print(f"{case}: {info.value}")
    ok: pressure.Queue[str] = pressure.Queue("tls", url=pki.url(client=pki.client), prefix=prefix)
    assert ok.qsize() == 0
    ok.delete()
