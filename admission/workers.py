"""``--workers N``: N processes serve the one port, for pods with more than one core.

One webhook process uses one core (Python runs one thread at a time). With
``--workers N`` the command's own process becomes a supervisor that starts N
worker processes, each a complete webhook (its own policy informer, OPA
connections and Event recorder), all listening on the same address with
``SO_REUSEPORT``: the kernel spreads the API servers' connections over them.

* The supervisor binds the address first (with ``SO_REUSEPORT``, without
  listening: it receives no connection), which resolves port ``0`` and
  reserves the port, and fails at once (exit 1) when it is taken.
* Metrics: the workers share a Prometheus multiprocess directory (a temporary
  directory the supervisor creates and removes), so ``/metrics`` on any worker
  shows the sums over all of them.
* Logs: every line carries ``"worker": i``.
* SIGTERM or SIGINT to the supervisor is passed to every worker, which stops
  gracefully (in-flight requests finish, up to ``shutdown_timeout``); the
  supervisor exits 0 when every worker did. A worker that exits on its own
  (it could not start, or crashed) makes the supervisor stop the others and
  exit 1, so that Kubernetes restarts the container and counts the restart.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from multiprocessing.connection import wait
from typing import Any

from fedplace.admission.config import AdmissionConfig
from fedplace.admission.lifecycle import COMPONENT, serve
from fedplace.common.eventloop import run
from fedplace.common.logs import configure_logging

__all__ = ["supervise"]

log = logging.getLogger("fedplace.admission.workers")

METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"


def _reserve(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` in the SO_REUSEPORT group the workers join; not listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _worker(config: AdmissionConfig, index: int) -> None:
    """A worker process: the whole webhook, until SIGTERM/SIGINT."""
    # Stopped before serving (the webhook installs its own handlers when it starts): exit quietly.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))

    configure_logging(COMPONENT, config.log_level, fields={"worker": index})
    try:
        run(serve(config), config.event_loop)
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # noqa: BLE001 - one line, as the single-process command
        logging.getLogger("fedplace.admission").error("admission webhook failed",
                                             extra={"error": f"{exc.__class__.__name__}: {exc}"})
        sys.exit(1)


def supervise(config: AdmissionConfig) -> int:
    """Run ``config.workers`` worker processes until a termination signal; the exit code."""
    try:
        reserved = _reserve(config.listen_host, config.listen_port)
    except OSError as exc:
        log.error("admission webhook failed", extra={"error": f"cannot bind {config.listen}: {exc}"})
        return 1
    port = int(reserved.getsockname()[1])
    metrics_dir = tempfile.mkdtemp(prefix="fedplace-admission-metrics-")
    os.environ[METRICS_ENV] = metrics_dir
    worker_config = dataclasses.replace(config, listen_port=port, reuse_port=True, workers=1)
    stop_requested = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop_requested
        stop_requested = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(worker_config, i), name=f"fedplace-admission-worker-{i}")
             for i in range(config.workers)]
    code = 0
    try:
        for proc in procs:
            proc.start()
        log.info("admission workers started", extra={"workers": len(procs), "pids": [p.pid for p in procs],
                                                     "listen": f"{config.listen_host}:{port}"})
        while not stop_requested:
            if wait([p.sentinel for p in procs], timeout=0.2):
                gone = [(p.name, p.exitcode) for p in procs if p.exitcode is not None]
                log.error("an admission worker exited; stopping the others", extra={"exited": gone})
                code = 1
                break
        if stop_requested:
            log.info("termination signal received; stopping the workers gracefully")
        code = max(code, _stop(procs, config.shutdown_timeout + 10))
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        reserved.close()
        os.environ.pop(METRICS_ENV, None)
        shutil.rmtree(metrics_dir, ignore_errors=True)
    log.info("admission workers stopped", extra={"exit_codes": [p.exitcode for p in procs]})
    return code


def _stop(procs: list[multiprocessing.process.BaseProcess], grace: float) -> int:
    """SIGTERM every live worker, wait up to ``grace`` seconds, kill what is left; 0 if all exited 0."""
    for proc in procs:
        if proc.is_alive() and proc.pid is not None:
            os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            log.error("admission worker did not stop in time; killed", extra={"worker": proc.name})
            proc.kill()
            proc.join(5)
    # -SIGTERM: a worker stopped by our signal before it could install its handlers (still starting).
    return 0 if all(p.exitcode in (0, -signal.SIGTERM) for p in procs) else 1
