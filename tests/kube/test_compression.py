"""Response compression: the API server gzips an answer over 128 KiB for a client that accepts
gzip (kube-apiserver's APIResponseCompression, on by default; the devstack does the same).
aiohttp, under every client of the services, accepts gzip unasked, so large lists reach them
compressed (docs/sync.md, "Start-up cost")."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from fedplace.common import jsonsafe
from fedplace.common.kube_client import kube_json, kube_stream

VALUE = "x" * 60_000  # three such ConfigMaps list to ~180 KB: above the 128 KiB threshold


async def _get(api: client.ApiClient, path: str, query: list[tuple[str, Any]] | None = None,
               encoding: str | None = None) -> tuple[str | None, Any]:
    """(Content-Encoding of the answer, the parsed answer); ``encoding``: the Accept-Encoding sent,
    aiohttp's own when None."""
    headers = {"Accept": "application/json"} | ({"Accept-Encoding": encoding} if encoding else {})
    resp = await api.call_api(path, "GET", query_params=query or [], header_params=headers,
                              auth_settings=["BearerToken"], _preload_content=False)
    try:
        assert resp.status == 200, resp.status
        return resp.headers.get("Content-Encoding"), jsonsafe.loads(await resp.read())
    finally:
        resp.release()


async def test_large_answers_are_gzipped_for_a_client_accepting_gzip(kube_api: client.ApiClient,
                                                                    kube_namespace: str) -> None:
    for i in range(3):
        await kube_json(kube_api, "POST", f"/api/v1/namespaces/{kube_namespace}/configmaps",
                        body={"metadata": {"name": f"big{i}"}, "data": {"v": VALUE}})
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"

    resp = await kube_stream(kube_api, "GET", path)  # the services' call, aiohttp's Accept-Encoding
    try:
        assert "gzip" in resp.request_info.headers.get("Accept-Encoding", "")
        assert resp.headers.get("Content-Encoding") == "gzip"
        listed = jsonsafe.loads(await resp.read())  # read back decompressed
    finally:
        resp.release()
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["big0", "big1", "big2"]
    assert {i["data"]["v"] for i in listed["items"]} == {VALUE}
    # the watch cache's unpaged list too
    encoding, listed = await _get(kube_api, path, [("resourceVersion", "0")])
    assert encoding == "gzip" and len(listed["items"]) == 3

    # asked for identity: uncompressed
    encoding, listed = await _get(kube_api, path, encoding="identity")
    assert encoding is None and len(listed["items"]) == 3
    # an answer under 128 KiB is never compressed
    encoding, one = await _get(kube_api, f"{path}/big0")
    assert encoding is None and one["data"]["v"] == VALUE
    encoding, page = await _get(kube_api, path, [("limit", 1)])
    assert encoding is None and len(page["items"]) == 1
