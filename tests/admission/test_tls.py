"""The serving TLS context: certificate rotation in place, client-certificate auth."""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path
from typing import AsyncIterator

import aiohttp
import pytest
import trustme
from aiohttp import web
from cryptography import x509

from fedplace.admission.tls import ReloadingTLS


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
        assert tls.reloads >= 1
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
            assert tls.reloads == 1
    finally:
        await runner.cleanup()
