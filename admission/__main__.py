"""``fedplace-admission``: run the mutating admission webhook until SIGTERM/SIGINT.

Exit codes: 0 after a graceful shutdown, 2 for invalid configuration (the
message names the field), 1 when the server cannot start. With ``--workers N``
(N > 1) this process supervises N serving processes (:mod:`fedplace.admission.workers`).
"""

from __future__ import annotations

import logging
import sys
from typing import Sequence

from fedplace.admission.config import ConfigError, load_config
from fedplace.admission.lifecycle import COMPONENT, serve
from fedplace.admission.workers import supervise
from fedplace.common.eventloop import run
from fedplace.common.logs import configure_logging

log = logging.getLogger("fedplace.admission")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = load_config(argv)
    except ConfigError as exc:
        print(f"fedplace-admission: invalid configuration: {exc}", file=sys.stderr)
        return 2
    configure_logging(COMPONENT, config.log_level)
    if config.workers > 1:
        return supervise(config)  # --workers: this process supervises, the workers serve
    try:
        run(serve(config), config.event_loop)
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # noqa: BLE001 - report startup failures in one line
        log.error("admission webhook failed", extra={"error": f"{exc.__class__.__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
