"""The webhook's serving TLS context, reloaded in place when the files change.

Certificates are rotated by rewriting the mounted files (cert-manager, a
Secret volume). :class:`ReloadingTLS` keeps one :class:`ssl.SSLContext` —
the one the server listens with — and calls ``load_cert_chain`` on it again
when the certificate's or key's mtime/size changed. It checks on every new
connection (through the SNI callback, throttled to one ``stat`` per
``min_check_interval``; the new chain is served from the next connection on)
and periodically (:meth:`run`).

Loading into a live context is not atomic in OpenSSL: a certificate whose key
does not match (a half-written pair during rotation) would leave the context
with the new certificate and the old key, and every handshake would fail. So
the files are read once into a private snapshot, proven to load in a scratch
context, and only then loaded into the live one; a bad pair keeps the old
chain and is retried at the next check.

With ``client_ca_file`` the server requires a client certificate signed by
that CA (the API server's), and verifies it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
import time

__all__ = ["ReloadingTLS"]

log = logging.getLogger(__name__)


def _stamp(*paths: str | None) -> tuple[tuple[float, int], ...]:
    out = []
    for path in paths:
        if not path:
            continue
        try:
            st = os.stat(path)
            out.append((st.st_mtime, st.st_size))
        except OSError:
            out.append((0.0, -1))
    return tuple(out)


class ReloadingTLS:
    """A server-side SSLContext whose certificate chain follows its files."""

    def __init__(self, cert_file: str, key_file: str, client_ca_file: str | None = None,
                 reload_interval: float = 10.0, min_check_interval: float = 1.0) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca_file = client_ca_file
        self.reload_interval = reload_interval
        self.min_check_interval = min(min_check_interval, reload_interval)
        self.reloads = 0
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.load_cert_chain(cert_file, key_file)  # errors here are fatal at startup
        self._stamp = _stamp(cert_file, key_file)
        self._ca_stamp = _stamp(client_ca_file)
        self._failed_stamp: tuple[tuple[float, int], ...] | None = None
        if client_ca_file:
            self.context.load_verify_locations(cafile=client_ca_file)
            self.context.verify_mode = ssl.CERT_REQUIRED
        self._last_check = time.monotonic()
        self.context.sni_callback = self._on_hello

    def _on_hello(self, sslobj: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        now = time.monotonic()
        if now - self._last_check >= self.min_check_interval:
            self.maybe_reload()
        return None

    def maybe_reload(self) -> bool:
        """Reload the chain (and client CA) if their files changed; True if reloaded."""
        self._last_check = time.monotonic()
        reloaded = False
        stamp = _stamp(self.cert_file, self.key_file)
        if stamp != self._stamp:
            try:
                self._load_verified_chain()
            except (OSError, ssl.SSLError) as exc:
                if stamp != self._failed_stamp:  # once per version of the files
                    log.warning("serving certificate changed but could not be loaded; keeping the old one",
                                extra={"cert_file": self.cert_file, "error": str(exc)})
                self._failed_stamp = stamp
            else:
                self._stamp = stamp
                self.reloads += 1
                reloaded = True
                log.info("serving certificate reloaded", extra={"cert_file": self.cert_file})
        if self.client_ca_file:
            ca_stamp = _stamp(self.client_ca_file)
            if ca_stamp != self._ca_stamp:
                try:
                    self.context.load_verify_locations(cafile=self.client_ca_file)
                except (OSError, ssl.SSLError) as exc:
                    log.warning("client CA changed but could not be loaded",
                                extra={"client_ca_file": self.client_ca_file, "error": str(exc)})
                else:
                    self._ca_stamp = ca_stamp
                    log.info("client CA reloaded (added to the trusted set)",
                             extra={"client_ca_file": self.client_ca_file})
        return reloaded

    def _load_verified_chain(self) -> None:
        """Snapshot cert and key, check them in a scratch context, then load them live."""
        with open(self.cert_file, "rb") as fh:
            cert = fh.read()
        with open(self.key_file, "rb") as fh:
            key = fh.read()
        with tempfile.TemporaryDirectory(prefix="fedplace-tls-") as tmp:
            cert_path, key_path = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(key)
            with open(cert_path, "wb") as fh:
                fh.write(cert)
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_path, key_path)  # raises if mismatched
            self.context.load_cert_chain(cert_path, key_path)

    async def run(self) -> None:
        """Check the files every ``reload_interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.reload_interval)
            self.maybe_reload()
