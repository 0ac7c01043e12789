{{/* Names and labels shared by every object of the chart. */}}
{{- define "jq.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "jq.labels" -}}
app.kubernetes.io/name: jq
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: include "jq.selector" (list . "server") */}}
{{- define "jq.selector" -}}
app.kubernetes.io/name: jq
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "jq.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "jq.secretName" -}}
{{ .Values.secrets.existingSecret | default (printf "%s-secrets" (include "jq.fullname" .)) }}
{{- end -}}

{{/* An env var from the Secret, optional so an unset key just leaves the setting empty. */}}
{{- define "jq.secretEnv" -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ include "jq.secretName" (index . 0) }}
      key: {{ index . 2 }}
      optional: true
{{- end -}}

{{/* Extra JQ_ settings of a component (<component>.env). */}}
{{- define "jq.extraEnv" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{- define "jq.containerSecurity" -}}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
{{- end -}}

{{/* /tmp is the only writable path (the root filesystem is read-only). */}}
{{- define "jq.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* The server replicas' API addresses, for workers and the producer. */}}
{{- define "jq.serverAddr" -}}
{{ include "jq.fullname" . }}-server:50051
{{- end -}}
