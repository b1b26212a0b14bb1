{{/*
Shared pieces of the lwgpu templates. Object names are fixed (lwgpu-*), as in deploy/: the
webhook configurations are cluster-scoped, so a cluster runs one lwgpu install.
*/}}

{{/* Labels on every object's metadata: kustomize's part-of, and Helm's own. */}}
{{- define "lwgpu.labels" -}}
app.kubernetes.io/part-of: lwgpu
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The image reference: repository:tag, and @digest when one is set. */}}
{{- define "lwgpu.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- if .Values.image.digest }}{{ $ref = printf "%s@%s" $ref .Values.image.digest }}{{ end -}}
image: {{ $ref }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- end }}

{{/*
checkov's skips of a workload (dict "root" $ "token" "<why this pod needs its token>", none
where it mounts none, "what" "<what a registry outage would hold>", and "more": a dict of
further annotations). The digest skips go away once image.digest is set.
*/}}
{{- define "lwgpu.checkovSkips" -}}
# Findings of checkov that are choices, with the reason (tests/deploy/test_scanners.py).
annotations:
  {{- if not .root.Values.image.digest }}
  checkov.io/skip1: CKV_K8S_43=no digest is published for this tag yet; pin one with kustomize images or the chart's image.digest
  checkov.io/skip2: CKV_K8S_15=IfNotPresent on a pinned tag; Always would make every {{ .what }} depend on the registry
  {{- end }}
  {{- with .token }}
  checkov.io/skip3: CKV_K8S_38={{ . }}
  {{- end }}
  {{- range $key, $value := .more }}
  {{ $key }}: {{ $value | quote }}
  {{- end }}
{{- end }}

{{/*
The policy the webhook serves: the `policy` value, or the shipped policies/default.yaml (its
copy in files/) where it is not set (null). Set but blank fails the render: an empty
`--set-file` is a mistake, never a request for the shipped policy.
*/}}
{{- define "lwgpu.policy" -}}
{{- if kindIs "invalid" .Values.policy -}}
{{ .Files.Get "files/default.yaml" }}
{{- else if not (trim .Values.policy) -}}
{{ fail "policy is set but empty (an empty file given to --set-file policy=...?): give LightweightGPUPolicy YAML (docs/POLICY.md), or leave policy unset for the shipped policies/default.yaml" }}
{{- else -}}
{{ .Values.policy }}
{{- end -}}
{{- end }}

{{/* Pod Security `restricted` for a pod, as every pod of the install runs. */}}
{{- define "lwgpu.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "lwgpu.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop: [ALL]
{{- end }}

{{/*
A ClusterRole bound to the release namespace's ServiceAccount of the same name, or of
"account" where given.
*/}}
{{- define "lwgpu.clusterRoleBinding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}
  labels:
    {{- include "lwgpu.labels" .root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ .name }}
subjects:
- kind: ServiceAccount
  name: {{ .account | default .name }}
  namespace: {{ .root.Release.Namespace }}
{{- end }}

{{/* A Role bound to the release namespace's ServiceAccount of the same name. */}}
{{- define "lwgpu.roleBinding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "lwgpu.labels" .root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
- kind: ServiceAccount
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
{{- end }}

{{- define "lwgpu.serviceAccount" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "lwgpu.labels" .root | nindent 4 }}
{{- end }}

{{/*
The objects of a file of deploy/ (dict "root" $ "text" <its text>, from .Files.Get of its copy
in files/), each with the chart's labels: one source for both installs.
*/}}
{{- define "lwgpu.deployObjects" -}}
{{- range regexSplit "(?m)^---$" .text -1 }}
{{- $obj := fromYaml . }}
{{- $_ := set $obj.metadata "labels" (include "lwgpu.labels" $.root | fromYaml) }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
