package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"anechat/engine/cpu"
	"anechat/engine/model"
)

// mapCostStore is an in-memory CostStore; err fails every read.
type mapCostStore struct {
	m   map[string]json.RawMessage
	err error
}

func (s *mapCostStore) SettingRaw(_ context.Context, key string) (json.RawMessage, bool, error) {
	if s.err != nil {
		return nil, false, s.err
	}
	v, ok := s.m[key]
	return v, ok, nil
}

func (s *mapCostStore) SetSettingRaw(_ context.Context, key string, v json.RawMessage) error {
	s.m[key] = slices.Clone(v)
	return nil
}

// TestSpecDecoderPersistsCosts: a decoder measures once and stores the
// table under the model's fingerprint and the CPU's kernel set; a new decoder on the same store loads
// it without measuring (same ids); a wider request, a table for other widths
// or a failed read measure again, and a fresh measurement overwrites.
func TestSpecDecoderPersistsCosts(t *testing.T) {
	b := openStories(t)
	key := CostsKey(b.Config().Fingerprint, cpu.Kernels())
	if b.Config().Fingerprint == "" {
		t.Fatal("stories backend has no fingerprint")
	}
	store := &mapCostStore{m: map[string]json.RawMessage{}}
	var logb bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logb, nil))
	want, _ := specTurns(t, b, PlainDecoder{}, 1, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	run := func(width int) *SpecDecoder {
		t.Helper()
		d := NewSpecDecoder(nil, nil)
		d.PersistCosts(store, log)
		got, _ := specTurns(t, b, d, width, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
		if !slices.Equal(tokenIDs(got[0]), tokenIDs(want[0])) {
			t.Fatalf("width %d: ids %v, want %v", width, tokenIDs(got[0]), tokenIDs(want[0]))
		}
		return d
	}
	if d := run(4); d.Measurements() != 1 {
		t.Fatalf("first decoder measured %d times, want 1", d.Measurements())
	}
	saved := store.m[key]
	var sc storedCosts
	if err := json.Unmarshal(saved, &sc); err != nil || !slices.Equal(sc.Widths, []int{1, 2, 3, 4}) || len(sc.Seconds) != 4 {
		t.Fatalf("stored %s (%v)", saved, err)
	}
	d := run(4)
	if d.Measurements() != 0 {
		t.Fatal("second decoder measured although the store holds the costs")
	}
	// Wider than stored: measured again (1..8) and overwritten.
	specTurns(t, b, d, 8, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	if d.Measurements() != 1 {
		t.Fatalf("width 8 after a stored 1..4: %d measurements, want 1", d.Measurements())
	}
	if json.Unmarshal(store.m[key], &sc) != nil || len(sc.Widths) != 8 {
		t.Fatalf("not overwritten for 1..8: %s", store.m[key])
	}
	// Stored for 1..8, asked for 4: other widths, ignored with a warning.
	logb.Reset()
	if d := run(4); d.Measurements() != 1 || !strings.Contains(logb.String(), "stored call costs ignored") {
		t.Fatalf("table for other widths: %d measurements, log %q", d.Measurements(), logb.String())
	}
	store.err = errors.New("disk gone")
	logb.Reset()
	if d := run(4); d.Measurements() != 1 || !strings.Contains(logb.String(), "disk gone") {
		t.Fatalf("failed read: %d measurements, log %q", d.Measurements(), logb.String())
	}
}

// TestParseCosts: only a table for exactly the widths asked, with a
// positive time for each, is used.
func TestParseCosts(t *testing.T) {
	w := []int{1, 2, 3, 4}
	good := `{"widths":[1,2,3,4],"seconds":{"1":0.001,"2":0.0012,"3":0.0015,"4":0.002}}`
	c, err := parseCosts(json.RawMessage(good), w)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Table(); len(got) != 4 || got[1] != 0.001 || got[4] < 0.00199999 || got[4] > 0.00200001 {
		t.Errorf("table %v", got)
	}
	for _, bad := range []string{`"x"`, `null`, `{}`, `[1,2]`, `{"widths":[1,2,3,4]}`,
		`{"widths":[1,2,3,4],"seconds":{"1":0.001,"2":0.0012,"3":0.0015}}`,
		`{"widths":[1,2,3,4],"seconds":{"1":0.001,"2":0.0012,"3":0.0015,"5":0.002}}`,
		`{"widths":[1,2,3,4],"seconds":{"1":0,"2":0.0012,"3":0.0015,"4":0.002}}`,
		`{"widths":[1,2,3,4],"seconds":{"1":-1,"2":0.0012,"3":0.0015,"4":0.002}}`,
		`{"widths":[1,2],"seconds":{"1":0.001,"2":0.0012}}`,
		`{"widths":[1,2,3,4,5],"seconds":{"1":0.001,"2":0.0012,"3":0.0015,"4":0.002,"5":0.003}}`,
		`{"widths":[1,2,3,4],"seconds":{"1":0.001,"2":0.0012,"3":0.0015,"4":0.002,"5":0.003}}`} {
		if c, err := parseCosts(json.RawMessage(bad), w); err == nil {
			t.Errorf("%s: accepted as %v", bad, c.Table())
		}
	}
}

// hiddenKernels is a backend that does not name its kernels (it hides the
// CPU backend's Kernels).
type hiddenKernels struct{ model.Backend }

// TestSpecDecoderCostsKeyedByKernels: the key holds the backend's kernel
// set, so a table stored by a build without it in the key, or for another
// kernel set, is not used: the decoder measures and stores under its own
// key, leaving the others. A backend that does not name its kernels keeps
// the plain "spec.costs/<fp>" key.
func TestSpecDecoderCostsKeyedByKernels(t *testing.T) {
	b := openStories(t)
	fp := b.Config().Fingerprint
	kernels := model.KernelsOf(b)
	if kernels == "" || kernels != cpu.Kernels() {
		t.Fatalf("CPU backend names kernels %q, want %q", kernels, cpu.Kernels())
	}
	if got, want := CostsKey(fp, kernels), "spec.costs/"+fp+"/"+kernels; got != want {
		t.Fatalf("CostsKey = %q, want %q", got, want)
	}
	if got, want := CostsKey(fp, ""), "spec.costs/"+fp; got != want {
		t.Fatalf("CostsKey without kernels = %q, want %q", got, want)
	}
	table := json.RawMessage(`{"widths":[1,2,3,4],"seconds":{"1":0.001,"2":0.0011,"3":0.0012,"4":0.0013}}`)
	plain, other := CostsKey(fp, ""), CostsKey(fp, "cpu/other.0")
	store := &mapCostStore{m: map[string]json.RawMessage{plain: table, other: table}}
	want, _ := specTurns(t, b, PlainDecoder{}, 1, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	run := func(b model.Backend) *SpecDecoder {
		t.Helper()
		d := NewSpecDecoder(nil, nil)
		d.PersistCosts(store, slog.New(slog.DiscardHandler))
		got, _ := specTurns(t, b, d, 4, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
		if !slices.Equal(tokenIDs(got[0]), tokenIDs(want[0])) {
			t.Fatalf("ids %v, want %v", tokenIDs(got[0]), tokenIDs(want[0]))
		}
		return d
	}
	if d := run(b); d.Measurements() != 1 {
		t.Fatalf("tables stored under %q and %q only: %d measurements, want 1", plain, other, d.Measurements())
	}
	mine, ok := store.m[CostsKey(fp, kernels)]
	if !ok || bytes.Equal(mine, table) {
		t.Fatalf("not stored under the kernels' key: %s", mine)
	}
	if !bytes.Equal(store.m[plain], table) || !bytes.Equal(store.m[other], table) {
		t.Errorf("other keys' tables changed: %s, %s", store.m[plain], store.m[other])
	}
	// A backend without KernelNamer reads the plain key (it holds a table).
	if d := run(hiddenKernels{b}); d.Measurements() != 0 {
		t.Errorf("backend without kernel names: %d measurements, want 0 (the table under %q)", d.Measurements(), plain)
	}
}
