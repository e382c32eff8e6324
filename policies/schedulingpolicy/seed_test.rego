# The scheduling-policy design's examples, as written there (the seed's
# spelling priorityClasseName[s] included; `Kind:` and capitalised field
# names in its snippets are typos and are not kept), for the other tests.
# The examples the design itself calls invalid are in `invalid`.
package io.k8s.federation.schedulingpolicy.seed_test

import data.io.k8s.federation.schedulingpolicy.validate

arch := "beta.kubernetes.io/arch"

os := "beta.kubernetes.io/os"

region := "failure-domain.beta.kubernetes.io/region"

zone := "failure-domain.beta.kubernetes.io/zone"

required_kind := "requiredDuringSchedulingIgnoredDuringExecution"

preferred_kind := "preferredDuringSchedulingIgnoredDuringExecution"

specs := {
	# Scheduler name
	"required-schedulers": {"required": {"schedulerNames": ["green-scheduler", "my-scheduler"]}},
	"allowed-schedulers": {"allowed": {"schedulerNames": ["green-scheduler", "my-scheduler"]}},
	"allowed-any-scheduler": {"allowed": {"schedulerNames": []}},
	"default-scheduler": {"default": {"schedulerName": "my-scheduler"}},
	# Tolerations
	"fine-grain-tolerations": {"allowed": {"tolerations": [
		{"keys": ["mykey"], "operators": ["Equal"], "values": ["value"], "effects": ["NoSchedule"]},
		{"keys": ["other_key"], "operators": ["Exists"], "effects": ["NoExecute"]},
	]}},
	"coarse-grain-tolerations": {"allowed": {"tolerations": [
		{"keys": [], "operators": [], "values": [], "effects": ["PreferNoSchedule"]},
		{"keys": [], "operators": ["Exists"], "effects": ["NoSchedule"]},
	]}},
	"any-toleration": {"allowed": {"tolerations": []}},
	"any-toleration-explicit": {"allowed": {"tolerations": [{"keys": [], "operators": [], "values": [], "effects": []}]}},
	"default-tolerations": {"default": {"tolerations": [
		{"key": "mykey", "operator": "Equal", "values": ["value", "other_value"], "effect": "NoSchedule"},
		{"key": "other_key", "operator": "Exists", "effect": "NoExecute"},
	]}},
	# Priority classes
	"single-priority": {
		"required": {"priorityClasseNames": ["high-priority"]},
		"default": {"priorityClasseName": "high-priority"},
	},
	"all-priorities": {"allowed": {"priorityClasseNames": []}},
	# Node selector
	"complete-node-selector": {
		"required": {"nodeSelectors": {arch: ["amd64", "arm64"]}},
		"default": {"nodeSelector": {arch: "amd64"}},
		"allowed": {"nodeSelectors": {"disk": ["ssd", "hdd"], region: []}},
	},
	"allowed-only-node-selector": {"allowed": {"nodeSelectors": {zone: ["eu-west-1a", "eu-west-1b", "eu-west-1c"]}}},
	# Affinity rules
	"basic-affinity": {
		"required": {"affinities": {"nodeAffinities": {required_kind: {"nodeSelectorTerms": [{"matchExpressions": [{"keys": [arch], "operators": ["In"], "values": ["amd64", "arm64"]}]}]}}}},
		"allowed": {"affinities": {
			"nodeAffinities": {required_kind: {"nodeSelectorTerms": [{"matchExpressions": [{"keys": [region, "kubernetes.io/authorized-region"], "operators": ["In", "NotIn"], "values": ["eu-2", "us-1"]}]}]}},
			"podAntiAffinities": {},
		}},
		"default": {"affinity": {"nodeAffinity": {required_kind: {"nodeSelectorTerms": [{"matchExpressions": [{"keys": [arch], "operators": ["In"], "values": ["amd64"]}]}]}}}},
	},
	# The second affinity example, its podAntiAffinities indented as the text
	# says it is meant (beside nodeAffinities).
	"not-full-combinatory": {"allowed": {"affinities": {
		"nodeAffinities": {required_kind: {"nodeSelectorTerms": [
			{"matchExpressions": [{"keys": [region, "kubernetes.io/authorized-region"], "operators": ["In", "NotIn"], "values": ["eu-2", "us-1"]}]},
			{"matchExpressions": [{"keys": [zone], "operators": ["NotIn"], "values": ["dc1", "dc2"]}]},
		]}},
		"podAntiAffinities": {},
	}}},
	"allow-all-affinities": {"allowed": {"affinities": {}}},
	"allow-all-affinities-explicit": {"allowed": {"affinities": {"nodeAffinities": {}, "podAffinities": {}, "podAntiAffinities": {}}}},
	"node-affinities-only": {"allowed": {"affinities": {"nodeAffinities": {}}}},
	# Multiple SchedulingPolicies
	"schedpol-a": {
		"required": {"nodeSelectors": {arch: ["amd64", "arm64"]}},
		"allowed": {"nodeSelectors": {"disk": ["ssd"]}},
		"default": {"nodeSelector": {arch: "amd64"}},
	},
	"schedpol-b": {
		"required": {
			"nodeSelectors": {arch: ["amd64", "arm64", "i386"], os: ["Linux", "Windows"]},
			"priorityClasseNames": ["bronze", "gold", "silver"],
		},
		"allowed": {"nodeSelectors": {"disk": ["sata"]}},
		"default": {"nodeSelector": {arch: "i386", os: "Linux"}, "priorityClasseName": "bronze"},
	},
	# Default SchedulingPolicies
	"restricted": {"allowed": {"schedulerNames": ["default-scheduler"]}},
	"restricted-multiarch-by-node-selector": {
		"required": {
			"schedulerNames": ["default-scheduler"],
			"nodeSelectors": {arch: ["amd64", "arm64"], os: ["Linux", "Windows"]},
		},
		"default": {"schedulerName": "default-scheduler", "nodeSelector": {arch: "amd64", os: "Linux"}},
	},
	"restricted-multiarch-by-affinity": {
		"required": {
			"schedulerNames": ["default-scheduler"],
			"affinities": {"nodeAffinities": {required_kind: {"nodeSelectorTerms": [
				{"matchExpressions": [{"keys": [arch], "operators": ["In"], "values": ["amd64", "arm64"]}]},
				{"matchExpressions": [{"keys": [os], "operators": ["In"], "values": ["Linux", "Windows"]}]},
			]}}},
		},
		"default": {
			"schedulerName": "default-scheduler",
			"affinity": {"nodeAffinity": {required_kind: {"nodeSelectorTerms": [
				{"matchExpressions": [{"key": arch, "operator": "In", "values": ["amd64"]}]},
				{"matchExpressions": [{"key": os, "operator": "In", "values": ["Linux"]}]},
			]}}},
		},
	},
	"privileged": {"allowed": {
		"schedulerNames": [],
		"priorityClasseNames": [],
		"nodeSelectors": {},
		"tolerations": [],
		"affinities": {},
	}},
}

# What the design calls invalid, and the field each names.
invalid := {
	"required-empty-schedulers": [{"required": {"schedulerNames": []}}, "spec.required.schedulerNames: an empty list requires nothing"],
	"required-empty-priorities": [{"required": {"priorityClasseNames": []}}, "spec.required.priorityClasseNames: an empty list requires nothing"],
	"default-empty-tolerations": [{"default": {"tolerations": []}}, "spec.default.tolerations: an empty list injects nothing"],
	"allowed-affinities-at-top": [{"allowedAffinities": {"nodeAffinities": {}}}, "spec.allowedAffinities: not a field; affinities are allowed under spec.allowed.affinities"],
}

policy(name, spec) := {
	"apiVersion": "scheduling.fedplace.io/v1alpha1",
	"kind": "SchedulingPolicy",
	"metadata": {"name": name},
	"spec": spec,
}

test_every_seed_example_is_valid if {
	every name, spec in specs {
		problems := validate.problems with input as policy(name, spec)
		count(problems) == 0
	}
}

test_what_the_seed_calls_invalid_is_refused_naming_the_field if {
	every name, example in invalid {
		problems := validate.problems with input as policy(name, example[0])
		some p in problems
		startswith(p, example[1])
	}
}
