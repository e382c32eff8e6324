"""``make node-admit-demo``: node-level pod admission end to end on the devstack.

What it shows, checking each step (exit status 1 if any misbehaves):

1. a policy engine (the node-local OPA) with the shipped pack policies/nodeadmission,
   and a Kubernetes API server;
2. a node laid out as docs/node-admission.md describes — configuration
   directory, bin directory, socket directory — with ``fedplace-node-admit``
   configured as all three plugin types (shell, socket, grpc) at once;
3. an API pod that asks for nothing special: admitted by every plugin;
4. an API pod with host networking, a privileged container and a hostPath
   volume: rejected with the reasons; its status becomes ``Failed`` with the
   reason and a Warning Event is recorded, as the kubelet would;
5. a static pod from a manifest file using the host's PID namespace: rejected
   by the same path;
6. the ``PodAdmissionPlugin`` feature gate off: the same pod admitted, no plugin called.

Everything lives under ``.devstack/node-admit-demo/`` (logs included).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from devstack.demo import DemoFailed, check, say, step
from devstack.launch import ServerProcess, free_port
from devstack.scratch import create_namespace
from fedplace.common.kube_client import kube_json

__all__ = ["PACK", "PACK_ORDER", "main", "pack_modules", "port_open"]

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "policies" / "nodeadmission"
# admission.rego calls functions of pod.rego's package: OPA compiles each module as it
# is PUT, so pod.rego goes first.
PACK_ORDER = ("pod.rego", "admission.rego")
SCRIPTS = Path(sys.executable).parent
NAMESPACE = "shop"
NODE = "node-1"


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port`` (a gRPC plugin is up)."""
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def pack_modules() -> dict[str, str]:
    """{policy id: source} of the node pack, in the order to load them."""
    return {f"nodeadmission/{name}": (PACK / name).read_text(encoding="utf-8") for name in PACK_ORDER}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}], **spec}}


def manager(work: Path, gates: str, *args: str, stdin: str | None = None) -> dict[str, Any]:
    argv = [str(SCRIPTS / "fedplace-node-admit-manager"), "--conf-dir", str(work / "conf"),
            "--bin-dir", str(work / "bin"), "--socket-dir", str(work / "sock"), "--feature-gates", gates, *args]
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)
    if proc.returncode not in (0, 1):
        raise DemoFailed(f"the manager failed ({proc.returncode}): {proc.stderr}")
    return json.loads(proc.stdout)


def show(what: str, verdict: dict[str, Any]) -> None:
    say(f"   {what}: {'ADMITTED' if verdict['admit'] else 'REJECTED'}"
        + (f" — reason {verdict['reason']}" if not verdict["admit"] else ""))
    for p in verdict.get("plugins", []):
        said = "admit" if p["admit"] else f"reject {p['reason']}: {p.get('message', '')}"
        say(f"      {p['name']:<22} {p['type']:<7} {p['seconds'] * 1000:6.1f} ms  {said}")


async def wait_for(path: Path, port: int, proc: subprocess.Popen, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and port_open(port)):
        if proc.poll() is not None:
            raise DemoFailed(f"fedplace-node-admit exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise DemoFailed("fedplace-node-admit did not start serving")
        await asyncio.sleep(0.05)


async def run_demo(work: Path) -> None:
    logs = work / "logs"
    procs: list[ServerProcess] = []
    plugin: subprocess.Popen | None = None
    try:
        step(1, "Start a policy engine (the node's OPA) with policies/nodeadmission, and an API server")
        engine = ServerProcess("engine", ["-m", "devstack.engine", "--listen", "127.0.0.1:{port}"], "/health",
                               logs).start()
        procs.append(engine)
        token = secrets.token_urlsafe(24)
        (work / "kube.token").write_text(token)
        kubeconfig = work / "kubeconfig"
        procs.append(ServerProcess("kube", ["-m", "devstack.kube", "--listen", "127.0.0.1:{port}", "--token-file",
                                            str(work / "kube.token"), "--write-kubeconfig", str(kubeconfig)],
                                   "/version", logs, token=token).start())
        async with aiohttp.ClientSession() as session:
            for module_id, source in pack_modules().items():
                async with session.put(f"{engine.url}/v1/policies/{module_id}", data=source) as resp:
                    check(resp.status == 200, f"policy {module_id} loaded")

        step(2, "Lay out the node: fedplace-node-admit as a shell, a socket and a grpc plugin")
        for sub in ("conf", "bin", "sock"):
            (work / sub).mkdir(parents=True, exist_ok=True)
        plugin_config = work / "node-admit.yaml"
        plugin_config.write_text(json.dumps({
            "opa": {"url": engine.url}, "deadline": 2,
            "node": {"name": NODE, "labels": {"fedplace.io/pool": "serverless"}, "runtimeClasses": ["runc"],
                     "allowedHostPaths": ["/var/log"]}}, indent=2))
        (work / "bin" / "fedplace-node-admit").symlink_to(SCRIPTS / "fedplace-node-admit")
        socket_path, port = work / "sock" / "node-admit.sock", free_port()
        log = open(logs / "fedplace-node-admit.log", "ab")
        plugin = subprocess.Popen([str(SCRIPTS / "fedplace-node-admit"), "--config", str(plugin_config),
                                   "--socket", str(socket_path), "--grpc-port", str(port)],
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        await wait_for(socket_path, port, plugin)
        conf = {"name": "fedplace-node-admission", "version": "0.1", "timeoutSeconds": 5, "plugins": [
            {"name": "fedplace-node-admit", "type": "shell", "args": ["--config", str(plugin_config)]},
            {"name": "node-admit-socket", "type": "socket", "socket": str(socket_path)},
            {"name": "node-admit-grpc", "type": "grpc", "port": port}]}
        (work / "conf" / "pod-admission.json").write_text(json.dumps(conf, indent=2))
        say(f"   {work / 'conf' / 'pod-admission.json'}: " + ", ".join(
            f"{p['name']} ({p['type']})" for p in conf["plugins"]))

        api = await config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
        try:
            await demo_pods(work, api, str(kubeconfig))
        finally:
            await api.close()
        say("\nAll node admission steps behaved as expected.")
    finally:
        if plugin is not None:
            plugin.terminate()
            plugin.wait(10)
        for p in reversed(procs):
            p.stop()


async def demo_pods(work: Path, api: client.ApiClient, kubeconfig: str) -> None:
    gate_on = "PodAdmissionPlugin=true"
    # With its default ServiceAccount, as the service-account controller would: without it the API
    # server's ServiceAccount admission plugin refuses the pods.
    await create_namespace(api, NAMESPACE)

    step(3, "An API pod that asks for nothing special")
    web = await kube_json(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod("web"))
    verdict = manager(work, gate_on, "--report", "--kubeconfig", kubeconfig, "--node-name", NODE,
                      stdin=json.dumps(web))
    show("web", verdict)
    check(verdict["admit"] and len(verdict["plugins"]) == 3, "admitted by all three plugin types")

    step(4, "An API pod with host networking, a privileged container and a hostPath volume")
    miner = await kube_json(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=pod(
        "miner", hostNetwork=True, volumes=[{"name": "root", "hostPath": {"path": "/"}}],
        containers=[{"name": "miner", "image": "miner:6", "securityContext": {"privileged": True}}]))
    verdict = manager(work, gate_on, "--report", "--kubeconfig", kubeconfig, "--node-name", NODE,
                      stdin=json.dumps(miner))
    show("miner", verdict)
    check(not verdict["admit"] and verdict["reason"] == "HostNetworkForbidden", "rejected: HostNetworkForbidden")
    check(all("is privileged" in p.get("message", "") and "host path" in p.get("message", "")
              for p in verdict["plugins"]), "every plugin type names all three problems")
    stored = await kube_json(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods/miner")
    status = stored.get("status") or {}
    say(f"   pod status: phase={status.get('phase')} reason={status.get('reason')}")
    say(f"               message={status.get('message', '')[:110]}…")
    check(status.get("phase") == "Failed" and status.get("reason") == "HostNetworkForbidden",
          "the pod's status is Failed with the reason, as the kubelet writes it")
    events = await kube_json(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/events")
    warnings = [e for e in events["items"] if (e.get("involvedObject") or {}).get("name") == "miner"]
    for e in warnings:
        say(f"   event: {e['type']} {e['reason']} from {e['source'].get('component')}/{e['source'].get('host')}")
    check(len(warnings) == 1 and warnings[0]["type"] == "Warning", "one Warning Event about the pod")
    web_after = await kube_json(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods/web")
    check((web_after.get("status") or {}).get("phase") != "Failed", "the admitted pod's status is untouched")

    step(5, "A static pod from a manifest file, using the host's PID namespace")
    manifest = work / "manifests" / "node-exporter.yaml"
    manifest.parent.mkdir(exist_ok=True)
    manifest.write_text(json.dumps(pod("node-exporter", hostPID=True)))
    verdict = manager(work, gate_on, "--pod", str(manifest))
    show("node-exporter (static)", verdict)
    check(not verdict["admit"] and verdict["reason"] == "HostPIDForbidden", "rejected: HostPIDForbidden")

    step(6, "The PodAdmissionPlugin feature gate off")
    verdict = manager(work, "PodAdmissionPlugin=false", stdin=json.dumps(miner))
    show("miner", verdict)
    check(verdict["admit"] and not verdict["plugins"], "admitted without calling any plugin")


def main(argv: list[str] | None = None) -> int:
    work = ROOT / ".devstack" / "node-admit-demo"
    shutil.rmtree(work, ignore_errors=True)
    (work / "logs").mkdir(parents=True)
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost,::1")
    try:
        asyncio.run(run_demo(work))
    except DemoFailed as exc:
        say(f"\nDEMO FAILED: {exc}\nLogs: {work / 'logs'}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
