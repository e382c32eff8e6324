"""fedplace-kube: a local Kubernetes API server (aiohttp) that behaves like
kube-apiserver on the wire, for the demo and the tests. See docs/devstack.md."""

from .server import Server, ServerConfig

__all__ = ["Server", "ServerConfig"]
