"""Response compression: the API server gzips an answer over 128 KiB for a client that accepts
gzip (kube-apiserver's APIResponseCompression, on by default; the devstack does the same), and
the services' client (:func:`fedplace.common.kube_client.new_api_client`) asks for answers
uncompressed unless told otherwise."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from fedplace.common import jsonsafe
from fedplace.common.kube_client import kube_json, kube_stream, new_api_client
from tests.fixtures.kube import KubeServer

VALUE = "x" * 60_000  # three such ConfigMaps list to ~180 KB: above the 128 KiB threshold


async def _get(api: client.ApiClient, path: str, query: list[tuple[str, Any]] | None = None) -> tuple[str | None, Any]:
    """(Content-Encoding of the answer, the parsed answer)."""
    resp = await kube_stream(api, "GET", path, query=query)
    try:
        return resp.headers.get("Content-Encoding"), jsonsafe.loads(await resp.read())
    finally:
        resp.release()


async def test_large_answers_are_gzipped_only_when_asked(kube: KubeServer, kube_api: client.ApiClient,
                                                         kube_namespace: str) -> None:
    for i in range(3):
        await kube_json(kube_api, "POST", f"/api/v1/namespaces/{kube_namespace}/configmaps",
                        body={"metadata": {"name": f"big{i}"}, "data": {"v": VALUE}})
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    plain = await new_api_client(str(kube.kubeconfig))
    gzip = await new_api_client(str(kube.kubeconfig), compression=True)
    try:
        encoding, listed = await _get(plain, path)
        assert encoding is None
        assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["big0", "big1", "big2"]

        encoding, listed = await _get(gzip, path)
        assert encoding == "gzip"  # read back decompressed
        assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["big0", "big1", "big2"]
        assert {i["data"]["v"] for i in listed["items"]} == {VALUE}
        # the watch cache's unpaged list too
        encoding, listed = await _get(gzip, path, [("resourceVersion", "0")])
        assert encoding == "gzip" and len(listed["items"]) == 3

        # an answer under 128 KiB is never compressed
        encoding, one = await _get(gzip, f"{path}/big0")
        assert encoding is None and one["data"]["v"] == VALUE
        encoding, page = await _get(gzip, path, [("limit", 1)])
        assert encoding is None and len(page["items"]) == 1
    finally:
        await plain.close()
        await gzip.close()
