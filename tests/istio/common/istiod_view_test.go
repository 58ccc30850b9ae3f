package istiogen

// istiod's own view of the Kubernetes objects in tests/istiodview/mesh.yaml (the same objects
// the feed's comparison test computes the mesh model from, tests/istio/feed_vs_istiod.test.ts):
//   - the ambient index (pilot/pkg/serviceregistry/ambient): every Workload and Service istiod
//     would send ztunnel, as protojson of istio.io/api's workloadapi;
//   - the sidecar registry (pilot/pkg/serviceregistry/kube/controller): every Service of the kube
//     registry and the IstioEndpoints it put in the endpoint index (what EDS is built from), with
//     the fields the mesh model carries.
// Both come from one fake discovery server (pilot/test/xds) with ambient enabled
// (PILOT_ENABLE_AMBIENT=true), so the ambient index and the kube registry read the same objects.
//
// Inputs (environment): ISTIO_OUT (writes <ISTIO_OUT>/view/istiod_view.json), REPO_ROOT.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	"istio.io/istio/pkg/util/protomarshal"
)

const (
	viewFixture  = "tests/istiodview/mesh.yaml"
	viewNetworks = "tests/istiodview/mesh-networks.yaml"
)

type sidecarPort struct {
	Name     string `json:"name"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
}

type sidecarEndpoint struct {
	Addresses       []string `json:"addresses"`
	ServicePortName string   `json:"servicePortName"`
	EndpointPort    uint32   `json:"endpointPort"`
	ServiceAccount  string   `json:"serviceAccount"`
	Network         string   `json:"network"`
	Locality        string   `json:"locality"`
	TLSMode         string   `json:"tlsMode"`
	// model.HealthStatus: 1 Healthy, 2 UnHealthy, 3 Draining, 4 Terminating.
	HealthStatus int32 `json:"healthStatus"`
}

type sidecarService struct {
	Hostname        string            `json:"hostname"`
	Namespace       string            `json:"namespace"`
	VIPs            []string          `json:"vips"`
	Resolution      int               `json:"resolution"` // model.Resolution: 0 ClientSideLB, 1 DNSLB, 2 Passthrough, ...
	Ports           []sidecarPort     `json:"ports"`
	ServiceAccounts []string          `json:"serviceAccounts"` // the Service's own (annotations)
	EndpointSANs    []string          `json:"endpointServiceAccounts"`
	Endpoints       []sidecarEndpoint `json:"endpoints"`
}

type istiodView struct {
	Cluster          string            `json:"cluster"`
	AmbientWorkloads []json.RawMessage `json:"ambientWorkloads"`
	AmbientServices  []json.RawMessage `json:"ambientServices"`
	SidecarServices  []sidecarService  `json:"sidecarServices"`
}

func TestIstiodView(t *testing.T) {
	if !features.EnableAmbient {
		t.Fatal("TestIstiodView needs PILOT_ENABLE_AMBIENT=true in the environment (scripts/istio-gen.sh sets it)")
	}
	repo := env(t, "REPO_ROOT")
	out := filepath.Join(env(t, "ISTIO_OUT"), "view")
	objects, err := os.ReadFile(filepath.Join(repo, viewFixture))
	if err != nil {
		t.Fatal(err)
	}
	networksYAML, err := os.ReadFile(filepath.Join(repo, viewNetworks))
	if err != nil {
		t.Fatal(err)
	}
	networks, err := mesh.ParseMeshNetworks(string(networksYAML))
	if err != nil {
		t.Fatalf("%s: %v", viewNetworks, err)
	}
	s := xds.NewFakeDiscoveryServer(t, xds.FakeOptions{
		KubernetesObjectString: string(objects),
		NetworksWatcher:        meshwatcher.NewFixedNetworksWatcher(networks),
	})
	if s.AmbientIndex == nil {
		t.Fatal("the fake discovery server made no ambient index (PILOT_ENABLE_AMBIENT not read?)")
	}
	// The ambient index (krt collections) and the endpoint index fill asynchronously: take the
	// view once it has stopped changing (ten reads 50 ms apart that agree).
	deadline := time.Now().Add(60 * time.Second)
	var last []byte
	stable := 0
	var view istiodView
	for stable < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("istiod's view did not settle within 60 s (ambient index synced: %v, kube registry synced: %v)", s.AmbientIndex.HasSynced(), s.KubeRegistry.HasSynced())
		}
		time.Sleep(50 * time.Millisecond)
		if !s.AmbientIndex.HasSynced() || !s.KubeRegistry.HasSynced() {
			continue
		}
		view = collectView(t, s)
		b, err := json.Marshal(view)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(b, last) {
			stable++
		} else {
			stable, last = 0, b
		}
	}
	if len(view.AmbientWorkloads) == 0 || len(view.SidecarServices) == 0 {
		t.Fatalf("istiod's view is empty (%d ambient workloads, %d sidecar services): fixture not read?", len(view.AmbientWorkloads), len(view.SidecarServices))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(out, "istiod_view.json"), view)
}

func collectView(t *testing.T, s *xds.FakeDiscoveryServer) istiodView {
	cluster := s.KubeRegistry.Cluster()
	view := istiodView{Cluster: string(cluster), AmbientWorkloads: []json.RawMessage{}, AmbientServices: []json.RawMessage{}}
	type keyed struct {
		key string
		raw json.RawMessage
	}
	var workloads, services []keyed
	for _, a := range s.AmbientIndex.All() {
		if w := a.GetWorkload(); w != nil {
			workloads = append(workloads, keyed{w.GetUid(), protoJSON(t, w)})
		} else if svc := a.GetService(); svc != nil {
			services = append(services, keyed{svc.GetNamespace() + "/" + svc.GetHostname(), protoJSON(t, svc)})
		}
	}
	sort.Slice(workloads, func(i, j int) bool { return workloads[i].key < workloads[j].key })
	sort.Slice(services, func(i, j int) bool { return services[i].key < services[j].key })
	for _, w := range workloads {
		view.AmbientWorkloads = append(view.AmbientWorkloads, w.raw)
	}
	for _, svc := range services {
		view.AmbientServices = append(view.AmbientServices, svc.raw)
	}

	index := s.Env().EndpointIndex
	for _, svc := range s.KubeRegistry.Services() {
		out := sidecarService{
			Hostname:        string(svc.Hostname),
			Namespace:       svc.Attributes.Namespace,
			VIPs:            append([]string{}, svc.ClusterVIPs.GetAddressesFor(cluster)...),
			Resolution:      int(svc.Resolution),
			ServiceAccounts: append([]string{}, svc.ServiceAccounts...),
			EndpointSANs:    []string{},
			Endpoints:       []sidecarEndpoint{},
		}
		for _, p := range svc.Ports {
			out.Ports = append(out.Ports, sidecarPort{Name: p.Name, Port: p.Port, Protocol: string(p.Protocol)})
		}
		if shards, ok := index.ShardsForService(string(svc.Hostname), svc.Attributes.Namespace); ok {
			shards.RLock()
			for _, key := range shards.Keys() {
				for _, ep := range shards.Shards[key] {
					out.Endpoints = append(out.Endpoints, sidecarEndpoint{
						Addresses:       append([]string{}, ep.Addresses...),
						ServicePortName: ep.ServicePortName,
						EndpointPort:    ep.EndpointPort,
						ServiceAccount:  ep.ServiceAccount,
						Network:         string(ep.Network),
						Locality:        ep.Locality.Label,
						TLSMode:         ep.TLSMode,
						HealthStatus:    int32(ep.HealthStatus),
					})
				}
			}
			for sa := range shards.ServiceAccounts {
				out.EndpointSANs = append(out.EndpointSANs, sa)
			}
			shards.RUnlock()
		}
		sort.Strings(out.EndpointSANs)
		sort.Slice(out.Endpoints, func(i, j int) bool {
			a, b := out.Endpoints[i], out.Endpoints[j]
			if a.Addresses[0] != b.Addresses[0] {
				return a.Addresses[0] < b.Addresses[0]
			}
			return a.ServicePortName < b.ServicePortName
		})
		view.SidecarServices = append(view.SidecarServices, out)
	}
	sort.Slice(view.SidecarServices, func(i, j int) bool { return view.SidecarServices[i].Hostname < view.SidecarServices[j].Hostname })
	return view
}

func protoJSON(t *testing.T, m proto.Message) json.RawMessage {
	b, err := protomarshal.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
