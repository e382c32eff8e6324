{{- /*
The chart builds its objects from the kustomize sources, as `kubectl kustomize`
does, for the subset of kustomize that deploy/ uses:

  resources        YAML files (multi-document)
  labels           pairs, includeSelectors: false (metadata.labels only)
  configMapGenerator  files: key=path (no hash suffix: see fedplace.objects)
  patches          path: or patch:, with a target (group, version, kind, name,
                   namespace, labelSelector "!key"); a YAML list is a JSON patch
                   (RFC 6902: test, add, replace, remove), a map a strategic
                   merge patch limited to merging maps and `$patch: delete`
  images           name -> newName / newTag

Anything else in a kustomization the chart reads fails the render, naming it, so
a change to deploy/ that the chart does not understand cannot pass unseen
(tests/deploy/test_helm.py renders every component). Objects pass between
helpers as JSON ({"r": value}): Go templates return strings only.
*/ -}}

{{- /* fedplace.namespace: a namespace of deploy/ as the values name it (opa, kube-federation-scheduling-policy). (list $ name) */ -}}
{{- define "fedplace.namespace" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- if eq $name "opa" -}}{{- $root.Values.namespaces.opa -}}
{{- else if eq $name "kube-federation-scheduling-policy" -}}{{- $root.Values.namespaces.policy -}}
{{- else -}}{{- $name -}}{{- end -}}
{{- end -}}

{{- /* fedplace.file: a file of files/ (copies of deploy/), with deploy/'s two namespaces renamed as
     the values name them, wherever deploy/ writes a namespace: metadata, targets and subjects
     (namespace: opa), list items (the webhook's exempt namespaces), Service host names
     (x.opa.svc), comma lists of flags, service account user names, cert-manager's
     inject-ca-from and kubectl commands in texts; the policy namespace's distinctive name
     everywhere. Namespace objects are renamed by fedplace.yaml. (list $ path) -> text */ -}}
{{- define "fedplace.file" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
{{- $text := $root.Files.Get $path -}}
{{- if not $text -}}
{{- fail (printf "%s is missing or empty: the chart's files/ are copies of deploy/ (deploy/scripts/sync-helm-files.py)" $path) -}}
{{- end -}}
{{- $ns := $root.Values.namespaces -}}
{{- $text = replace "kube-federation-scheduling-policy" $ns.policy $text -}}
{{- if ne $ns.opa "opa" -}}
{{- $text = regexReplaceAll "(?m)(namespace: +)opa$" $text (printf "${1}%s" $ns.opa) -}}
{{- $text = regexReplaceAll "(?m)^(\\s*- +)opa$" $text (printf "${1}%s" $ns.opa) -}}
{{- $text = regexReplaceAll "\\.opa\\.svc\\b" $text (printf ".%s.svc" $ns.opa) -}}
{{- $text = regexReplaceAll "(?m)([=,])opa(,|$)" $text (printf "${1}%s${2}" $ns.opa) -}}
{{- $text = replace "system:serviceaccount:opa:" (printf "system:serviceaccount:%s:" $ns.opa) $text -}}
{{- $text = regexReplaceAll "(inject-ca-from: +\"?)opa/" $text (printf "${1}%s/" $ns.opa) -}}
{{- $text = regexReplaceAll "-n opa\\b" $text (printf "-n %s" $ns.opa) -}}
{{- end -}}
{{- $text -}}
{{- end -}}

{{- /* fedplace.yaml: the objects of a multi-document YAML file of the chart. (list $ path) -> {"r": [objects]} */ -}}
{{- define "fedplace.yaml" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
{{- $text := include "fedplace.file" (list $root $path) -}}
{{- $items := list -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $text -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if hasKey $obj "Error" -}}
{{- fail (printf "%s: %s" $path $obj.Error) -}}
{{- end -}}
{{- if $obj -}}
{{- if eq $obj.kind "Namespace" -}}
{{- $_ := set $obj.metadata "name" (include "fedplace.namespace" (list $root $obj.metadata.name)) -}}
{{- end -}}
{{- $items = append $items $obj -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "r" $items) -}}
{{- end -}}

{{- /* fedplace.kustomization: a kustomization.yaml, checked for fields the chart knows. (list $ dir) -> {"r": {...}} */ -}}
{{- define "fedplace.kustomization" -}}
{{- $root := index . 0 -}}
{{- $dir := index . 1 -}}
{{- $k := index (include "fedplace.yaml" (list $root (printf "%s/kustomization.yaml" $dir)) | fromJson).r 0 -}}
{{- range $field, $_ := $k -}}
{{- if not (has $field (list "apiVersion" "kind" "resources" "components" "patches" "labels" "configMapGenerator" "secretGenerator" "images")) -}}
{{- fail (printf "%s/kustomization.yaml: the chart does not interpret %q" $dir $field) -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "r" $k) -}}
{{- end -}}

{{- /* fedplace.group: the API group of an object ("" for core). */ -}}
{{- define "fedplace.group" -}}
{{- if contains "/" .apiVersion -}}{{- first (splitList "/" .apiVersion) -}}{{- end -}}
{{- end -}}

{{- /* fedplace.matches: "true" if an object is a kustomize patch target. (dict root obj target) */ -}}
{{- define "fedplace.matches" -}}
{{- $obj := .obj -}}
{{- $t := .target -}}
{{- $ok := true -}}
{{- range $field, $want := $t -}}
{{- if eq $field "group" -}}
{{- $ok = and $ok (eq (include "fedplace.group" $obj) $want) -}}
{{- else if eq $field "version" -}}
{{- $ok = and $ok (eq (last (splitList "/" $obj.apiVersion)) $want) -}}
{{- else if eq $field "kind" -}}
{{- $ok = and $ok (eq $obj.kind $want) -}}
{{- else if eq $field "name" -}}
{{- $ok = and $ok (eq $obj.metadata.name (ternary (include "fedplace.namespace" (list $.root $want)) $want (eq $obj.kind "Namespace"))) -}}
{{- else if eq $field "namespace" -}}
{{- $ok = and $ok (eq ($obj.metadata.namespace | default "") $want) -}}
{{- else if and (eq $field "labelSelector") (hasPrefix "!" $want) (not (contains "," $want)) -}}
{{- $ok = and $ok (not (hasKey ($obj.metadata.labels | default dict) (trimPrefix "!" $want))) -}}
{{- else -}}
{{- fail (printf "patch target %s: %v is not interpreted by the chart" $field $want) -}}
{{- end -}}
{{- end -}}
{{- if $ok -}}true{{- end -}}
{{- end -}}

{{- /* fedplace.at: one JSON patch operation at a path below a value. (dict doc path op value where) -> {"r": doc} */ -}}
{{- define "fedplace.at" -}}
{{- $doc := .doc -}}
{{- $key := first .path -}}
{{- $where := .where -}}
{{- if kindIs "slice" $doc -}}
{{- $n := len $doc -}}
{{- $i := 0 -}}
{{- if eq $key "-" -}}
{{- $i = $n -}}
{{- else if regexMatch "^(0|[1-9][0-9]*)$" $key -}}
{{- $i = atoi $key -}}
{{- else -}}
{{- fail (printf "%s: %q is not a list index" $where $key) -}}
{{- end -}}
{{- if gt (len .path) 1 -}}
{{- if ge $i $n -}}{{- fail (printf "%s: index %s out of range" $where $key) -}}{{- end -}}
{{- $child := (include "fedplace.at" (dict "doc" (index $doc $i) "path" (rest .path) "op" .op "value" .value "where" $where) | fromJson).r -}}
{{- $doc = concat (slice $doc 0 $i) (list $child) (slice $doc (add1 $i)) -}}
{{- else if eq .op "add" -}}
{{- if gt $i $n -}}{{- fail (printf "%s: index %s out of range" $where $key) -}}{{- end -}}
{{- $doc = concat (slice $doc 0 $i) (list .value) (slice $doc $i) -}}
{{- else -}}
{{- if ge $i $n -}}{{- fail (printf "%s: index %s out of range" $where $key) -}}{{- end -}}
{{- if eq .op "test" -}}
{{- if ne (toJson (index $doc $i)) (toJson .value) -}}
{{- fail (printf "%s: test failed: %s is not %s" $where (toJson (index $doc $i)) (toJson .value)) -}}
{{- end -}}
{{- else if eq .op "replace" -}}
{{- $doc = concat (slice $doc 0 $i) (list .value) (slice $doc (add1 $i)) -}}
{{- else if eq .op "remove" -}}
{{- $doc = concat (slice $doc 0 $i) (slice $doc (add1 $i)) -}}
{{- end -}}
{{- end -}}
{{- else if kindIs "map" $doc -}}
{{- if gt (len .path) 1 -}}
{{- if not (hasKey $doc $key) -}}{{- fail (printf "%s: no %q" $where $key) -}}{{- end -}}
{{- $child := (include "fedplace.at" (dict "doc" (index $doc $key) "path" (rest .path) "op" .op "value" .value "where" $where) | fromJson).r -}}
{{- $_ := set $doc $key $child -}}
{{- else if eq .op "add" -}}
{{- $_ := set $doc $key .value -}}
{{- else if not (hasKey $doc $key) -}}
{{- fail (printf "%s: no %q" $where $key) -}}
{{- else if eq .op "test" -}}
{{- if ne (toJson (index $doc $key)) (toJson .value) -}}
{{- fail (printf "%s: test failed: %s is not %s" $where (toJson (index $doc $key)) (toJson .value)) -}}
{{- end -}}
{{- else if eq .op "replace" -}}
{{- $_ := set $doc $key .value -}}
{{- else if eq .op "remove" -}}
{{- $_ := unset $doc $key -}}
{{- end -}}
{{- else -}}
{{- fail (printf "%s: cannot descend into %s" $where (toJson $doc)) -}}
{{- end -}}
{{- toJson (dict "r" $doc) -}}
{{- end -}}

{{- /* fedplace.jsonpatch: an RFC 6902 patch applied to an object. (dict obj ops where) -> {"r": obj} */ -}}
{{- define "fedplace.jsonpatch" -}}
{{- $obj := .obj -}}
{{- range $i, $op := .ops -}}
{{- if not (has $op.op (list "test" "add" "replace" "remove")) -}}
{{- fail (printf "%s: JSON patch operation %q is not interpreted by the chart" $.where $op.op) -}}
{{- end -}}
{{- $path := list -}}
{{- range $seg := rest (splitList "/" $op.path) -}}
{{- $path = append $path (replace "~0" "~" (replace "~1" "/" $seg)) -}}
{{- end -}}
{{- $where := printf "%s, operation %d (%s %s) on %s %s" $.where $i $op.op $op.path $obj.kind $obj.metadata.name -}}
{{- $obj = (include "fedplace.at" (dict "doc" $obj "path" $path "op" $op.op "value" $op.value "where" $where) | fromJson).r -}}
{{- end -}}
{{- toJson (dict "r" $obj) -}}
{{- end -}}

{{- /* fedplace.merge: a strategic merge patch of maps only (lists are not merged). (dict obj patch where) -> {"r": obj} */ -}}
{{- define "fedplace.merge" -}}
{{- $obj := .obj -}}
{{- range $k, $v := .patch -}}
{{- if and (kindIs "map" $v) (kindIs "map" (index $obj $k)) -}}
{{- $_ := set $obj $k (include "fedplace.merge" (dict "obj" (index $obj $k) "patch" $v "where" $.where) | fromJson).r -}}
{{- else if kindIs "slice" $v -}}
{{- fail (printf "%s: the chart merges maps only, not the list %q" $.where $k) -}}
{{- else -}}
{{- $_ := set $obj $k $v -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "r" $obj) -}}
{{- end -}}

{{- /* fedplace.patch: one kustomize patch on a list of objects. (dict root dir patch objs) -> {"r": objs} */ -}}
{{- define "fedplace.patch" -}}
{{- $entry := .patch -}}
{{- $where := printf "%s/kustomization.yaml, patch %s" .dir ($entry.path | default "(inline)") -}}
{{- $body := "" -}}
{{- if $entry.path -}}
{{- $body = include "fedplace.file" (list .root (printf "%s/%s" .dir $entry.path)) -}}
{{- else -}}
{{- $body = $entry.patch -}}
{{- end -}}
{{- $smp := fromYaml $body -}}
{{- $ops := list -}}
{{- $isList := hasKey $smp "Error" -}}
{{- if $isList -}}
{{- $ops = fromYamlArray $body -}}
{{- if and (eq (len $ops) 1) (kindIs "string" (index $ops 0)) -}}
{{- fail (printf "%s: neither a JSON patch nor a strategic merge patch: %s" $where (index $ops 0)) -}}
{{- end -}}
{{- end -}}
{{- if not $entry.target -}}{{- fail (printf "%s: the chart needs a target" $where) -}}{{- end -}}
{{- $out := list -}}
{{- range $obj := .objs -}}
{{- if include "fedplace.matches" (dict "root" $.root "obj" $obj "target" $entry.target) -}}
{{- if $isList -}}
{{- $out = append $out (include "fedplace.jsonpatch" (dict "obj" $obj "ops" $ops "where" $where) | fromJson).r -}}
{{- else if eq (index $smp "$patch" | default "") "delete" -}}
{{- /* deleted */ -}}
{{- else -}}
{{- $patch := omit $smp "apiVersion" "kind" -}}
{{- if hasKey $patch "metadata" -}}
{{- $patch = set $patch "metadata" (omit $patch.metadata "name" "namespace") -}}
{{- end -}}
{{- $out = append $out (include "fedplace.merge" (dict "obj" $obj "patch" $patch "where" $where) | fromJson).r -}}
{{- end -}}
{{- else -}}
{{- $out = append $out $obj -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "r" $out) -}}
{{- end -}}

{{- /* fedplace.generate: the ConfigMaps of a configMapGenerator. (dict root dir generators) -> {"r": [objects]} */ -}}
{{- define "fedplace.generate" -}}
{{- $out := list -}}
{{- range $gen := .generators -}}
{{- range $field, $_ := $gen -}}
{{- if not (has $field (list "name" "namespace" "files" "options")) -}}
{{- fail (printf "%s/kustomization.yaml: configMapGenerator %s: %q is not interpreted by the chart" $.dir $gen.name $field) -}}
{{- end -}}
{{- end -}}
{{- $data := dict -}}
{{- range $file := $gen.files -}}
{{- $key := base $file -}}
{{- $path := $file -}}
{{- if contains "=" $file -}}
{{- $key = first (splitList "=" $file) -}}
{{- $path = last (splitList "=" $file) -}}
{{- end -}}
{{- $text := include "fedplace.file" (list $.root (printf "%s/%s" $.dir $path)) -}}
{{- $_ := set $data $key $text -}}
{{- end -}}
{{- $meta := dict "name" $gen.name -}}
{{- if $gen.namespace -}}{{- $_ := set $meta "namespace" $gen.namespace -}}{{- end -}}
{{- $options := $gen.options | default dict -}}
{{- with $options.labels -}}{{- $_ := set $meta "labels" . -}}{{- end -}}
{{- with $options.annotations -}}{{- $_ := set $meta "annotations" . -}}{{- end -}}
{{- $out = append $out (dict "apiVersion" "v1" "kind" "ConfigMap" "metadata" $meta "data" $data) -}}
{{- end -}}
{{- toJson (dict "r" $out) -}}
{{- end -}}

{{- /* fedplace.component: a component's objects added to objs and its patches applied, as kustomize
     does for a component listed in an overlay; or an overlay's, on objs its base (a "../"
     resource) built. Custom resources of a CRD the component itself installs are left out until
     the API server serves them (see values.yaml, packs.schedulingpolicy).
     (dict root dir objs) -> {"r": objs} */ -}}
{{- define "fedplace.component" -}}
{{- $dir := .dir -}}
{{- $k := (include "fedplace.kustomization" (list .root $dir) | fromJson).r -}}
{{- $objs := .objs -}}
{{- $new := list -}}
{{- range $res := $k.resources -}}
{{- if not (hasPrefix "../" $res) -}}
{{- $new = concat $new (include "fedplace.yaml" (list $.root (printf "%s/%s" $dir $res)) | fromJson).r -}}
{{- end -}}
{{- end -}}
{{- $groups := list -}}
{{- range $obj := $new -}}
{{- if eq $obj.kind "CustomResourceDefinition" -}}
{{- range $v := $obj.spec.versions -}}
{{- $groups = append $groups (printf "%s/%s/%s" $obj.spec.group $v.name $obj.spec.names.kind) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $obj := $new -}}
{{- $gvk := printf "%s/%s" $obj.apiVersion $obj.kind -}}
{{- if or (not (has $gvk $groups)) ($.root.Capabilities.APIVersions.Has $gvk) -}}
{{- $objs = append $objs $obj -}}
{{- end -}}
{{- end -}}
{{- if $k.configMapGenerator -}}
{{- $objs = concat $objs (include "fedplace.generate" (dict "root" .root "dir" $dir "generators" $k.configMapGenerator) | fromJson).r -}}
{{- end -}}
{{- range $p := $k.patches -}}
{{- $objs = (include "fedplace.patch" (dict "root" $.root "dir" $dir "patch" $p "objs" $objs) | fromJson).r -}}
{{- end -}}
{{- /* An overlay's components (cert-manager's: cluster-crd) are the values' to pick. */ -}}
{{- if or (and $k.components (ne $k.kind "Kustomization")) $k.secretGenerator $k.labels $k.images -}}
{{- fail (printf "%s/kustomization.yaml: components, secretGenerator, labels and images of a component are not interpreted by the chart" $dir) -}}
{{- end -}}
{{- toJson (dict "r" $objs) -}}
{{- end -}}

{{- /* fedplace.image: the fedplace image: image.repository (required: the image is not published)
     and image.tag (empty: the chart's appVersion; sha256:... pins a digest). */ -}}
{{- define "fedplace.image" -}}
{{- $repo := required "image.repository is required: the fedplace image is not published to a public registry. Build it from the repository's Dockerfile, push it to a registry your cluster pulls from, and set image.repository (deploy/helm/fedplace/README.md, \"The image\")" .Values.image.repository -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if hasPrefix "sha256:" $tag -}}{{- printf "%s@%s" $repo $tag -}}{{- else -}}{{- printf "%s:%s" $repo $tag -}}{{- end -}}
{{- end -}}

{{- /* fedplace.podValues: a component's pod values applied, in place, to a pod template:
       podAnnotations  added (yours win)        podLabels  added (deploy/'s win: selectors)
       imagePullSecrets  the global ones, then the component's, after deploy/'s
       nodeSelector  added (yours win)          tolerations  appended
       affinity  replaces deploy/'s             priorityClassName  set
       podSecurityContext  its keys replace deploy/'s, one level deep
     and, per container named in containers: resources (replace) and securityContext (its keys
     replace deploy/'s, one level deep). (dict template values pullSecrets containers) */ -}}
{{- define "fedplace.podValues" -}}
{{- $v := .values -}}
{{- $meta := .template.metadata -}}
{{- $spec := .template.spec -}}
{{- with $v.podAnnotations -}}{{- $_ := set $meta "annotations" (merge (deepCopy .) ($meta.annotations | default dict)) -}}{{- end -}}
{{- with $v.podLabels -}}{{- $_ := set $meta "labels" (merge (deepCopy ($meta.labels | default dict)) .) -}}{{- end -}}
{{- with concat (.pullSecrets | default list) ($v.imagePullSecrets | default list) -}}
{{- $_ := set $spec "imagePullSecrets" (concat ($spec.imagePullSecrets | default list) .) -}}
{{- end -}}
{{- with $v.nodeSelector -}}{{- $_ := set $spec "nodeSelector" (merge (deepCopy .) ($spec.nodeSelector | default dict)) -}}{{- end -}}
{{- with $v.tolerations -}}{{- $_ := set $spec "tolerations" (concat ($spec.tolerations | default list) .) -}}{{- end -}}
{{- with $v.affinity -}}{{- $_ := set $spec "affinity" . -}}{{- end -}}
{{- with $v.priorityClassName -}}{{- $_ := set $spec "priorityClassName" . -}}{{- end -}}
{{- with $v.podSecurityContext -}}
{{- $sc := deepCopy ($spec.securityContext | default dict) -}}
{{- range $k, $x := . -}}{{- $_ := set $sc $k $x -}}{{- end -}}
{{- $_ := set $spec "securityContext" $sc -}}
{{- end -}}
{{- range $c := $spec.containers -}}
{{- $cv := index $.containers $c.name | default dict -}}
{{- with $cv.resources -}}{{- $_ := set $c "resources" . -}}{{- end -}}
{{- with $cv.securityContext -}}
{{- $sc := deepCopy ($c.securityContext | default dict) -}}
{{- range $k, $x := . -}}{{- $_ := set $sc $k $x -}}{{- end -}}
{{- $_ := set $c "securityContext" $sc -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* fedplace.containerSecurity: a container's securityContext, as every container of deploy/base has it. */ -}}
{{- define "fedplace.containerSecurity" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
