package refrun_test

import (
	"context"
	"path/filepath"
	"testing"

	"anechat/engine"
	"anechat/engine/coreml"
	"anechat/engine/coreml/refrun"
	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/spec"
	"anechat/internal/testres"
)

// testData returns build/testdeps/coreml/NAME (deps-coremlhost.sh).
func testData(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(testres.RepoRoot(tb), "build", "testdeps", "coreml", name)
	return testres.Require(tb, p, "Core ML test bundles ("+name+")", "run build/scripts/deps-coreml.sh, then build/scripts/deps-coremlhost.sh (make test runs both)")
}

// pair is a bundle on the Core ML backend with the reference executor and
// the CPU backend on the checkpoint the bundle holds.
type pair struct {
	ml  *coreml.Model
	cpu model.Backend
}

// openPair opens bundle (its source checkpoint src) and the CPU backend on
// ref (src itself when the bundle holds it exactly).
func openPair(tb testing.TB, bundle, src, ref string) pair {
	tb.Helper()
	ctx := context.Background()
	pool := cpu.NewPool(2)
	tb.Cleanup(pool.Close)
	b, err := coreml.OpenBundle(ctx, testData(tb, bundle), nil)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := refrun.Open(ctx, b, src, pool)
	if err != nil {
		b.Close()
		tb.Fatal(err)
	}
	ml, err := coreml.NewModel(b, r, "bundle")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ml.Close() })
	var c model.Backend
	if filepath.Ext(ref) == ".gguf" {
		f, err := gguf.Open(ref)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { f.Close() })
		l, err := cpu.LoadLlama(f, pool)
		if err != nil {
			tb.Fatal(err)
		}
		c = l
	} else {
		g, err := cpu.LoadGemma4(ref, pool)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { g.Close() })
		c = g
	}
	return pair{ml: ml, cpu: c}
}

func gemmaPair(tb testing.TB) pair {
	src := testData(tb, "gemma4-exact")
	return openPair(tb, "gemma4-exact.bundle", src, src)
}

func storiesPair(tb testing.TB) pair {
	return openPair(tb, "stories.bundle", testres.Stories(tb), testData(tb, "stories-ref.gguf"))
}

// generate prefills prompt on a new session of b and generates n tokens
// greedily at width w (costs fixed, so drafting does not depend on timing;
// ungated sends every proposal).
func generate(tb testing.TB, b model.Backend, prompt []int32, n, w int, costs *spec.Costs, ungated bool) ([]int32, engine.Stats) {
	tb.Helper()
	return run(tb, b, prompt, engine.GenerateOptions{MaxTokens: n, Width: w}, costs, ungated)
}

// sampled is generate with seeded sampling (temperature 0.8), every
// proposal sent.
func sampled(tb testing.TB, b model.Backend, prompt []int32, n, w int, seed uint64) ([]int32, engine.Stats) {
	tb.Helper()
	return run(tb, b, prompt, engine.GenerateOptions{MaxTokens: n, Width: w, Temperature: 0.8, Seed: seed}, nil, true)
}

// run prefills prompt on a new session of b and generates with opts.
func run(tb testing.TB, b model.Backend, prompt []int32, opts engine.GenerateOptions, costs *spec.Costs, ungated bool) ([]int32, engine.Stats) {
	tb.Helper()
	ctx := context.Background()
	if costs == nil {
		costs = spec.FixedCosts(map[int]float64{1: 1, 2: 1.2, 3: 1.4, 4: 1.6, 5: 1.8, 6: 2, 7: 2.2, 8: 2.4})
	}
	s, err := engine.NewSession(b, engine.SessionOptions{Costs: costs, Ungated: ungated})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Prefill(ctx, prompt, nil); err != nil {
		tb.Fatal(err)
	}
	var out []int32
	st, err := s.Generate(ctx, opts, func(t engine.Token) error {
		out = append(out, t.ID)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out, st
}

// prompts are token-id prompts with repeated spans (so prompt lookup has
// drafts to send) for a vocabulary of v ids.
func prompts(v int) [][]int32 {
	var out [][]int32
	for p := range 6 {
		var ids []int32
		for i := range 10 + 3*p {
			ids = append(ids, int32((7*p+13*i+5)%(v-3)+3))
		}
		ids = append(ids, ids[2:9]...)
		ids = append(ids, ids[:5]...)
		out = append(out, ids)
	}
	return out
}

// newCache returns a cache for b of calls up to max tokens.
func newCache(tb testing.TB, b model.Backend, maxBatch int) *kv.Cache {
	tb.Helper()
	c, err := kv.New(b.Config().KV, maxBatch)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// freeCosts is a cost table under which every width costs what width 1
// does (the Neural Engine's case).
func freeCosts() *spec.Costs {
	sec := map[int]float64{}
	for w := 1; w <= spec.MaxWidth; w++ {
		sec[w] = 1
	}
	return spec.FixedCosts(sec)
}
