package istiogen

// istiod's generation for the upgrade procedure of docs/upgrades.md, on passthrough_mtls (the
// procedure is the same for every filter): route B with the main set on the old image and the
// canary set (npm run canary) on the new one, the promotion's two steps, the rollback, and a
// route A snapshot change (a listener update). The manifests and modules are written beforehand
// by tests/istio/upgrade_inputs.ts into build/istio-upgrade/ (scripts/istio-gen.sh runs it);
// tests/istio/generation_upgrade.test.ts and envoy_upgrade.test.ts assert on the dump, written
// under <ISTIO_OUT>/upgrade/.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The canary pod: sleep-0's twin with the canary value of the opt-in label (docs/upgrades.md).
var canaryLabels = map[string]string{
	"app":                               "sleep",
	"mesh.example.com/passthrough-mtls": "enabled-canary",
}

var canaryClient = proxySpec{name: "client-canary", pod: "sleep-canary-0", ip: "10.244.1.6", labels: canaryLabels}

func upgradeScenarios() []scenario {
	dir := func(release string) []string {
		var files []string
		for _, f := range []string{"cluster.yaml", "wasmplugin.yaml", "catchall.yaml"} {
			files = append(files, "../build/istio-upgrade/passthrough_mtls/"+release+"/"+f)
		}
		return files
	}
	canary := "../build/istio-upgrade/passthrough_mtls/canary.yaml"
	both := []proxySpec{client, canaryClient}
	return []scenario{
		// Canary: the main set on the old image, the canary set on the new one.
		{"passthrough_mtls", "B-canary", append(dir("old"), canary), both},
		// Promotion, step 1: the main set moved to the new image, the canary set still applied.
		{"passthrough_mtls", "B-promoting", append(dir("new"), canary), both},
		// Promotion done: canary pods relabelled to the main value, the canary set deleted
		// (client-canary: a pod left on the canary value, which then matches neither set).
		{"passthrough_mtls", "B-promoted", dir("new"), both},
		// Rollback: the main set back on the previous image (the digest CHANGELOG's Images records).
		{"passthrough_mtls", "B-rolled-back", dir("old"), []proxySpec{client}},
		// What the procedure avoids: a second WasmPlugin on a label the main pod also carries.
		{"passthrough_mtls", "B-second-plugin-extra-label", append(dir("old"), "../build/istio-upgrade/passthrough_mtls/second-plugin-extra-label.yaml"), []proxySpec{client}},
		// Route A: the snapshot changed in the EnvoyFilter, which is a listener update (only its
		// listeners are used; the DestinationRule, which shapes clusters, is left out because every
		// file of a scenario gets the edit).
		{"passthrough_mtls", "A-next", []string{"passthrough_mtls/envoyfilter.yaml"}, []proxySpec{client}},
	}
}

func init() {
	// One locality changed in route A's inline snapshot: enough for a new listener.
	manifestEdits["passthrough_mtls/A-next"] = func(text string) string {
		return strings.Replace(text, `"locality": "us-east1/us-east1-b"`, `"locality": "us-east1/us-east1-a"`, 1)
	}
}

// TestGenerateUpgrades: the upgrade scenarios, in a sidecar-only istiod like TestGenerate.
func TestGenerateUpgrades(t *testing.T) {
	repo := env(t, "REPO_ROOT")
	b, err := os.ReadFile(filepath.Join(repo, "build", "istio-upgrade", "modules.json"))
	if err != nil {
		t.Fatalf("%v (tests/istio/upgrade_inputs.ts writes it; scripts/istio-gen.sh runs that first)", err)
	}
	byURL := map[string]string{}
	if err := json.Unmarshal(b, &byURL); err != nil {
		t.Fatal(err)
	}
	moduleOverrides = byURL
	savedPods := meshPods
	meshPods = append(append([]meshPod{}, meshPods...), meshPod{"default", canaryClient.pod, canaryClient.ip, "sleep", canaryLabels, true})
	defer func() { moduleOverrides, meshPods = nil, savedPods }()
	runAll(t, "upgrade", upgradeScenarios())
}
