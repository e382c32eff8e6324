"""The serving TLS context: certificate rotation in place, client-certificate auth."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import ssl
import time
from pathlib import Path
from typing import AsyncIterator

import aiohttp
import pytest
import trustme
from aiohttp import web
from cryptography import x509

from fedplace.admission.tls import ReloadingTLS, certificate_not_after
from tests.metrics import metric

RELOADS = "fedplace_admission_tls_reloads_total"


async def _serve(ctx: ssl.SSLContext) -> tuple[web.AppRunner, int]:
    app = web.Application()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hi")

    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    return runner, int(runner.addresses[0][1])


async def _peer_serial(port: int, ca: trustme.CA) -> int:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
    return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def tls_files(tmp_path: Path, ca: trustme.CA) -> AsyncIterator[tuple[Path, Path]]:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.cert_chain_pems[0].write_to_path(str(crt))
    cert.private_key_pem.write_to_path(str(key))
    yield crt, key


async def test_certificate_rotation_is_picked_up(tls_files: tuple[Path, Path], ca: trustme.CA) -> None:
    crt, key = tls_files
    tls = ReloadingTLS(str(crt), str(key), reload_interval=0.05, min_check_interval=0.05)
    runner, port = await _serve(tls.context)
    watcher = asyncio.create_task(tls.run())
    reloads = metric(RELOADS)
    try:
        first = await _peer_serial(port, ca)
        rotated = ca.issue_cert("127.0.0.1")
        # A half-written pair (new cert, old key) must not break serving.
        rotated.cert_chain_pems[0].write_to_path(str(crt))
        await asyncio.sleep(0.15)
        assert await _peer_serial(port, ca) == first
        rotated.private_key_pem.write_to_path(str(key))
        want = x509.load_pem_x509_certificate(rotated.cert_chain_pems[0].bytes()).serial_number
        deadline = time.monotonic() + 5
        while await _peer_serial(port, ca) != want:
            assert time.monotonic() < deadline, "rotated certificate was not served"
            await asyncio.sleep(0.05)
        assert metric(RELOADS) - reloads == 1, "the half-written pair was not loaded, the whole one once"
    finally:
        watcher.cancel()
        await runner.cleanup()


async def test_client_certificate_required_and_verified(tls_files: tuple[Path, Path], ca: trustme.CA,
                                                        tmp_path: Path) -> None:
    crt, key = tls_files
    client_ca = trustme.CA()
    client_ca_file = tmp_path / "client-ca.crt"
    client_ca.cert_pem.write_to_path(str(client_ca_file))
    tls = ReloadingTLS(str(crt), str(key), str(client_ca_file))
    runner, port = await _serve(tls.context)
    url = f"https://127.0.0.1:{port}/"
    try:
        trusting = ssl.create_default_context()
        ca.configure_trust(trusting)
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientError):  # no client certificate
                async with session.get(url, ssl=trusting) as resp:
                    await resp.read()

            stranger = ssl.create_default_context()
            ca.configure_trust(stranger)
            trustme.CA().issue_cert("apiserver").configure_cert(stranger)
            with pytest.raises(aiohttp.ClientError):  # signed by another CA
                async with session.get(url, ssl=stranger) as resp:
                    await resp.read()

            apiserver = ssl.create_default_context()
            ca.configure_trust(apiserver)
            client_ca.issue_cert("apiserver").configure_cert(apiserver)
            async with session.get(url, ssl=apiserver) as resp:
                assert resp.status == 200 and await resp.text() == "hi"
    finally:
        await runner.cleanup()


async def test_rotated_client_ca_replaces_the_old_one(tls_files: tuple[Path, Path], ca: trustme.CA,
                                                      tmp_path: Path) -> None:
    crt, key = tls_files
    old_ca, new_ca = trustme.CA(), trustme.CA()
    client_ca_file = tmp_path / "client-ca.crt"
    old_ca.cert_pem.write_to_path(str(client_ca_file))
    tls = ReloadingTLS(str(crt), str(key), str(client_ca_file), reload_interval=0.05, min_check_interval=0.05)
    runner, port = await _serve(tls.context)
    url = f"https://127.0.0.1:{port}/"
    reloads = metric(RELOADS)

    def client(signer: trustme.CA) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ca.configure_trust(ctx)
        signer.issue_cert("apiserver").configure_cert(ctx)
        return ctx

    async def accepted(session: aiohttp.ClientSession, signer: trustme.CA) -> bool:
        try:
            async with session.get(url, ssl=client(signer)) as resp:
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
            assert await accepted(session, old_ca) and not await accepted(session, new_ca)
            new_ca.cert_pem.write_to_path(str(client_ca_file))
            await asyncio.sleep(0.1)  # past min_check_interval: the next hello reloads
            assert await accepted(session, new_ca)
            assert not await accepted(session, old_ca), "the old CA is still trusted after rotation"
            assert metric(RELOADS) - reloads == 1
    finally:
        await runner.cleanup()


# -- the expiry of the certificate being served ----------------------------------------


def _expiry_gauge() -> float | None:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("fedplace_admission_certificate_expiry_timestamp_seconds")


@pytest.mark.parametrize("not_after", [
    dt.datetime(2031, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc),   # UTCTime (before 2050)
    dt.datetime(2061, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),   # GeneralizedTime
])
def test_certificate_not_after_reads_both_time_encodings(ca: trustme.CA, not_after: dt.datetime) -> None:
    cert = ca.issue_cert("127.0.0.1", not_after=not_after)
    chain = b"".join(blob.bytes() for blob in cert.cert_chain_pems)  # the leaf first, then the CA
    assert certificate_not_after(chain) == not_after.timestamp()
    parsed = x509.load_pem_x509_certificate(ca.cert_pem.bytes()).not_valid_after_utc.timestamp()
    assert certificate_not_after(ca.cert_pem.bytes()) == parsed


@pytest.mark.parametrize("pem", [b"", b"not a certificate",
                                 b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"])
def test_certificate_not_after_refuses_what_is_not_a_certificate(pem: bytes) -> None:
    with pytest.raises(ValueError):
        certificate_not_after(pem)


async def test_expiry_gauge_follows_the_served_certificate(tmp_path: Path, ca: trustme.CA) -> None:
    first, second = (dt.datetime(y, 1, 1, tzinfo=dt.timezone.utc) for y in (2030, 2031))
    crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert = ca.issue_cert("127.0.0.1", not_after=first)
    cert.cert_chain_pems[0].write_to_path(str(crt))
    cert.private_key_pem.write_to_path(str(key))
    tls = ReloadingTLS(str(crt), str(key), reload_interval=0.05, min_check_interval=0.05)
    assert tls.not_after == _expiry_gauge() == first.timestamp()
    rotated = ca.issue_cert("127.0.0.1", not_after=second)
    rotated.cert_chain_pems[0].write_to_path(str(crt))  # half-written: not served, so not reported
    assert not tls.maybe_reload()
    assert _expiry_gauge() == first.timestamp()
    rotated.private_key_pem.write_to_path(str(key))
    time.sleep(0.01)  # a new mtime even on coarse clocks
    os.utime(key)
    assert tls.maybe_reload()
    assert tls.not_after == _expiry_gauge() == second.timestamp()
