//go:build !(darwin && arm64)

package backends

import (
	"fmt"
	"runtime"

	"anechat/engine/coreml"
)

// coreMLLoader: no Core ML here, so the Core ML backend is not registered
// for the app (Reference builds a registry with the reference executor).
func coreMLLoader(Options) (coreml.Loader, bool) { return coreml.Loader{}, false }

func coreMLStatus() Status {
	return Status{Name: "coreml", Detail: fmt.Sprintf("the Neural Engine is not available: Core ML needs the darwin/arm64 build on an Apple silicon Mac (this is %s/%s). The CPU backend runs every model here (\"anechat doctor --reference CHECKPOINT\" checks a bundle on the CPU kernels)", runtime.GOOS, runtime.GOARCH)}
}
