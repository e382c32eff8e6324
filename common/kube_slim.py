"""kubernetes_asyncio without its generated API and model classes, for raw-JSON processes.

``import kubernetes_asyncio`` imports every generated API class and all ~800
model classes: ~35 MB of a process's memory (opa-kube-sync: 81 MB resident
before it holds a single object, 40 MB of it this import). The services talk
to the API server in raw JSON only (:mod:`fedplace.common.kube_client`: ``kube_json``,
``kube_stream``), so they need the transport (``ApiClient``,
``Configuration``, ``rest``) and kubeconfig loading (``config``), nothing else.

Contract of :func:`install`: called before anything imports
``kubernetes_asyncio``, it registers the packages ``kubernetes_asyncio``,
``kubernetes_asyncio.client``, ``.client.api`` and ``.client.models`` as
empty packages over the installed ones, then imports the real
``client.api_client``, ``client.configuration`` and ``config`` modules into
them. ``ApiClient``, ``Configuration``, ``ApiException`` and every ``config``
loader work as usual; typed APIs (``client.CoreV1Api``) and models do not
exist in that process (AttributeError), and ``ApiClient`` cannot deserialise
into models (raw calls with ``_preload_content=False`` never do). Returns
False, changing nothing, when ``kubernetes_asyncio`` is already imported.
Only entry points of processes that never use typed APIs call it
(``sync/__main__.py``); tests and tools importing the library normally are
unaffected.

Why it stays (a hand-written piece earns its place by a same-run A/B against
the library's way): opa-kube-sync's imports take 46 MB of RSS with it and 81 MB
without (43 % less) and start 0.3–0.4 s sooner (``bench/kube_slim.py``;
docs/benchmarks.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

__all__ = ["install"]

_EMPTY = ("", "client", "client/api", "client/models")


def install() -> bool:
    """Make ``kubernetes_asyncio`` slim in this process (see the module docstring)."""
    if "kubernetes_asyncio" in sys.modules:
        return False
    spec = importlib.util.find_spec("kubernetes_asyncio")
    if spec is None or not spec.submodule_search_locations:
        return False
    base = list(spec.submodule_search_locations)[0]
    for sub in _EMPTY:
        name = "kubernetes_asyncio" + ("." + sub.replace("/", ".") if sub else "")
        module = types.ModuleType(name, "slim stand-in (common/kube_slim.py)")
        module.__path__ = [os.path.join(base, sub) if sub else base]
        module.__package__ = name
        sys.modules[name] = module
    package, client = sys.modules["kubernetes_asyncio"], sys.modules["kubernetes_asyncio.client"]
    api_client = importlib.import_module("kubernetes_asyncio.client.api_client")
    configuration = importlib.import_module("kubernetes_asyncio.client.configuration")
    exceptions = importlib.import_module("kubernetes_asyncio.client.exceptions")
    client.ApiClient = api_client.ApiClient  # type: ignore[attr-defined]
    client.Configuration = configuration.Configuration  # type: ignore[attr-defined]
    client.ApiException = exceptions.ApiException  # type: ignore[attr-defined]
    client.exceptions = exceptions  # type: ignore[attr-defined]
    package.client = client  # type: ignore[attr-defined]
    package.config = importlib.import_module("kubernetes_asyncio.config")  # type: ignore[attr-defined]
    return True
