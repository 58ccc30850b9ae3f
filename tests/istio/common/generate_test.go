package istiogen

// Runs istiod's own configuration generation (pilot/test/xds's fake discovery server: the real
// kube registry, config store, push context, listener/cluster builders, EnvoyFilter patcher and
// ECDS generator) on the mesh of mesh.go plus one filter's manifests from istio/, for each
// install route, and dumps what a sidecar would receive: listeners, clusters, the ECDS resources
// its listeners reference (as istiod serves them, and as pilot-agent rewrites them for Envoy,
// both when the module can be fetched and when it cannot), and Istio's own traffic simulation of
// a set of connections. The TypeScript tests (tests/istio/*.test.ts) assert on the dump.
//
// Inputs (environment): ISTIO_ERA (the dump's directory name), ISTIO_OUT (where to write),
// REPO_ROOT (to read istio/ and build/<filter>.wasm).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/simulation"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	"istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/util/protomarshal"
	"istio.io/istio/pkg/util/sets"
	"istio.io/istio/pkg/wasm"
)

type proxySpec struct {
	name   string // directory name of the dump
	pod    string
	ip     string
	labels map[string]string
	// The proxy's own Istio version (node metadata ISTIO_VERSION); "" = the era's.
	version string
	hbone   bool // node metadata ENABLE_HBONE, as the injector sets it in ambient-enabled meshes
}

type scenario struct {
	filter, route string
	files         []string // under istio/
	proxies       []proxySpec
}

var client = proxySpec{name: "client", pod: "sleep-0", ip: clientIP, labels: clientLabels}
var server = proxySpec{name: "server", pod: "my-service-0", ip: serverIP, labels: serverLabels}

func scenarios() []scenario {
	oldClient := client
	oldClient.name, oldClient.version = "client-proxy-1.29", "1.29.6"
	return []scenario{
		{"passthrough_mtls", "A", []string{"passthrough_mtls/envoyfilter.yaml", "passthrough_mtls/headless-destinationrule.yaml"}, []proxySpec{client}},
		// The README's PERMISSIVE claim: the headless service's cluster without the DestinationRule.
		{"passthrough_mtls", "A-without-destinationrule", []string{"passthrough_mtls/envoyfilter.yaml"}, []proxySpec{client}},
		{"passthrough_mtls", "B", []string{"passthrough_mtls/wasmplugin.yaml", "passthrough_mtls/cluster.yaml", "passthrough_mtls/catchall.yaml", "passthrough_mtls/headless-destinationrule.yaml"}, []proxySpec{client, oldClient}},
		{"tunnel_port", "A", []string{"tunnel_port/client-envoyfilter.yaml", "tunnel_port/server-envoyfilter.yaml"}, []proxySpec{client, server}},
		{"tunnel_port", "B", []string{"tunnel_port/wasmplugin.yaml", "tunnel_port/wasmplugin-hookup.yaml"}, []proxySpec{client, oldClient, server}},
		{"waypoint_route", "A", []string{"waypoint_route/envoyfilter.yaml"}, []proxySpec{client}},
		{"waypoint_route", "B", []string{"waypoint_route/wasmplugin.yaml"}, []proxySpec{client, oldClient}},
	}
}

type call struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Port    int    `json:"port"`
	Mode    string `json:"mode"`
}

// Connections Istio's simulation runs on every proxy's generated listeners.
var calls = []call{
	{"pod-ip-unknown-port", "10.244.1.17", 9999, "outbound"},
	{"pod-ip-target-port", "10.244.1.17", 8080, "outbound"},
	{"headless-pod", "10.244.3.4", 5432, "outbound"},
	{"headless-pod-other-port", "10.244.3.4", 6000, "outbound"},
	{"service-vip", "10.96.0.10", 8000, "outbound"},
	{"plain-pod", "10.244.2.9", 7000, "outbound"},
	{"tunnel-vip", "10.96.10.1", 80, "outbound"},
	{"tunnel-pod", serverIP, 9376, "outbound"},
	{"external", "203.0.113.7", 443, "outbound"},
	{"inbound-app", serverIP, 9376, "inbound"},
	{"inbound-hbone", serverIP, 15008, "inbound"},
}

type callResult struct {
	call
	Listener    string `json:"listener"`
	FilterChain string `json:"filterChain"`
	Cluster     string `json:"cluster"`
	Error       string `json:"error,omitempty"`
}

func env(t *testing.T, name string) string {
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set (scripts/istio-gen.sh sets it)", name)
	}
	return v
}

// eraVersion is the ISTIO_VERSION a proxy of this era reports (ISTIO_ERA "1.31" -> "1.31.0").
func eraVersion(era string) string { return era + ".0" }

func TestGenerate(t *testing.T) {
	if features.EnableAmbient {
		t.Fatal("TestGenerate models a sidecar-only istiod: run it without PILOT_ENABLE_AMBIENT")
	}
	runAll(t, "sidecar", scenarios())
}

// TestGenerateAmbient: the same istiod with ambient enabled (PILOT_ENABLE_AMBIENT=true, read by
// istiod's features at start-up, so it is a separate run of the test binary) and the server pod
// injected with ENABLE_HBONE, as in an ambient-enabled mesh: istiod then adds its own HBONE
// listener `connect_terminate` on 15008, where the tunnel_port server listens too.
func TestGenerateAmbient(t *testing.T) {
	if !features.EnableAmbient {
		t.Fatal("TestGenerateAmbient needs PILOT_ENABLE_AMBIENT=true in the environment (scripts/istio-gen.sh sets it)")
	}
	hboneServer, hboneClient := server, client
	hboneServer.hbone, hboneClient.hbone = true, true
	runAll(t, "ambient", []scenario{
		{"tunnel_port", "A", []string{"tunnel_port/client-envoyfilter.yaml", "tunnel_port/server-envoyfilter.yaml"}, []proxySpec{hboneServer, hboneClient}},
		{"tunnel_port", "B", []string{"tunnel_port/wasmplugin.yaml", "tunnel_port/wasmplugin-hookup.yaml"}, []proxySpec{hboneServer, hboneClient}},
	})
}

func runAll(t *testing.T, mode string, list []scenario) {
	era := env(t, "ISTIO_ERA")
	out := filepath.Join(env(t, "ISTIO_OUT"), mode)
	repo := env(t, "REPO_ROOT")
	// The mesh as Kubernetes YAML, for istioctl analyze (tests/istio/istioctl.test.ts).
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "mesh.yaml"), []byte(kubernetesObjects()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sc := range list {
		sc := sc
		t.Run(sc.filter+"/"+sc.route, func(t *testing.T) {
			var manifests []string
			for _, f := range sc.files {
				b, err := os.ReadFile(filepath.Join(repo, "istio", f))
				if err != nil {
					t.Fatal(err)
				}
				manifests = append(manifests, string(b))
			}
			s := xds.NewFakeDiscoveryServer(t, xds.FakeOptions{
				KubernetesObjectString: kubernetesObjects(),
				ConfigString:           strings.Join(manifests, "\n---\n"),
			})
			for _, ps := range sc.proxies {
				dir := filepath.Join(out, sc.filter, sc.route, ps.name)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				version := ps.version
				if version == "" {
					version = eraVersion(era)
				}
				generate(t, s, ps, version, repo, dir)
			}
		})
	}
}

func generate(t *testing.T, s *xds.FakeDiscoveryServer, ps proxySpec, version, repo, dir string) {
	ns := "default"
	proxy := s.SetupProxy(&model.Proxy{
		ID:              ps.pod + "." + ns,
		IPAddresses:     []string{ps.ip},
		ConfigNamespace: ns,
		Labels:          ps.labels,
		Metadata: &model.NodeMetadata{
			Namespace:    ns,
			Labels:       ps.labels,
			IstioVersion: version,
			ClusterID:    "Kubernetes",
			EnableHBONE:  model.StringBool(ps.hbone),
		},
	})
	listeners := s.Listeners(proxy)
	clusters := s.Clusters(proxy)
	routes := s.RoutesFromListeners(proxy, listeners)
	endpoints := s.Endpoints(proxy)

	// Every ECDS name a network filter of these listeners asks for.
	requested := sets.New[string]()
	for _, l := range listeners {
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			for _, f := range fc.GetFilters() {
				if f.GetConfigDiscovery() != nil {
					requested.Insert(f.GetName())
				}
			}
		}
	}
	gen := s.Discovery.Generators[v3.ExtensionConfigurationType]
	resources, _, err := gen.Generate(proxy, &model.WatchedResource{TypeUrl: v3.ExtensionConfigurationType, ResourceNames: requested},
		&model.PushRequest{Forced: true, Push: s.PushContext(), Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var served []*anypb.Any
	for _, r := range resources {
		served = append(served, r.Resource)
	}

	// What pilot-agent hands Envoy (pkg/wasm, the conversion its xDS proxy runs on every ECDS
	// response): the module fetched into its cache ...
	fetched := cloneAll(served)
	if err := wasm.MaybeConvertWasmExtensionConfig(fetched, localModules{repo}); err != nil {
		t.Fatalf("pilot-agent conversion: %v", err)
	}
	// ... and when it cannot be fetched (FAIL_CLOSE: a deny-all RBAC filter under the same name).
	failed := cloneAll(served)
	_ = wasm.MaybeConvertWasmExtensionConfig(failed, unreachableRegistry{})

	var results []callResult
	sim := simulation.NewSimulationFromConfigGen(t, s.ConfigGenTest, proxy)
	for _, c := range calls {
		mode := simulation.CallModeOutbound
		if c.Mode == "inbound" {
			mode = simulation.CallModeInbound
		}
		r := sim.Run(simulation.Call{Address: c.Address, Port: c.Port, Protocol: simulation.TCP, CallMode: mode})
		cr := callResult{call: c, Listener: r.ListenerMatched, FilterChain: r.FilterChainMatched, Cluster: r.ClusterMatched}
		if r.Error != nil {
			cr.Error = r.Error.Error()
		}
		results = append(results, cr)
	}

	writeProtos(t, filepath.Join(dir, "listeners.json"), listeners)
	writeProtos(t, filepath.Join(dir, "clusters.json"), clusters)
	writeProtos(t, filepath.Join(dir, "routes.json"), routes)
	writeProtos(t, filepath.Join(dir, "endpoints.json"), endpoints)
	writeProtos(t, filepath.Join(dir, "ecds.json"), served)
	writeProtos(t, filepath.Join(dir, "ecds_agent.json"), fetched)
	writeProtos(t, filepath.Join(dir, "ecds_agent_fetch_failed.json"), failed)
	names := sets.SortedList(requested)
	writeJSON(t, filepath.Join(dir, "meta.json"), map[string]any{
		"proxyVersion": version, "pod": ps.pod, "ip": ps.ip, "ecdsRequested": names,
		"hbone": ps.hbone, "ambient": features.EnableAmbient,
	})
	writeJSON(t, filepath.Join(dir, "simulation.json"), results)
}

func cloneAll(in []*anypb.Any) []*anypb.Any {
	out := make([]*anypb.Any, 0, len(in))
	for _, a := range in {
		out = append(out, proto.Clone(a).(*anypb.Any))
	}
	return out
}

// localModules is pilot-agent's module cache after a successful pull: the image of
// oci://…/<filter-with-dashes>:<tag> is this repository's build/<filter>.wasm.
type localModules struct{ repo string }

func (c localModules) Get(url string, _ wasm.GetOptions) (string, error) {
	base := url[strings.LastIndex(url, "/")+1:]
	if i := strings.Index(base, ":"); i >= 0 {
		base = base[:i]
	}
	path := filepath.Join(c.repo, "build", strings.ReplaceAll(base, "-", "_")+".wasm")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("module of %s: %v (run npm run build)", url, err)
	}
	return path, nil
}
func (localModules) Cleanup() {}

// unreachableRegistry fails every pull, as a registry that is down or an image that is gone.
type unreachableRegistry struct{}

func (unreachableRegistry) Get(url string, _ wasm.GetOptions) (string, error) {
	return "", fmt.Errorf("pull %s: registry unreachable", url)
}
func (unreachableRegistry) Cleanup() {}

func writeProtos[T proto.Message](t *testing.T, path string, msgs []T) {
	items := make([]string, 0, len(msgs))
	for _, m := range msgs {
		js, err := protomarshal.ToJSONWithIndent(m, "  ")
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		items = append(items, js)
	}
	if err := os.WriteFile(path, []byte("[\n"+strings.Join(items, ",\n")+"\n]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
