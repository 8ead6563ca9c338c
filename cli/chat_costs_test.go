package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"anechat/engine"
	"anechat/engine/cpu"
	"anechat/engine/load"
	"anechat/internal/testres"
)

// TestChatKeepsCosts: like generate, a speculative chat with a data dir
// measures the call costs of every width once and stores them under the
// model's and the kernels' key; the next chat, at another width, loads them
// and does not measure (the table is left as it was: a measurement would
// overwrite it), with the same transcript. --no-cache does not touch the data directory.
func TestChatKeepsCosts(t *testing.T) {
	path := testres.Stories(t)
	home := t.TempDir()
	src, err := load.Detect(path)
	if err != nil {
		t.Fatal(err)
	}
	fp := src.Fingerprint
	key := engine.CostsKey(fp, cpu.Kernels())
	// setting returns the stored table and replaces it with set when not nil.
	setting := func(set json.RawMessage) json.RawMessage {
		t.Helper()
		raw, found := storedSetting(t, home, key, set)
		if !found {
			t.Fatalf("no costs under %q", key)
		}
		return raw
	}
	chat := func(extra ...string) string {
		t.Helper()
		args := append([]string{"--model", path, "--max-tokens", "20", "--width", "4", "--data-dir", home}, extra...)
		return runChatWith(t, "Once upon a time\n", args...)
	}
	first := chat()
	var sc struct {
		Widths  []int              `json:"widths"`
		Seconds map[string]float64 `json:"seconds"`
	}
	// Every width is measured, whatever width the chat asked for.
	if raw := setting(nil); json.Unmarshal(raw, &sc) != nil || !slices.Equal(sc.Widths, []int{1, 2, 3, 4, 5, 6, 7, 8}) || len(sc.Seconds) != 8 {
		t.Fatalf("first chat stored %s", raw)
	}
	// A table no measurement would give: still there after the second chat
	// (at auto width, wider than the first) means it was loaded, not
	// measured again.
	marked := json.RawMessage(`{"widths":[1,2,3,4,5,6,7,8],"seconds":{"1":0.25,"2":0.5,"3":0.75,"4":1,"5":1.25,"6":1.5,"7":1.75,"8":2}}`)
	setting(marked)
	if second := chat("--width", "0"); second != first {
		t.Errorf("second chat:\n%q\nfirst:\n%q", second, first)
	}
	var got, want any
	if err := json.Unmarshal(setting(nil), &got); err != nil || json.Unmarshal(marked, &want) != nil || !jsonEqual(got, want) {
		t.Errorf("second chat measured again: the table is now %v (%v), want %v", got, err, want)
	}
	fresh := filepath.Join(t.TempDir(), "unused")
	if out := runChatWith(t, "Once upon a time\n", "--model", path, "--max-tokens", "20", "--width", "4", "--data-dir", fresh, "--no-cache"); out != first {
		t.Errorf("--no-cache chat:\n%q\nfirst:\n%q", out, first)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("--no-cache chat used the data directory %s: %v", fresh, err)
	}
}

// jsonEqual compares decoded JSON values.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
