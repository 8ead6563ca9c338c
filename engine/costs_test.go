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

// TestSessionPersistsCosts: a Session measures every width once and stores
// the table under the model's fingerprint and the CPU's kernel set; a new
// Session on the same store loads it without measuring, whatever width it
// is asked for (same ids); a table for other widths (an older build's 1..4)
// or a failed read measure again, and a fresh measurement overwrites.
func TestSessionPersistsCosts(t *testing.T) {
	b := openStories(t)
	key := CostsKey(b.Config().Fingerprint, cpu.Kernels())
	if b.Config().Fingerprint == "" {
		t.Fatal("stories backend has no fingerprint")
	}
	store := &mapCostStore{m: map[string]json.RawMessage{}}
	var logb bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logb, nil))
	opts := GenerateOptions{MaxTokens: 20}
	want, _ := plainTurns(t, b, [][]int32{storiesPrompt}, opts)
	run := func(s *Session, width int) *Session {
		t.Helper()
		if s == nil {
			var err error
			if s, err = NewSession(b, SessionOptions{CostStore: store, Log: log}); err != nil {
				t.Fatal(err)
			}
		}
		s.Reset()
		if got := sessionTurns(t, s, width, [][]int32{storiesPrompt}, opts); !slices.Equal(tokenIDs(got[0]), want[0]) {
			t.Fatalf("width %d: ids %v, want %v", width, tokenIDs(got[0]), want[0])
		}
		return s
	}
	all := []int{1, 2, 3, 4, 5, 6, 7, 8}
	stored := func() storedCosts {
		t.Helper()
		var sc storedCosts
		if err := json.Unmarshal(store.m[key], &sc); err != nil || !slices.Equal(sc.Widths, all) || len(sc.Seconds) != len(all) {
			t.Fatalf("stored %s (%v), want a table for widths %v", store.m[key], err, all)
		}
		return sc
	}
	if s := run(nil, 2); s.Measurements() != 1 {
		t.Fatalf("first session measured %d times, want 1", s.Measurements())
	}
	stored()
	s := run(nil, 4)
	if s.Measurements() != 0 {
		t.Fatal("second session measured although the store holds the costs")
	}
	// Wider than the first request: the table already covers it.
	run(s, 8)
	run(s, 0)
	if s.Measurements() != 0 || len(s.Costs().Table()) != len(all) {
		t.Fatalf("width 8 and auto after a stored table: %d measurements, costs %v", s.Measurements(), s.Costs().Table())
	}
	// A table an older build stored for widths 1..4 only: ignored with a
	// warning, measured again, overwritten with every width.
	store.m[key] = json.RawMessage(`{"widths":[1,2,3,4],"seconds":{"1":0.001,"2":0.0011,"3":0.0012,"4":0.0013}}`)
	logb.Reset()
	if s := run(nil, 4); s.Measurements() != 1 || !strings.Contains(logb.String(), "stored call costs ignored") || !strings.Contains(logb.String(), "[1 2 3 4]") {
		t.Fatalf("table for other widths: %d measurements, log %q", s.Measurements(), logb.String())
	}
	stored()
	store.err = errors.New("disk gone")
	logb.Reset()
	if s := run(nil, 4); s.Measurements() != 1 || !strings.Contains(logb.String(), "disk gone") {
		t.Fatalf("failed read: %d measurements, log %q", s.Measurements(), logb.String())
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

// TestSessionCostsKeyedByKernels: the key holds the backend's kernel
// set, so a table stored by a build without it in the key, or for another
// kernel set, is not used: the session measures and stores under its own
// key, leaving the others. A backend that does not name its kernels keeps
// the plain "spec.costs/<fp>" key.
func TestSessionCostsKeyedByKernels(t *testing.T) {
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
	table := json.RawMessage(`{"widths":[1,2,3,4,5,6,7,8],"seconds":{"1":0.001,"2":0.0011,"3":0.0012,"4":0.0013,"5":0.0014,"6":0.0015,"7":0.0016,"8":0.0017}}`)
	plain, other := CostsKey(fp, ""), CostsKey(fp, "cpu/other.0")
	store := &mapCostStore{m: map[string]json.RawMessage{plain: table, other: table}}
	want, _ := plainTurns(t, b, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20})
	run := func(b model.Backend) *Session {
		t.Helper()
		s, err := NewSession(b, SessionOptions{CostStore: store, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if got := sessionTurns(t, s, 4, [][]int32{storiesPrompt}, GenerateOptions{MaxTokens: 20}); !slices.Equal(tokenIDs(got[0]), want[0]) {
			t.Fatalf("ids %v, want %v", tokenIDs(got[0]), want[0])
		}
		return s
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
