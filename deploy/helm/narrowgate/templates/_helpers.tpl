{{/* The release's resource names: "<release>-narrowgate", or the release name if it already says so. */}}
{{- define "narrowgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "narrowgate.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "narrowgate.labels" -}}
{{ include "narrowgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret holding the API keys and the Redis/PostgreSQL URLs. */}}
{{- define "narrowgate.secretName" -}}
{{- default (include "narrowgate.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{/*
narrowgate.yaml: the values' `config` with what the chart decides: where the contracts are,
the shared state, and where receipts go. URLs are ${VAR} references to the Secret's variables,
which the gateway expands when it loads (and reloads) the file.
*/}}
{{- define "narrowgate.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $_ := set $config "contracts" "/etc/narrowgate/contracts" -}}
{{- $_ := unset $config "listen" -}}
{{- if .Values.redis.url -}}
{{- $_ := set $config "state" "${NARROWGATE_REDIS_URL}" -}}
{{- else -}}
{{- $_ := unset $config "state" -}}
{{- end -}}
{{- $receipts := deepCopy (default dict $config.receipts) -}}
{{- if .Values.postgresql.url -}}
{{- $_ := unset $receipts "path" -}}
{{- $_ := set $receipts "url" "${NARROWGATE_POSTGRES_URL}" -}}
{{- else -}}
{{- $_ := unset $receipts "url" -}}
{{- $_ := set $receipts "path" "/var/lib/narrowgate/receipts.db" -}}
{{- end -}}
{{- $_ := set $config "receipts" $receipts -}}
{{- toYaml $config -}}
{{- end -}}
