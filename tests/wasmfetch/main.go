// Command wasm-fetch runs istio-agent's own Wasm module conversion (istio.io/istio pkg/wasm, the
// code pilot-agent's xDS proxy runs on every ECDS response) on ECDS resources given as JSON, with
// its real module cache pulling from a real registry. The tests (tests/images/) use it to prove
// that the plugin images npm run package builds are ones istio-agent accepts: it pulls the image,
// checks the sha256 pin, extracts plugin.wasm into its cache and rewrites the resource to a local
// file, or, when any of that fails, substitutes the RBAC filter it always substitutes.
//
// Usage: wasm-fetch -cache DIR < resources.json > converted.json
// Input: a JSON array of envoy.config.core.v3.TypedExtensionConfig, as istiod serves them.
// Output: {"resources": [... converted ...], "error": "..."}. A module the agent cannot fetch or
// refuses (wrong sha256) is not an error of the conversion: like pilot-agent, it logs the reason
// (stderr) and hands Envoy its RBAC stand-in. Exit status 1 only when the conversion itself failed
// (the converted resources are printed all the same: that is what Envoy would get); 2 bad input.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"istio.io/istio/pkg/log"
	"istio.io/istio/pkg/util/protomarshal"
	"istio.io/istio/pkg/wasm"
)

type output struct {
	Resources []json.RawMessage `json:"resources"`
	Error     string            `json:"error,omitempty"`
}

func main() {
	cacheDir := flag.String("cache", "", "directory of istio-agent's module cache")
	flag.Parse()
	// The agent's log (what it fetched, why it refused) goes to stderr; stdout carries only the JSON.
	logOptions := log.DefaultOptions()
	logOptions.OutputPaths = []string{"stderr"}
	if err := log.Configure(logOptions); err != nil {
		fail(err.Error())
	}
	if *cacheDir == "" {
		fail("-cache is required")
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err.Error())
	}
	var items []json.RawMessage
	if err := json.Unmarshal(in, &items); err != nil {
		fail("stdin: a JSON array of TypedExtensionConfig: " + err.Error())
	}
	resources := make([]*anypb.Any, 0, len(items))
	for i, item := range items {
		ec := &core.TypedExtensionConfig{}
		if err := protomarshal.Unmarshal(item, ec); err != nil {
			fail(fmt.Sprintf("resource %d: %v", i, err))
		}
		a, err := anypb.New(ec)
		if err != nil {
			fail(err.Error())
		}
		resources = append(resources, a)
	}

	// The agent's defaults (pkg/wasm options.go), as pilot-agent creates its cache.
	cache := wasm.NewLocalFileCache(*cacheDir, wasm.Options{})
	defer cache.Cleanup()
	convertErr := wasm.MaybeConvertWasmExtensionConfig(resources, cache)

	out := output{}
	for _, a := range resources {
		ec := &core.TypedExtensionConfig{}
		if err := a.UnmarshalTo(ec); err != nil {
			fail(err.Error())
		}
		js, err := protomarshal.ToJSON(ec)
		if err != nil {
			fail(err.Error())
		}
		out.Resources = append(out.Resources, json.RawMessage(js))
	}
	if convertErr != nil {
		out.Error = convertErr.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err.Error())
	}
	if convertErr != nil {
		os.Exit(1)
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "wasm-fetch: "+msg)
	os.Exit(2)
}
