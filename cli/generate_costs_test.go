package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"anechat/engine"
	"anechat/engine/cpu"
	"anechat/engine/load"
	"anechat/internal/testres"
)

// TestGenerateKeepsCosts: the first speculative `generate` with a data dir
// measures the call costs of every width and stores them under the model's
// fingerprint; later runs, at any width, load them and do not measure; the ids are the same in every run
// and at width 1. A stored table that does not decode, or is for other
// widths, is ignored, measured again and overwritten; --no-cache measures.
func TestGenerateKeepsCosts(t *testing.T) {
	path := testres.Stories(t)
	home := t.TempDir()
	gen := func(extra ...string) generateJSON {
		t.Helper()
		g := genJSON(t, append([]string{"--model", path, "--prompt-ids", "1 403 407 261 378", "--max-tokens", "60", "--data-dir", home}, extra...)...)
		if want := testres.StoriesGreedy(); !slices.Equal(g.IDs, want) {
			t.Fatalf("%v: ids %v, want the width-1 ids %v", extra, g.IDs, want)
		}
		return g
	}
	src, err := load.Detect(path)
	if err != nil {
		t.Fatal(err)
	}
	fp := src.Fingerprint
	key := engine.CostsKey(fp, cpu.Kernels())
	// stored returns the raw setting and sets it to set when not empty.
	stored := func(set string) string {
		t.Helper()
		var put json.RawMessage
		if set != "" {
			put = json.RawMessage(set)
		}
		raw, found := storedSetting(t, home, key, put)
		if !found {
			return ""
		}
		return string(raw)
	}
	valid := func(raw string) bool {
		var v struct {
			Widths  []int              `json:"widths"`
			Seconds map[string]float64 `json:"seconds"`
		}
		return json.Unmarshal([]byte(raw), &v) == nil && slices.Equal(v.Widths, []int{1, 2, 3, 4, 5, 6, 7, 8}) && len(v.Seconds) == 8 && v.Seconds["1"] > 0
	}

	if !gen("--width", "4").Stats.CostsMeasured {
		t.Fatal("first run did not measure the costs")
	}
	first := stored("")
	if !valid(first) {
		t.Fatalf("stored costs %q", first)
	}
	// The table holds every width: a wider request, or auto, loads it too.
	for _, w := range []string{"4", "8", "0"} {
		if gen("--width", w).Stats.CostsMeasured {
			t.Errorf("width %s after a stored table measured the costs again", w)
		}
	}
	if gen("--width", "1").Stats.CostsMeasured {
		t.Error("width 1 measured the costs")
	}
	if again := stored(""); again != first {
		t.Errorf("stored costs changed without measuring: %s, then %s", first, again)
	}
	for _, bad := range []string{`"not a table"`, `{"widths":[1,2,3,4,5,6,7,8],"seconds":{"1":-1,"2":1,"3":1,"4":1,"5":1,"6":1,"7":1,"8":1}}`,
		`{"widths":[1,2],"seconds":{"1":0.001,"2":0.002}}`,
		// What a build that measured only up to the width asked stored.
		`{"widths":[1,2,3,4],"seconds":{"1":0.001,"2":0.0011,"3":0.0012,"4":0.0013}}`} {
		stored(bad)
		var errb bytes.Buffer
		args := []string{"generate", "--model", path, "--prompt-ids", "1 403 407 261 378", "--max-tokens", "60", "--json", "--data-dir", home, "--width", "4"}
		var out bytes.Buffer
		if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var g generateJSON
		if err := json.Unmarshal(out.Bytes(), &g); err != nil || !slices.Equal(g.IDs, testres.StoriesGreedy()) {
			t.Fatalf("stored %s: %v: %s", bad, err, out.String())
		}
		if !g.Stats.CostsMeasured {
			t.Errorf("stored %s: not measured again", bad)
		}
		if !strings.Contains(errb.String(), "stored call costs ignored") {
			t.Errorf("stored %s: no warning: %q", bad, errb.String())
		}
		if now := stored(""); now == bad || !valid(now) {
			t.Errorf("stored %s: not overwritten with a measured table: %s", bad, now)
		}
	}
	if !gen("--width", "4", "--no-cache").Stats.CostsMeasured {
		t.Error("--no-cache did not measure the costs")
	}
}
