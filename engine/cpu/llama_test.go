package cpu

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
)

// sharedModel returns the path of a model in ../shared/models, skipping the
// test outside CI when it is missing.
func sharedModel(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing (CI needs ../shared beside the checkout): %v", p, err)
		}
		t.Skipf("%s missing: run make test with ../shared present", p)
	}
	return p
}

func ids(s string) []int32 {
	var out []int32
	for _, f := range strings.Fields(s) {
		n, _ := strconv.Atoi(f)
		out = append(out, int32(n))
	}
	return out
}

// Reference from models/README.md (llama2.c run.c, greedy).
var (
	storiesPrompt = ids("1 403 407 261 378")
	storiesWant   = ids("432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352 266 268 388 426 338 391 266 267 337 335 312 432 398 312 286 267 414 270 333 415 426 13 438 310")
)

func loadStories(t testing.TB) *Llama {
	f, err := gguf.Open(sharedModel(t, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := LoadLlama(f, NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// greedy decodes max tokens after prompt, prefilling the prompt in one call.
func greedy(t testing.TB, b model.Backend, prompt []int32, maxTokens int) []int32 {
	t.Helper()
	ctx := context.Background()
	c, err := kv.New(b.Config().KV, 64)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Forward(ctx, prompt, 0, c, model.Argmax)
	if err != nil {
		t.Fatal(err)
	}
	c.Commit(len(prompt))
	next := r.Argmax[len(prompt)-1]
	var out []int32
	for len(out) < maxTokens {
		out = append(out, next)
		r, err = b.Forward(ctx, []int32{next}, c.Len(), c, model.Argmax)
		if err != nil {
			t.Fatal(err)
		}
		c.Commit(1)
		next = r.Argmax[0]
	}
	return out
}

func TestStories260KReference(t *testing.T) {
	m := loadStories(t)
	got := greedy(t, m, storiesPrompt, len(storiesWant))
	for i := range storiesWant {
		if got[i] != storiesWant[i] {
			t.Fatalf("id %d: got %v\nwant %v", i, got, storiesWant)
		}
	}
}
