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

The expiry (``notAfter``) of the certificate being served is the gauge
``fedplace_admission_certificate_expiry_timestamp_seconds``, set whenever a
context is built (:func:`certificate_not_after` reads it from the PEM file).
"""

from __future__ import annotations

import asyncio
import calendar
import logging
import os
import re
import ssl
import tempfile
import time

from fedplace.admission import metrics

__all__ = ["ReloadingTLS", "certificate_not_after"]

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


_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def _der_item(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER item at ``pos``."""
    tag = der[pos]
    length = der[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(der[pos:pos + count], "big")
        pos += count
    if pos + length > len(der):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _der_children(der: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out = []
    while start < end:
        item = _der_item(der, start)
        out.append(item)
        start = item[2]
    return out


def _asn1_time(tag: int, text: str) -> float:
    """UTCTime (tag 0x17, YYMMDDHHMMSSZ) or GeneralizedTime (0x18, YYYYMMDDHHMMSSZ) as Unix seconds."""
    if tag == 0x17:
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"  # RFC 5280, 4.1.2.5.1
    elif tag != 0x18:
        raise ValueError(f"not an ASN.1 time (tag {tag:#x})")
    return float(calendar.timegm(time.strptime(text.rstrip("Z")[:14], "%Y%m%d%H%M%S")))


def certificate_not_after(pem: bytes) -> float:
    """The ``notAfter`` (Unix seconds) of the first certificate of a PEM chain (the one a server
    presents). Raises ValueError when there is none or it cannot be read."""
    match = _PEM_CERT.search(pem)
    if match is None:
        raise ValueError("no PEM certificate")
    der = ssl.PEM_cert_to_DER_cert(match.group(0).decode("ascii"))
    try:
        _, start, end = _der_item(der, 0)  # Certificate
        _, start, end = _der_children(der, start, end)[0]  # tbsCertificate
        fields = _der_children(der, start, end)
        if fields[0][0] == 0xA0:  # [0] version
            fields = fields[1:]
        _, start, end = fields[3]  # serialNumber, signature, issuer, validity
        tag, t_start, t_end = _der_children(der, start, end)[1]  # notBefore, notAfter
        return _asn1_time(tag, der[t_start:t_end].decode("ascii"))
    except (IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"unreadable certificate: {exc}") from exc


class ReloadingTLS:
    """A server-side SSLContext whose certificate chain and client CA follow their files."""

    def __init__(self, cert_file: str, key_file: str, client_ca_file: str | None = None,
                 reload_interval: float = 10.0, min_check_interval: float = 1.0) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca_file = client_ca_file
        self.reload_interval = reload_interval
        self.min_check_interval = min(min_check_interval, reload_interval)
        self.not_after: float | None = None  # the served certificate's expiry (Unix seconds)
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
        metrics.TLS_RELOADS.inc()
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
        try:
            not_after: float | None = certificate_not_after(cert)
        except ValueError as exc:
            not_after = None  # load_cert_chain below says what is wrong with the file
            log.warning("cannot read the certificate's expiry", extra={"cert_file": self.cert_file,
                                                                        "error": str(exc)})
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
        if not_after is not None:  # only once the whole context built: this is what is served now
            self.not_after = not_after
            metrics.CERT_EXPIRY.set(not_after)
        return ctx

    async def run(self) -> None:
        """Check the files every ``reload_interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.reload_interval)
            self.maybe_reload()
