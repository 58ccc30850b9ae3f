// Command wasm-image packs one compiled proxy-wasm module into an OCI image layout in the shape
// istio-agent's fetcher (istio.io/istio pkg/wasm) accepts: an OCI image manifest whose only layer
// is a gzip tar holding /plugin.wasm (the "compat" layout Istio's, Kuadrant's and Coraza's images
// use). The output is reproducible: every byte comes from the module and the flags, never from the
// clock, the user or the file system (fixed mtime, owner and mode; no gzip name or time; no
// "created" stamps), so the same module always gives the same manifest digest.
//
// Usage: wasm-image -wasm build/probe.wasm -name probe -version 0.1.0 -out build/images/probe
// Prints one JSON object: the manifest digest, the layer digest and the module's sha256.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The file name istio-agent looks for in the layer (pkg/wasm extractWasmPluginBinary).
const moduleFileName = "plugin.wasm"

// Every entry's mtime: the Unix epoch, so the archive does not depend on when it was built.
var fixedTime = time.Unix(0, 0).UTC()

type result struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Digest      string `json:"digest"`
	LayerDigest string `json:"layerDigest"`
	ModuleSHA   string `json:"moduleSha256"`
	ModuleBytes int    `json:"moduleBytes"`
}

func main() {
	wasmPath := flag.String("wasm", "", "compiled module (build/<filter>.wasm)")
	name := flag.String("name", "", "filter name (the image's title)")
	version := flag.String("version", "", "release version (annotation and the layout's ref name)")
	out := flag.String("out", "", "OCI layout directory to (re)create")
	flag.Parse()
	if *wasmPath == "" || *name == "" || *version == "" || *out == "" {
		fail("-wasm, -name, -version and -out are all required")
	}
	res, err := build(*wasmPath, *name, *version, *out)
	if err != nil {
		fail(err.Error())
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "wasm-image: "+msg)
	os.Exit(1)
}

func build(wasmPath, name, version, out string) (*result, error) {
	module, err := os.ReadFile(wasmPath)
	if err != nil {
		return nil, err
	}
	// The same check istio-agent makes after the pull: refuse to ship something it would refuse.
	if len(module) < 8 || !bytes.Equal(module[:4], []byte{0x00, 'a', 's', 'm'}) {
		return nil, fmt.Errorf("%s is not a Wasm binary (no \\0asm magic)", wasmPath)
	}
	compressed, err := layerArchive(module)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := image(layer, name, version)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	path, err := layout.Write(out, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := path.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	})); err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	layerDigest, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(module)
	return &result{Name: name, Version: version, Digest: digest.String(), LayerDigest: layerDigest.String(),
		ModuleSHA: hex.EncodeToString(sum[:]), ModuleBytes: len(module)}, nil
}

// layerArchive is the layer blob: a tar with the one file, gzip-compressed. Owner root, mode 0444,
// mtime fixed, USTAR format; the gzip header carries no name, no time and Go's fixed OS byte.
func layerArchive(module []byte) ([]byte, error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	header := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     moduleFileName,
		Mode:     0o444,
		Size:     int64(len(module)),
		ModTime:  fixedTime,
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(header); err != nil {
		return nil, err
	}
	if _, err := tw.Write(module); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gzBuf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gzBuf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return gzBuf.Bytes(), nil
}

// image is an OCI manifest (OCI media types throughout) with the module layer, a config that
// names the platform as wasm, and annotations an operator can read with `crane manifest`.
func image(layer v1.Layer, name, version string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: fixedTime},
			CreatedBy: "npm run package: " + name + " " + version + " (/" + moduleFileName + ")"},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	// A proxy-wasm module runs in Envoy's Wasm VM, on no operating system.
	cfg.Architecture = "wasm"
	cfg.OS = "proxy-wasm"
	// The epoch, as reproducible builds (SOURCE_DATE_EPOCH=0, ko) stamp it, instead of Go's zero time.
	cfg.Created = v1.Time{Time: fixedTime}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.title":       name,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.description": "proxy-wasm network filter " + name + " for Envoy (/" + moduleFileName + ")",
	}).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotating the manifest did not give an image")
	}
	return annotated, nil
}
