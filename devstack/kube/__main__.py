"""``python -m devstack.kube`` / ``fedplace-kube``: run the devstack Kubernetes API server.

Flags: --listen HOST:PORT (127.0.0.1:8080), --token-file PATH (bearer token, content
stripped; never logged), --tls-cert-file PATH and --tls-private-key-file PATH (serve
HTTPS with that PEM certificate chain and key; plain HTTP without them), --tls-ca-file
PATH (the CA that signed the certificate: the written kubeconfig's
certificate-authority-data), --history N (retained watch events, 10000),
--write-kubeconfig PATH, --service-address HOST:PORT | svc.ns=HOST:PORT
(repeatable; where webhook clientConfig.service calls go), --bookmark-interval S,
--log-level LEVEL. JSON logs on stderr. SIGTERM/SIGINT shut down gracefully
(open watch streams are ended first).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import ssl
import sys
from pathlib import Path

from aiohttp import web

from fedplace.common.shutdown import stop_on_signals

from .kubeconfig import write_kubeconfig
from .server import Server, ServerConfig
from .webhooks import ServiceResolver

_STD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in record.__dict__.items():
            if k not in _STD and not k.startswith("_"):
                doc[k] = v
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="fedplace-kube", description=__doc__.splitlines()[0])
    p.add_argument("--listen", default="127.0.0.1:8080", help="HOST:PORT to listen on")
    p.add_argument("--token-file", help="file holding the bearer token clients must send")
    p.add_argument("--tls-cert-file", metavar="PATH", help="serve HTTPS with this PEM certificate (chain)")
    p.add_argument("--tls-private-key-file", metavar="PATH", help="the PEM key of --tls-cert-file")
    p.add_argument("--tls-ca-file", metavar="PATH",
                   help="the CA of --tls-cert-file, written into --write-kubeconfig as certificate-authority-data")
    p.add_argument("--history", type=int, default=10000, help="watch events retained (older RVs get 410)")
    p.add_argument("--write-kubeconfig", metavar="PATH", help="write a kubeconfig for this server")
    p.add_argument("--service-address", action="append", default=[],
                   help="HOST:PORT or svc.ns=HOST:PORT for webhook clientConfig.service (repeatable)")
    p.add_argument("--bookmark-interval", type=float, default=5.0, help="seconds between watch BOOKMARKs")
    p.add_argument("--log-level", default="info")
    args = p.parse_args(argv)
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        p.error("--tls-cert-file and --tls-private-key-file go together")
    if args.tls_ca_file and not args.tls_cert_file:
        p.error("--tls-ca-file needs --tls-cert-file and --tls-private-key-file (it is the CA of that certificate)")
    return args


def tls_context(cert_file: str | None, key_file: str | None) -> ssl.SSLContext | None:
    """The serving context for the certificate and key, None for plain HTTP (raises OSError or
    ssl.SSLError when they cannot be loaded)."""
    if not cert_file or not key_file:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


async def serve(args: argparse.Namespace) -> None:
    log = logging.getLogger("devstack.kube")
    host, _, port = args.listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    token = Path(args.token_file).read_text().strip() if args.token_file else None
    resolver = ServiceResolver.parse(args.service_address)
    config = ServerConfig(token=token or None, history=args.history, bookmark_interval=args.bookmark_interval,
                          service_resolver=resolver, address=args.listen)
    tls = tls_context(args.tls_cert_file, args.tls_private_key_file)
    ca_pem = Path(args.tls_ca_file).read_bytes() if args.tls_ca_file else None
    server = Server(config)
    runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    site = web.TCPSite(runner, host, int(port), ssl_context=tls)
    await site.start()
    sockets = runner.addresses
    actual_port = sockets[0][1] if sockets else int(port)
    scheme = "https" if tls is not None else "http"
    url = f"{scheme}://{host if ':' not in host else '[' + host + ']'}:{actual_port}"
    if args.write_kubeconfig:
        write_kubeconfig(args.write_kubeconfig, url, token, ca_pem)
    log.info("listening", extra={"url": url, "auth": bool(token), "history": args.history,
                                 "kubeconfig": args.write_kubeconfig})
    stop = stop_on_signals()
    await stop.wait()
    log.info("shutting down")
    server.api.store.close_watches()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    setup_logging(args.log_level)
    try:
        asyncio.run(serve(args))
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        logging.getLogger("devstack.kube").error("cannot start", extra={"error": str(exc)})
        sys.exit(1)


if __name__ == "__main__":
    main()
