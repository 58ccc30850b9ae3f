{{/* The image reference: by digest when one is given, else by tag (the chart's appVersion by default). */}}
{{- define "mesh-feed.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "mesh-feed.labels" -}}
app.kubernetes.io/name: mesh-feed
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "mesh-feed.selector" -}}
app.kubernetes.io/name: mesh-feed
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The namespaces holding WasmPlugins the feed writes, each once. */}}
{{- define "mesh-feed.wasmPluginNamespaces" -}}
{{- $seen := dict -}}
{{- range .Values.config.targets -}}
{{- if .wasmPlugin -}}{{- $_ := set $seen .wasmPlugin.namespace "" -}}{{- end -}}
{{- end -}}
{{- keys $seen | sortAlpha | join " " -}}
{{- end -}}

{{/* The operator port binds the pod's loopback unless Prometheus scrapes it directly (in Istio,
pilot-agent's metrics merging reads it on localhost). */}}
{{- define "mesh-feed.operatorAddress" -}}
{{- if and .Values.metrics.scrape (not .Values.istio.enabled) -}}0.0.0.0{{- else -}}127.0.0.1{{- end -}}
{{- end -}}

{{/* The channel port's name: Istio treats `http-` as HTTP (its inbound sidecar then sets
x-forwarded-client-cert); the feed's own mutual TLS is `https-`. */}}
{{- define "mesh-feed.channelPortName" -}}
{{- if .Values.istio.enabled -}}http-channel{{- else -}}https-channel{{- end -}}
{{- end -}}

{{/* Every target's readers, each once: the principals the AuthorizationPolicy admits to the channel. */}}
{{- define "mesh-feed.readers" -}}
{{- $seen := dict -}}
{{- range .Values.config.targets -}}
{{- range (.readers | default list) -}}{{- $_ := set $seen . "" -}}{{- end -}}
{{- end -}}
{{- keys $seen | sortAlpha | toJson -}}
{{- end -}}
