package istiogen

// The small mesh every scenario runs in, as Kubernetes objects istiod's kube registry reads
// (Services, a headless Service, Pods with sidecar labels, EndpointSlices). The addresses are the
// ones the manifests' example snapshots use, so a connection Istio's simulation sends to a chain
// is one the filter in that chain knows.

import (
	"fmt"
	"strings"
)

type meshPod struct {
	namespace, name, ip, serviceAccount string
	labels                              map[string]string
	sidecar                             bool
}

type meshService struct {
	namespace, name string
	clusterIP       string // "None": headless
	port, target    int
	portName        string
	selector        string // value of label app
}

// The client pod carries every filter's opt-in label; each scenario loads one filter's manifests
// only, so only that filter's selector matters.
var clientLabels = map[string]string{
	"app":                               "sleep",
	"mesh.example.com/passthrough-mtls": "enabled",
	"mesh.example.com/tunnel-port":      "enabled",
	"mesh.example.com/waypoint-route":   "net1.us-east1-b",
}

var serverLabels = map[string]string{
	"app":                                "my-service",
	"mesh.example.com/tunnel-port":       "enabled",
	"statefulset.kubernetes.io/pod-name": "my-service-0",
}

const (
	clientIP = "10.244.1.5"
	serverIP = "10.244.1.21"
	// The mesh feed, as charts/mesh-feed deploys it with istio.enabled (release mesh-feed in
	// namespace mesh-feed): its pod labels, service account and Service port http-channel.
	feedIP = "10.244.1.50"
)

var feedLabels = map[string]string{
	"app":                        "mesh-feed",
	"app.kubernetes.io/name":     "mesh-feed",
	"app.kubernetes.io/instance": "mesh-feed",
}

var meshPods = []meshPod{
	{"default", "sleep-0", clientIP, "sleep", clientLabels, true},
	{"default", "httpbin-6d5f8c7b9-k2x7q", "10.244.1.17", "httpbin", map[string]string{"app": "httpbin"}, true},
	{"default", "legacy-0", "10.244.2.9", "default", map[string]string{"app": "legacy"}, false},
	{"data", "postgres-0", "10.244.3.4", "postgres", map[string]string{"app": "postgres"}, true},
	{"data", "postgres-1", "10.244.1.30", "postgres", map[string]string{"app": "postgres"}, true},
	{"default", "my-service-0", serverIP, "my-service", serverLabels, true},
	{"default", "my-service-1", "10.244.2.22", "my-service", map[string]string{"app": "my-service"}, true},
	{"mesh-feed", "mesh-feed-0", feedIP, "mesh-feed", feedLabels, true},
}

var meshServices = []meshService{
	{"default", "httpbin", "10.96.0.10", 8000, 8080, "tcp-http", "httpbin"},
	{"default", "legacy", "10.96.0.11", 7000, 7000, "tcp", "legacy"},
	{"data", "postgres", "None", 5432, 5432, "tcp-postgres", "postgres"},
	{"default", "my-service", "10.96.10.1", 80, 9376, "tcp-web", "my-service"},
	{"mesh-feed", "mesh-feed", "10.96.20.1", 9443, 9443, "http-channel", "mesh-feed"},
}

func labelsYAML(indent string, labels map[string]string) string {
	var b strings.Builder
	for k, v := range labels {
		fmt.Fprintf(&b, "%s%s: %q\n", indent, k, v)
	}
	return b.String()
}

// kubernetesObjects renders the mesh as YAML for FakeOptions.KubernetesObjectString.
func kubernetesObjects() string {
	var docs []string
	for _, ns := range []string{"default", "data", "istio-system", "mesh-feed"} {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns))
	}
	for _, p := range meshPods {
		labels := map[string]string{}
		for k, v := range p.labels {
			labels[k] = v
		}
		annotations := ""
		if p.sidecar {
			// What the injector sets: the tlsMode label makes the endpoint mTLS-capable.
			labels["security.istio.io/tlsMode"] = "istio"
			annotations = "  annotations:\n    sidecar.istio.io/status: '{\"containers\":[\"istio-proxy\"]}'\n"
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels:
%s%sspec:
  serviceAccountName: %s
  nodeName: node-1
  containers:
  - name: app
    image: example
status:
  phase: Running
  podIP: %s
  podIPs:
  - ip: %s
  conditions:
  - type: Ready
    status: "True"
`, p.name, p.namespace, labelsYAML("    ", labels), annotations, p.serviceAccount, p.ip, p.ip))
	}
	for _, s := range meshServices {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  clusterIP: %s
  selector:
    app: %s
  ports:
  - name: %s
    port: %d
    targetPort: %d
    protocol: TCP
`, s.name, s.namespace, s.clusterIP, s.selector, s.portName, s.port, s.target))
		var endpoints strings.Builder
		for _, p := range meshPods {
			if p.namespace != s.namespace || p.labels["app"] != s.selector {
				continue
			}
			fmt.Fprintf(&endpoints, `- addresses:
  - %s
  conditions:
    ready: true
  targetRef:
    kind: Pod
    name: %s
    namespace: %s
`, p.ip, p.name, p.namespace)
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s-abc
  namespace: %s
  labels:
    kubernetes.io/service-name: %s
addressType: IPv4
ports:
- name: %s
  port: %d
  protocol: TCP
endpoints:
%s`, s.name, s.namespace, s.name, s.portName, s.target, endpoints.String()))
	}
	return strings.Join(docs, "---\n")
}
