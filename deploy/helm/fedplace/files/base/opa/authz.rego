# Authorization of OPA's own REST API (OPA runs with --authentication=token
# --authorization=basic, so every request is decided by data.system.authz.allow
# with input = {method, path, params, headers, identity: <bearer token>}).
#
# Where the tokens come from: OPA's environment, read with opa.runtime().env.
# The Deployment fills FEDPLACE_SYNC_TOKEN, FEDPLACE_ADMISSION_TOKEN and
# FEDPLACE_READER_TOKEN (people and CI: read and ask, never write) from the
# Secret opa-tokens (secretKeyRef), and the clients read the same Secret keys
# as files. So this policy holds no secret, is committed as it is, and the
# tokens exist in one place only. During a rotation the *_ALT variables
# (Secret keys <name>-alt, empty otherwise) carry the client's next or previous
# token, accepted as well, so pods of two generations never refuse each other
# (deploy/scripts/gen-tokens.sh --stage / --promote / --retire). A changed
# Secret rolls the OPA pods; the sidecar re-pushes everything after a restart.
#
# Tokens shorter than min_token_length never match, so an empty or
# placeholder value locks OPA instead of opening it.
#
# Keep policy_namespaces and replicate_root in step with opa-kube-sync's
# --policy-namespace and --replicate-path (tests/deploy checks it), and the
# admission path with fedplace-admission's --opa-decision-path.
package system.authz

default allow := false

min_token_length := 32

policy_namespaces := {"kube-federation-scheduling-policy"}

replicate_root := "kubernetes"

# opa-kube-sync's index of the replicated RBAC bindings (data.<replicate_root>_index).
index_root := concat("", [replicate_root, "_index"])

# opa-kube-sync's restart-detection sentinel (data.fedplace_sync).
sentinel_root := "fedplace_sync"

admission_decision := ["v1", "data", "io", "k8s", "federation", "admission"]

env := opa.runtime().env

# Surrounding whitespace is ignored, as the clients strip their token files.
token(name) := t if {
	is_string(env[name])
	t := trim_space(env[name])
	count(t) >= min_token_length
}

# A client's token, and its alternate while a rotation is under way.
tokens(name) := {t | some n in [name, concat("", [name, "_ALT"])]; t := token(n)}

sync if input.identity in tokens("FEDPLACE_SYNC_TOKEN")

admission if input.identity in tokens("FEDPLACE_ADMISSION_TOKEN")

reader if input.identity in tokens("FEDPLACE_READER_TOKEN")

# Probes and Prometheus have no token: anyone may ask whether OPA is up and
# read its metrics (request counts and timings, nothing from the data). OPA
# applies this policy to the diagnostic listener (:8282) too.
allow if {
	input.method == "GET"
	input.path in {["health"], ["metrics"]}
}

# fedplace-admission: only its decision.
allow if {
	admission
	input.method == "POST"
	input.path == admission_decision
}

# opa-kube-sync: list policies; write and delete only the modules it owns
# (ids <policy namespace>/<configmap>/<key>), never this file's.
allow if {
	sync
	input.method == "GET"
	input.path == ["v1", "policies"]
}

allow if {
	sync
	input.method in {"GET", "PUT", "DELETE"}
	input.path[0] == "v1"
	input.path[1] == "policies"
	input.path[2] in policy_namespaces
	count(input.path) > 3
}

# opa-kube-sync: the modules it generates itself (ids opa-kube-sync/<file>: the
# replicated data root, the record of a complete load in the admission decision).
allow if {
	sync
	input.method in {"GET", "PUT", "DELETE"}
	count(input.path) == 4
	input.path[0] == "v1"
	input.path[1] == "policies"
	input.path[2] == "opa-kube-sync"
}

# opa-kube-sync: replicated objects, their index and its sentinel, any method.
allow if {
	sync
	input.method in {"GET", "PUT", "PATCH", "DELETE"}
	input.path[0] == "v1"
	input.path[1] == "data"
	input.path[2] in {replicate_root, index_root, sentinel_root}
}

# opa-kube-sync's remediator: queries (POST evaluates, it never writes).
allow if {
	sync
	input.method == "POST"
	input.path[0] == "v1"
	input.path[1] == "data"
	input.path[2] != "system"
}

# The reader (fedplace explain / what-if / report from a laptop or CI): read the
# policies and the data, ask any decision; never write. Never the system
# package, whose documents include this policy's view of OPA's environment
# (the tokens): not data.system, not the data root that holds it, not ad-hoc
# queries (/v1/query), which could name it.
allow if {
	reader
	input.method == "GET"
	input.path[0] == "v1"
	input.path[1] == "policies"
}

allow if {
	reader
	input.method in {"GET", "POST"}
	input.path[0] == "v1"
	input.path[1] == "data"
	count(input.path) > 2
	input.path[2] != "system"
}
