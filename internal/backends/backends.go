// Package backends lists the backends this binary is built with, as the
// engine/load Registry that the app and the CLI open models through. It is
// the one place that imports the backends: engine's generic packages never
// do (engine/imports_test.go keeps it so).
package backends

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"

	"anechat/engine/coreml"
	"anechat/engine/coreml/refrun"
	"anechat/engine/cpu"
	"anechat/engine/load"
)

// Options are the user's choices for the backends.
type Options struct {
	// ComputeUnits is the Core ML compute-units setting ("neural-engine"
	// or "", "gpu", "cpu", "all"; mlcore.ParseComputeUnits).
	ComputeUnits string
	// CoreMLCache is where compiled Core ML packages are kept; "" means
	// the user's cache directory (coreml.DefaultCacheDir).
	CoreMLCache string
	// Log receives the Core ML compile cache's notices.
	Log *slog.Logger
}

// Registry returns the registry of this build's backends, most preferred
// first, with the default options: on darwin/arm64 the Core ML backend
// (bundles, on the Neural Engine) then the CPU backend; elsewhere the CPU
// backend alone.
func Registry() *load.Registry { return RegistryWith(Options{}) }

// RegistryWith is Registry with the user's options.
func RegistryWith(o Options) *load.Registry {
	if l, ok := coreMLLoader(o); ok {
		return load.NewRegistry(l, cpu.Loader{})
	}
	return load.NewRegistry(cpu.Loader{})
}

// Reference returns a registry whose Core ML backend runs bundles with the
// reference executor (engine/coreml/refrun: the bundle's function contract in
// float32 on the CPU backend's kernels, weights read from the checkpoint at
// source that the bundle was converted from), before the CPU backend. It
// runs on every platform: tests and `anechat doctor --reference` use it.
func Reference(source string) *load.Registry {
	open := func(ctx context.Context, b *coreml.Bundle, _ func(done, total int)) (coreml.Executor, error) {
		return refrun.Open(ctx, b, source, nil)
	}
	return load.NewRegistry(coreml.Loader{Executor: open}, cpu.Loader{})
}

// Status says whether a backend can run here and why (for doctor and
// Settings).
type Status struct {
	// Name is the backend's name ("coreml", "cpu").
	Name string
	// Available is true when this build on this machine runs it.
	Available bool
	// Detail says what runs, or why it cannot.
	Detail string
}

// Statuses reports every backend of the build, most preferred first.
func Statuses() []Status {
	return []Status{coreMLStatus(), {Name: "cpu", Available: true, Detail: "pure Go; runs on every platform"}}
}

// CoreMLStatus says whether a build for goos/goarch runs Core ML bundles
// (Gemma 4 on the Apple Neural Engine) and, when not, why and what would.
func CoreMLStatus(goos, goarch string) string {
	if goos != "darwin" || goarch != "arm64" {
		return fmt.Sprintf("not built for this platform (%s/%s): Core ML and the Apple Neural Engine need a darwin/arm64 build on an Apple silicon Mac", goos, goarch)
	}
	if runtime.GOOS == goos && runtime.GOARCH == goarch {
		// This build: whether Core ML opens on this Mac.
		if st := coreMLStatus(); !st.Available {
			return "not available: " + st.Detail
		}
	}
	return "available: Core ML bundles (the anechat converter's, and published CoreML-LLM ones) run with Core ML, on the Neural Engine unless the compute units say otherwise; every other model on the CPU backend"
}
