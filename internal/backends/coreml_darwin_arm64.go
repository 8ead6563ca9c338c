package backends

import (
	"context"
	"fmt"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/coreml/published"
)

// coreMLLoader is the Core ML backend with the Core ML executor: registered
// first on darwin/arm64. Core ML itself is opened at the first bundle that
// loads; where it cannot be (a macOS without it), that load fails saying
// so, and the CPU backend still runs every other model.
func coreMLLoader(o Options) (coreml.Loader, bool) {
	units, err := mlcore.ParseComputeUnits(o.ComputeUnits)
	if err != nil {
		return coreml.Loader{Why: fmt.Sprintf("compute units: %v", err)}, true
	}
	open := func(ctx context.Context, b *coreml.Bundle, progress func(done, total int)) (coreml.Executor, error) {
		rt, err := mlcore.New()
		if err != nil {
			return nil, err
		}
		return coreml.NewCoreMLExecutor(ctx, rt, b, coreml.CoreMLOptions{ComputeUnits: units, CacheDir: o.CoreMLCache, Log: o.Log}, progress)
	}
	// A published CoreML-LLM bundle runs through its own decode and
	// verify functions (published.Model).
	pub := published.Opener(func(ctx context.Context, p *coreml.Published, progress func(done, total int)) (published.Executor, error) {
		rt, err := mlcore.New()
		if err != nil {
			return nil, err
		}
		return published.NewCoreMLExecutor(ctx, rt, p, coreml.CoreMLOptions{ComputeUnits: units, CacheDir: o.CoreMLCache, Log: o.Log}, progress)
	})
	return coreml.Loader{Executor: open, Published: pub}, true
}

func coreMLStatus() Status {
	if _, err := mlcore.New(); err != nil {
		return Status{Name: "coreml", Detail: "Core ML cannot be opened on this Mac: " + err.Error()}
	}
	return Status{Name: "coreml", Available: true, Detail: "Core ML (the Neural Engine with compute units neural-engine): runs Core ML bundles of the anechat converter, and published CoreML-LLM bundles (greedy; speculation identity measured by doctor, not built in)"}
}
