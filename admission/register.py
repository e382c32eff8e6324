"""Register (or remove) the webhook configuration once the webhook can answer.

``python -m fedplace.admission.register`` is what the Helm chart's hook Jobs run
(deploy/helm/fedplace, templates/webhook-register.yaml); it does what
deploy/scripts/install.sh does with kubectl, for one API server:

``apply``
    1. wait until every ``--wait-deployment`` has rolled out, as ``kubectl
       rollout status`` decides it (the new ReplicaSet's replicas all updated and
       available, no old replica left), within ``--timeout`` seconds;
    2. if the webhook configuration of ``--webhook-file`` carries no
       ``caBundle``, take it from ``ca.crt`` of ``--ca-bundle-from`` (the
       webhook's serving certificate Secret: cert-manager's, or yours), so that
       the API server can verify the webhook from its first call;
    3. server-side apply it (field manager ``fedplace-register``): created, or
       updated in place — never deleted and re-created, so an upgrade leaves no
       moment without the webhook.
``delete``
    delete the webhook configuration ``--name`` (gone already: fine). The
    chart runs it before ``helm uninstall`` deletes the webhook's pods.

With failurePolicy Fail, registering the webhook before its pods are Ready
would fail every covered change in the cluster (docs/operations.md, "Install in
stages"); so step 1 never gives up early: on timeout it exits 1 and registers
nothing.

The API server is the one of ``--kubeconfig`` / ``$KUBECONFIG``, else the pod's
service account (in-cluster). Exit codes: 0 done, 1 failed (the reason on
stderr, one JSON log line), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from kubernetes_asyncio import client

from fedplace.common.kube_client import KubeApiError, kube_json, new_api_client
from fedplace.common.logs import configure_logging

__all__ = ["FIELD_MANAGER", "WEBHOOKS_PATH", "apply", "delete", "main", "rollout_state"]

log = logging.getLogger("fedplace.admission.register")

FIELD_MANAGER = "fedplace-register"
WEBHOOKS_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def rollout_state(deployment: dict[str, Any]) -> tuple[bool, str]:
    """(done, what is awaited): ``kubectl rollout status``'s reading of a Deployment."""
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    name = meta.get("name", "?")
    if int(meta.get("generation") or 0) > int(status.get("observedGeneration") or 0):
        return False, f"deployment {name}: waiting for the controller to observe the new spec"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            raise RolloutFailed(f"deployment {name} exceeded its progress deadline")
    wanted = 1 if spec.get("replicas") is None else int(spec["replicas"])
    updated = int(status.get("updatedReplicas") or 0)
    replicas = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if updated < wanted:
        return False, f"deployment {name}: {updated} of {wanted} new replicas updated"
    if replicas > updated:
        return False, f"deployment {name}: {replicas - updated} old replicas pending termination"
    if available < updated:
        return False, f"deployment {name}: {available} of {updated} updated replicas available"
    return True, f"deployment {name} rolled out"


class RolloutFailed(Exception):
    """A Deployment will not finish rolling out (or not in time)."""


async def wait_for_rollouts(api: client.ApiClient, namespace: str, names: Sequence[str], timeout: float,
                            interval: float = 2.0) -> None:
    """Return once every Deployment ``names`` in ``namespace`` has rolled out; raise
    :class:`RolloutFailed` on its progress deadline or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    for name in names:
        last = ""
        while True:
            try:
                doc = await kube_json(api, "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
                done, what = rollout_state(doc)
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
                done, what = False, f"deployment {name}: not found yet"
            if what != last:
                log.info("rollout", extra={"state": what})
                last = what
            if done:
                break
            if time.monotonic() >= deadline:
                raise RolloutFailed(f"timed out after {timeout:g}s: {what}")
            await asyncio.sleep(interval)


async def ca_bundle_from_secret(api: client.ApiClient, namespace: str, name: str) -> str:
    """``ca.crt`` of a Secret, base64 as a ``caBundle`` holds it."""
    doc = await kube_json(api, "GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    value = (doc.get("data") or {}).get("ca.crt") or ""
    try:
        pem = base64.b64decode(value, validate=True)
    except ValueError:
        pem = b""
    if b"BEGIN CERTIFICATE" not in pem:
        raise ValueError(f"secret {namespace}/{name} has no ca.crt certificate to verify the webhook with")
    return value


async def apply(api: client.ApiClient, webhook: dict[str, Any], *, namespace: str, wait: Sequence[str] = (),
                timeout: float = 270.0, ca_secret: str | None = None, interval: float = 2.0) -> dict[str, Any]:
    """Wait for the rollouts, fill the caBundle if missing, and server-side apply ``webhook``."""
    if webhook.get("kind") != "MutatingWebhookConfiguration" or not (webhook.get("metadata") or {}).get("name"):
        raise ValueError("the webhook file must hold one MutatingWebhookConfiguration with a name")
    await wait_for_rollouts(api, namespace, wait, timeout, interval)
    hooks = webhook.get("webhooks") or []
    if ca_secret and any(not (w.get("clientConfig") or {}).get("caBundle") for w in hooks):
        bundle = await ca_bundle_from_secret(api, namespace, ca_secret)
        for w in hooks:
            w.setdefault("clientConfig", {}).setdefault("caBundle", bundle)
    name = webhook["metadata"]["name"]
    result = await kube_json(api, "PATCH", f"{WEBHOOKS_PATH}/{name}", body=webhook,
                             query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                             content_type="application/apply-patch+yaml")
    log.info("webhook registered", extra={"webhook": name, "webhooks": len(hooks)})
    return result


async def delete(api: client.ApiClient, name: str) -> bool:
    """Delete the webhook configuration ``name``; False if it was not there."""
    try:
        await kube_json(api, "DELETE", f"{WEBHOOKS_PATH}/{name}")
    except KubeApiError as exc:
        if exc.status == 404:
            log.info("webhook already gone", extra={"webhook": name})
            return False
        raise
    log.info("webhook deleted", extra={"webhook": name})
    return True


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m fedplace.admission.register",
                                     description="Register the webhook once its pods are ready, or remove it.")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG, else in-cluster)")
    parser.add_argument("--log-level", default="info")
    sub = parser.add_subparsers(dest="action", required=True)
    do = sub.add_parser("apply", help="wait for the rollouts, then server-side apply the webhook configuration")
    do.add_argument("--webhook-file", required=True, type=Path,
                    help="the MutatingWebhookConfiguration, JSON or YAML")
    do.add_argument("--namespace", required=True, help="namespace of the Deployments and the CA Secret")
    do.add_argument("--wait-deployment", action="append", default=[], metavar="NAME",
                    help="a Deployment to wait for (repeatable)")
    do.add_argument("--ca-bundle-from", default=None, metavar="SECRET",
                    help="fill a missing caBundle from ca.crt of this Secret")
    do.add_argument("--timeout", type=float, default=270.0, help="seconds to wait for the rollouts")
    do.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    undo = sub.add_parser("delete", help="delete the webhook configuration")
    undo.add_argument("--name", required=True)
    return parser.parse_args(argv)


def load_webhook(path: Path) -> dict[str, Any]:
    import yaml  # JSON is YAML too

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not an object")
    return doc


async def run(args: argparse.Namespace, api: client.ApiClient | None = None) -> None:
    own = api is None
    api = api or await new_api_client(args.kubeconfig)
    try:
        if args.action == "apply":
            await apply(api, load_webhook(args.webhook_file), namespace=args.namespace, wait=args.wait_deployment,
                        timeout=args.timeout, ca_secret=args.ca_bundle_from, interval=args.interval)
        else:
            await delete(api, args.name)
    finally:
        if own:
            await api.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("fedplace-register", args.log_level)
    try:
        asyncio.run(run(args))
    except Exception as exc:  # noqa: BLE001 - one line saying why, and exit 1: the hook fails
        log.error("webhook registration failed", extra={"error": f"{exc.__class__.__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
