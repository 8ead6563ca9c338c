// Package backends lists the backends this binary is built with, as the
// engine/load Registry that the app and the CLI open models through. It is
// the one place that imports the backends: engine's generic packages never
// do (engine/imports_test.go keeps it so).
package backends

import (
	"anechat/engine/cpu"
	"anechat/engine/load"
)

// Registry returns the registry of this build's backends, most preferred
// first. Today that is the CPU backend alone; the Core ML backend goes first
// on darwin/arm64 once it exists.
func Registry() *load.Registry {
	return load.NewRegistry(cpu.Loader{})
}
