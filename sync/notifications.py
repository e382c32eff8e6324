"""``POST /v1/notifications``: remediation notifications over opa-kube-sync's HTTP port.

Each item names an object and the annotations it should carry (the
remediation library's notification shape, :func:`fedplace.remediator.plan.parse_notifications`);
the remediator applies them at once (:meth:`fedplace.remediator.remediator.Remediator.apply_notifications`).
The route exists only with a token file (``--notifications-token-file``);
answers:

* 401 without ``Authorization: Bearer <the file's token>`` (compared in
  constant time; the file is re-read when it changes);
* 503 before the sync is ready, or on a replica that is not the leader;
* 400 for a body that is not a list of notifications, or names a resource
  the remediator does not remediate;
* 200 with the counts: ``patched``, ``in_sync``, ``missing``, ``failed``, ``dry_run``.
"""

from __future__ import annotations

import hmac
import json
from typing import Callable

from aiohttp import web

from fedplace.common.opa_client import TokenSource
from fedplace.remediator.plan import parse_notifications
from fedplace.remediator.remediator import Remediator

__all__ = ["add_notifications_route"]

PATH = "/v1/notifications"


def add_notifications_route(app: web.Application, remediator: Remediator, token_file: str | None,
                            ready: Callable[[], bool]) -> None:
    """Serve ``POST /v1/notifications`` for ``remediator``; nothing (404) without ``token_file``."""
    if not token_file:
        return
    tokens = TokenSource(token_file=token_file)

    async def notifications(request: web.Request) -> web.Response:
        expected = tokens.get()
        header = request.headers.get("Authorization", "")
        given = header[len("Bearer "):] if header.startswith("Bearer ") else ""
        if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            return web.json_response({"error": "unauthorized"}, status=401)
        if not ready():
            return web.json_response({"error": "not ready: initial sync not complete"}, status=503)
        if not remediator.is_leader():
            return web.json_response({"error": "not the leader; send notifications to the leading replica"},
                                     status=503)
        try:
            items = parse_notifications(json.loads(await request.text()))
        except ValueError as exc:
            return web.json_response({"error": f"bad notifications: {exc}"}, status=400)
        unknown = sorted({n.resource for n in items} - set(remediator.resources))
        if unknown:
            return web.json_response({"error": f"resources not remediated here: {', '.join(unknown)}"},
                                     status=400)
        result = await remediator.apply_notifications(items)
        return web.json_response({"patched": result.patched, "in_sync": result.in_sync,
                                  "missing": result.skipped_missing, "failed": result.failed,
                                  "dry_run": result.dry_run})

    app.router.add_post(PATH, notifications)
