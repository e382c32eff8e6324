"""The webhook's serving TLS context, following its files as they are rotated.

Certificates are rotated by rewriting the mounted files (cert-manager, a
Secret volume). :class:`ReloadingTLS` listens with one :class:`ssl.SSLContext`
(``context``) whose SNI callback — called for every ClientHello, with or
without SNI — hands each new connection the newest context (``current``). When
the certificate's, key's or client CA's mtime/size changed, a fresh context is
built from a snapshot of the files; only if it builds (a certificate whose key
does not match, a half-written pair during rotation, raises) does it become
``current``, otherwise the old one keeps serving and the files are tried again
at the next check. Checks run on new connections (throttled to one ``stat``
per ``min_check_interval``) and periodically (:meth:`run`).

With ``client_ca_file`` the server requires a client certificate signed by
that CA (the API server's), and verifies it. A rotated CA replaces the old
one: certificates signed only by the old CA are refused from then on.
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
    """A server-side SSLContext whose certificate chain and client CA follow their files."""

    def __init__(self, cert_file: str, key_file: str, client_ca_file: str | None = None,
                 reload_interval: float = 10.0, min_check_interval: float = 1.0) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca_file = client_ca_file
        self.reload_interval = reload_interval
        self.min_check_interval = min(min_check_interval, reload_interval)
        self.reloads = 0
        self._stamp = _stamp(cert_file, key_file, client_ca_file)
        self.context = self._build()  # errors here are fatal at startup
        self.current = self.context
        self._failed_stamp: tuple[tuple[float, int], ...] | None = None
        self._last_check = time.monotonic()
        self.context.sni_callback = self._on_hello

    def _on_hello(self, sslobj: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        if time.monotonic() - self._last_check >= self.min_check_interval:
            self.maybe_reload()
        if self.current is not self.context:
            sslobj.context = self.current
        return None

    def maybe_reload(self) -> bool:
        """Build a new context if the files changed; True if it replaced the current one."""
        self._last_check = time.monotonic()
        stamp = _stamp(self.cert_file, self.key_file, self.client_ca_file)
        if stamp == self._stamp:
            return False
        try:
            fresh = self._build()
        except (OSError, ssl.SSLError) as exc:
            if stamp != self._failed_stamp:  # once per version of the files
                log.warning("TLS files changed but could not be loaded; keeping the old ones",
                            extra={"cert_file": self.cert_file, "client_ca_file": self.client_ca_file,
                                   "error": str(exc)})
            self._failed_stamp = stamp
            return False
        self.current = fresh
        self._stamp = stamp
        self.reloads += 1
        log.info("TLS files reloaded", extra={"cert_file": self.cert_file, "client_ca_file": self.client_ca_file})
        return True

    def _build(self) -> ssl.SSLContext:
        """A context from one snapshot of the files; raises if the key does not match."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
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
            ctx.load_cert_chain(cert_path, key_path)
        if self.client_ca_file:
            with open(self.client_ca_file, encoding="ascii", errors="replace") as fh:
                ctx.load_verify_locations(cadata=fh.read())
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    async def run(self) -> None:
        """Check the files every ``reload_interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.reload_interval)
            self.maybe_reload()
