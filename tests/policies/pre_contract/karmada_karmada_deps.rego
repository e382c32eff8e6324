# Test fixture (tests/policies/test_eu_pci_differential.py): policies/karmada/karmada_deps.rego as it was
# before the placement-rules contract, when the EU/PCI example was wired into the
# placement rules, with its packages moved under pre_contract. (The settings and
# the replicated-data library are read where the shipped policies read them.)
# Never shipped, never edited: the differential compares today's decisions with it.
# Karmada's dependencies (Rego v1): with spec.propagateDeps a binding's
# template takes its dependencies along, so a dependency's own requirements
# narrow the binding of the template that needs it.
#
# Karmada's dependencies distributor (feature gate PropagateDeps, on by
# default) reads the template of every binding with spec.propagateDeps (copied
# from the PropagationPolicy) and writes, per dependency, an "attached"
# ResourceBinding named like the detector's (<name>-<lowercase kind>) whose
# spec.requiredBy lists the parent binding and its spec.clusters. The binding
# controller then propagates the dependency to the union of its own
# spec.clusters and every requiredBy entry's clusters: whatever the
# dependency's own binding excludes, it lands where its parents are.
#
# So the clusters a dependency's own requirements forbid are forbidden to every
# template that takes it along: `dependencies_forbidden`, unioned into the
# binding's `forbidden` (karmada.rego). A dependency is named by the template's
# pod spec, as Karmada's default interpreter reads it (ConfigMaps and Secrets
# from volumes, projected volumes, envFrom, env valueFrom and
# imagePullSecrets, the ServiceAccount, PersistentVolumeClaims), and by the
# binding's resourcebinding.karmada.io/dependencies annotation (what the
# distributor found, custom interpreters included; entries with a name only).
# Only dependencies of a `karmada_templates` kind that are replicated are
# judged: one not replicated (yet) adds nothing.
#
# Attached bindings (no spec.placement: Karmada's own test for a binding the
# distributor generated) are never decided: a placement added to one would make
# the distributor take it for a policy's binding and the scheduler schedule it.
package pre_contract.io.k8s.federation.karmada

import data.pre_contract.io.k8s.federation.placement
import data.io.k8s.federation.replicated

dependencies_key := "resourcebinding.karmada.io/dependencies"

# A binding the dependencies distributor generated: Karmada's detector always
# writes spec.placement, the distributor never does.
attached if {
	binding
	not is_object(placement_spec)
}

propagates_deps if {
	binding
	input.spec.propagateDeps == true
}

# -- the template's dependencies ------------------------------------------------------

workload_pod_kinds := {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"}

pod_spec(t) := s if {
	t.kind in workload_pod_kinds
	s := t.spec.template.spec
	is_object(s)
}

pod_spec(t) := s if {
	t.kind == "CronJob"
	s := t.spec.jobTemplate.spec.template.spec
	is_object(s)
}

pod_spec(t) := s if {
	t.kind == "Pod"
	s := t.spec
	is_object(s)
}

containers(spec) := [c |
	some list in ["initContainers", "containers", "ephemeralContainers"]
	some c in object.get(spec, list, [])
	is_object(c)
]

# Volume sources whose secretRef.name names a Secret (Kubernetes' VisitPodSecretNames).
secret_ref_volumes := ["cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos"]

# [kind, name] of every object the pod spec refers to.
pod_refs(spec) := {ref |
	some ref in pod_ref_list(spec)
	is_string(ref[1])
	ref[1] != ""
}

pod_ref_list(spec) := array.concat(volume_refs(spec), array.concat(container_refs(spec), account_refs(spec)))

volume_refs(spec) := [ref |
	some v in object.get(spec, "volumes", [])
	is_object(v)
	some ref in volume_ref(v)
]

volume_ref(v) := [["ConfigMap", v.configMap.name]] if v.configMap

else := [["Secret", v.secret.secretName]] if v.secret

else := [["PersistentVolumeClaim", v.persistentVolumeClaim.claimName]] if v.persistentVolumeClaim

else := [["Secret", v.azureFile.secretName]] if v.azureFile

else := [["Secret", v.csi.nodePublishSecretRef.name]] if v.csi.nodePublishSecretRef

else := [ref |
	some source in v.projected.sources
	some ref in projected_ref(source)
] if v.projected

else := [["Secret", v[s].secretRef.name] |
	some s in secret_ref_volumes
	v[s].secretRef
]

projected_ref(source) := [["ConfigMap", source.configMap.name]] if source.configMap

else := [["Secret", source.secret.name]] if source.secret

else := []

container_refs(spec) := [ref |
	some c in containers(spec)
	some ref in array.concat(env_from_refs(c), env_refs(c))
]

env_from_refs(c) := [ref |
	some e in object.get(c, "envFrom", [])
	some ref in array.concat(
		[["ConfigMap", e.configMapRef.name] | e.configMapRef],
		[["Secret", e.secretRef.name] | e.secretRef],
	)
]

env_refs(c) := [ref |
	some e in object.get(c, "env", [])
	some ref in array.concat(
		[["ConfigMap", e.valueFrom.configMapKeyRef.name] | e.valueFrom.configMapKeyRef],
		[["Secret", e.valueFrom.secretKeyRef.name] | e.valueFrom.secretKeyRef],
	)
]

account_refs(spec) := array.concat(
	[["Secret", s.name] | some s in object.get(spec, "imagePullSecrets", []); is_object(s)],
	[["ServiceAccount", spec.serviceAccountName] | spec.serviceAccountName != "default"],
)

# The distributor's own list on the binding (named entries in the template's namespace).
annotated_refs := {[d.kind, d.name] |
	raw := input.metadata.annotations[dependencies_key]
	json.is_valid(raw)
	some d in json.unmarshal(raw)
	is_object(d)
	is_string(d.kind)
	is_string(d.name)
	d.name != ""
	object.get(d, "namespace", "") == resource_namespace
}

# [kind, name] of the template's dependencies, in its namespace.
dependencies := template_refs | annotated_refs if {
	propagates_deps
	resource_namespace != ""
} else := set()

template_refs := pod_refs(pod_spec(template)) if pod_spec(template)

else := set()

# -- what each dependency forbids --------------------------------------------------------

# The replicated dependency, when its kind is one the pack decides.
dependency_object(kind, name) := d if {
	is_object(templates)
	plural := templates[kind]
	valid_template(kind, plural)
	d := replicated.namespaced_object(plural, resource_namespace, name)
	d.kind == kind
}

# Per judged dependency ("Kind namespace/name"): the clusters its own
# requirements forbid (every cluster when they are malformed, as for a template).
dependency_forbidden[text] := f if {
	some ref in dependencies
	d := dependency_object(ref[0], ref[1])
	text := sprintf("%s %s/%s", [ref[0], resource_namespace, ref[1]])
	f := object_forbidden(d)
	count(f) > 0
}

object_forbidden(obj) := all_clusters if {
	count(placement.constraint_errors) > 0 with input as obj
} else := set() if {
	not placement.asks_placement with input as obj
} else := all_clusters - e if {
	e := placement.eligible_clusters with input as obj
}

dependencies_forbidden := {c | some _, f in dependency_forbidden; some c in f}

# What the why adds when dependencies forbid clusters.
dependencies_why := sprintf("; with its dependencies (propagateDeps) also excluded: %s", [concat("; ", [
	sprintf("%s forbids %s", [text, names_text(dependency_forbidden[text])]) |
	some text in sort(object.keys(dependency_forbidden))
])]) if {
	count(dependency_forbidden) > 0
} else := ""
