"""common.cluster_index: the clusters by label value and region, the document opa-kube-sync writes beside the mirror."""

from __future__ import annotations

from fedplace.common.cluster_index import LAYOUT, cluster_index, indexed, region
from fedplace.common.indexes import index_of, index_path, indexes_of
from fedplace.common.kube_client import Resource
from fedplace.common.subject_index import subject_index

FEDERATION = Resource("federation.fedplace.io", "v1beta1", "clusters", False)
KARMADA = Resource("cluster.karmada.io", "v1alpha1", "clusters", False)


def cluster(labels=None, status=None, spec=None):
    obj = {"metadata": {"name": "x"}}
    if labels is not None:
        obj["metadata"]["labels"] = labels
    if status is not None:
        obj["status"] = status
    if spec is not None:
        obj["spec"] = spec
    return obj


def test_labels_and_regions_group_the_clusters():
    clusters = {"a": cluster({"pci-compliance-level": "2", "tier": "gold", "id": "a"}, {"region": "europe-west1"}),
                "b": cluster({"pci-compliance-level": "2"}, spec={"region": "eu-central-1"}),
                "c": cluster({"pci-compliance-level": "0"}, {"region": "us-east1"}, {"region": "eu-west-1"}),
                "d": cluster({"id": "a"})}
    assert cluster_index(clusters) == {
        "layout": LAYOUT,
        "names": {"a": True, "b": True, "c": True, "d": True},
        "labels": {"pci-compliance-level": {"2": {"a": True, "b": True}, "0": {"c": True}},
                   "tier": {"gold": {"a": True}}, "id": {"a": {"a": True, "d": True}}},
        "regions": {"europe-west1": {"a": True}, "eu-central-1": {"b": True}, "us-east1": {"c": True}},
        # labels again, per region; d has no region
        "region_labels": {"europe-west1": {"pci-compliance-level": {"2": {"a": True}}, "tier": {"gold": {"a": True}},
                                           "id": {"a": {"a": True}}},
                          "eu-central-1": {"pci-compliance-level": {"2": {"b": True}}},
                          "us-east1": {"pci-compliance-level": {"0": {"c": True}}}},
        "named_by": {"id": {"a": True}},  # d's label names another cluster
    }


def test_region_is_status_region_else_spec_region_when_a_string():
    assert region(cluster(status={"region": "r1"}, spec={"region": "r2"})) == "r1"
    assert region(cluster(status={}, spec={"region": "r2"})) == "r2"
    assert region(cluster(status="broken", spec={"region": "r2"})) == "r2"
    # status.region present but not a string: no region (spec is not read), as object.get has it
    assert region(cluster(status={"region": None}, spec={"region": "r2"})) is None
    assert region(cluster(spec={"region": 7})) is None
    assert region(cluster()) is None


def test_malformed_labels_are_left_out_but_the_cluster_is_named():
    doc = cluster_index({"a": cluster({"ok": "v", "n": 3}), "b": {"metadata": {"labels": ["x"]}}, "c": "junk"})
    assert doc["labels"] == {"ok": {"v": {"a": True}}}
    assert doc["names"] == {"a": True, "b": True}  # an entry that is not an object is no cluster
    assert doc["regions"] == {} and doc["region_labels"] == {} and doc["named_by"] == {}


def test_only_cluster_scoped_clusters_types_are_indexed():
    assert indexed(FEDERATION) and indexed(KARMADA)
    assert not indexed(Resource("example.com", "v1", "clusters", True))
    assert not indexed(Resource("apps", "v1", "replicasets", True))
    assert index_of(KARMADA) is cluster_index
    assert index_of(Resource("apps", "v1", "replicasets", True)) is None
    assert index_path("kubernetes", KARMADA) == ["kubernetes_index", "clusters"]


def test_indexes_of_a_mirror_are_what_the_sync_writes_beside_it():
    crb = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False)
    rb = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", True)
    mirror = {"clusters": {"a": cluster({"x": "1"})},
              "clusterrolebindings": {"b": {"subjects": [{"kind": "User", "name": "u"}]}},
              "rolebindings": {"shop": {"r": {"subjects": [{"kind": "User", "name": "v"}]}}},
              "replicasets": {"shop": {"web": {}}}}
    assert indexes_of(mirror) == {"clusters": cluster_index(mirror["clusters"]),
                                  "clusterrolebindings": subject_index(crb, mirror["clusterrolebindings"]),
                                  "rolebindings": subject_index(rb, mirror["rolebindings"])}
    assert indexes_of({"clusters": "junk"}) == {}
