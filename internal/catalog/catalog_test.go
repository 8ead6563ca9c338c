package catalog

import (
	"regexp"
	"strings"
	"testing"
)

// TestShippedCatalog: the catalog in the binary loads, holds the models
// the issue lists, and writes down no checksum or commit of its own outside
// the pins (which only the pin script writes, from the Hub's tree).
func TestShippedCatalog(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"gemma-4-e2b-ane":       FormatCoreML,
		"gemma-4-e2b-it-q4_k_m": FormatGGUF,
		"gemma-4-e2b-it-q8_0":   FormatGGUF,
		"gemma-4-e4b-it-q4_k_m": FormatGGUF,
		"gemma-4-e4b-it-q8_0":   FormatGGUF,
		"gemma-3-270m-it":       FormatGGUF,
		"gemma-3-1b-it":         FormatGGUF,
		"qwen3-0.6b":            FormatGGUF,
		"qwen3-1.7b":            FormatGGUF,
		"llama-3.2-1b-instruct": FormatGGUF,
		"smollm2-135m-instruct": FormatGGUF,
		"smollm2-360m-instruct": FormatGGUF,
	}
	for name, format := range want {
		e, ok := c.Find(name)
		if !ok || e.Format != format {
			t.Errorf("%s: missing or not %s", name, format)
		}
	}
	if c.Entries[0].Name != "gemma-4-e2b-ane" {
		t.Errorf("first (recommended first) entry %s, want the Neural Engine bundle", c.Entries[0].Name)
	}
	hexRun := regexp.MustCompile(`\b[0-9a-f]{40,64}\b`)
	for _, e := range c.Entries {
		fields := []string{e.Repo, e.Revision}
		for _, f := range e.Files {
			fields = append(fields, f.Path, f.As)
		}
		for _, s := range fields {
			if hexRun.MatchString(s) {
				t.Errorf("%s: %q looks like a checksum or a commit: those come from the Hub's tree", e.Name, s)
			}
		}
	}
	// The bundle lands in the layout the published-bundle loader reads.
	e, _ := c.Find("gemma-4-e2b-ane")
	targets := map[string]bool{}
	for _, f := range e.Files {
		targets[f.Target()] = true
	}
	for _, need := range []string{"model_config.json", "tokenizer.json", "embed_tokens_q8.bin", "embed_tokens_scales.bin",
		"embed_tokens_per_layer_q8.bin", "embed_tokens_per_layer_scales.bin", "per_layer_projection.bin",
		"cos_sliding.npy", "sin_sliding.npy", "cos_full.npy", "sin_full.npy",
		"chunk1.mlmodelc/", "chunk2.mlmodelc/", "chunk3.mlmodelc/", "chunk4.mlmodelc/"} {
		if !targets[need] {
			t.Errorf("the bundle entry puts nothing at %s", need)
		}
	}
}

// TestParseRefuses: a bad entry is refused with its name and field.
func TestParseRefuses(t *testing.T) {
	good := `{"name":"x","title":"X","repo":"o/r","revision":"main","format":"gguf","backend":"cpu","context":4096,
		"licence":"MIT","licenceURL":"https://opensource.org/license/mit","files":[{"path":"x-Q8_0.gguf"}],"sources":["s"]}`
	if _, err := Parse([]byte(`{"entries":[` + good + `]}`)); err != nil {
		t.Fatalf("good entry: %v", err)
	}
	// A pinned entry (what go run ./internal/catalog/pin writes).
	const commit = "0123456789abcdef0123456789abcdef01234567"
	pin := `{"path":"x-Q8_0.gguf","size":1185376,"sha256":"270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"}`
	pinned := strings.Replace(good, `"sources":["s"]`, `"sources":["s"],"commit":"`+commit+`","pins":[`+pin+`]`, 1)
	if c, err := Parse([]byte(`{"entries":[` + pinned + `]}`)); err != nil || c.Entries[0].TargetRevision() != commit {
		t.Fatalf("pinned entry: %v", err)
	}
	for name, tc := range map[string]struct{ from, to, want string }{
		"sha256 written in":  {`"sources"`, `"sha256":"ab","sources"`, `unknown field "sha256"`},
		"bad repo":           {`"o/r"`, `"../r"`, "repo"},
		"gguf on coreml":     {`"backend":"cpu"`, `"backend":"coreml"`, "backend"},
		"two gguf files":     {`[{"path":"x-Q8_0.gguf"}]`, `[{"path":"a.gguf"},{"path":"b.gguf"}]`, "one .gguf file"},
		"not gguf":           {`"x-Q8_0.gguf"`, `"x.bin"`, "one .gguf file"},
		"no sources":         {`"sources":["s"]`, `"sources":[]`, "sources"},
		"plain http licence": {`https://opensource`, `http://opensource`, "licenceURL"},
		"no context":         {`"context":4096`, `"context":0`, "context"},
		"upper-case name":    {`"name":"x"`, `"name":"X"`, "name"},
		"repository as name": {`"name":"x"`, `"name":"o/r"`, "name"},
		"escaping file":      {`"x-Q8_0.gguf"`, `"../x.gguf"`, "gguf"},
		"pins, no commit":    {`"sources":["s"]`, `"sources":["s"],"pins":[` + pin + `]`, "pins: no commit"},
		"branch as commit":   {`"sources":["s"]`, `"sources":["s"],"commit":"main","pins":[` + pin + `]`, `commit "main"`},
		"commit, no pins":    {`"sources":["s"]`, `"sources":["s"],"commit":"` + commit + `"`, "no pins"},
		"two checksums":      {`"sources":["s"]`, `"sources":["s"],"commit":"` + commit + `","pins":[` + strings.Replace(pin, `}`, `,"gitBlob":"`+commit+`"}`, 1) + `]`, "one checksum"},
		"short sha256":       {`"sources":["s"]`, `"sources":["s"],"commit":"` + commit + `","pins":[{"path":"x-Q8_0.gguf","size":1,"sha256":"ab"}]`, "sha256"},
		"pin escapes":        {`"sources":["s"]`, `"sources":["s"],"commit":"` + commit + `","pins":[` + strings.Replace(pin, "x-Q8_0", "../x", 1) + `]`, "pins"},
	} {
		_, err := Parse([]byte(`{"entries":[` + strings.Replace(good, tc.from, tc.to, 1) + `]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %s", name, err, tc.want)
		}
	}
	bundle := strings.NewReplacer(`"format":"gguf","backend":"cpu"`, `"format":"coreml","backend":"coreml"`)
	for name, tc := range map[string]struct{ files, want string }{
		"folder to file":  {`[{"path":"swa/c.mlmodelc/","as":"c.mlmodelc"}]`, "a folder goes to a folder"},
		"two to one":      {`[{"path":"a/x.npy","as":"x.npy"},{"path":"x.npy"}]`, "two files go to x.npy"},
		"hidden target":   {`[{"path":"a","as":".a"}]`, "not a plain path"},
		"escaping target": {`[{"path":"a","as":"../a"}]`, "not a plain path"},
	} {
		entry := bundle.Replace(strings.Replace(good, `[{"path":"x-Q8_0.gguf"}]`, tc.files, 1))
		_, err := Parse([]byte(`{"entries":[` + entry + `]}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bundle %s: %v, want %q", name, err, tc.want)
		}
	}
	if _, err := Parse([]byte(`{"entries":[` + good + `,` + good + `]}`)); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Errorf("duplicate name: %v", err)
	}
}

// TestFit: the memory need and the verdicts, the Neural Engine only on an
// Apple silicon Mac, and the recommendation per machine.
func TestFit(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	const gib = int64(1) << 30
	if got := Need(10 * gib); got != 11*gib+512<<20 {
		t.Errorf("Need(10 GiB) = %d", got)
	}
	ane, _ := c.Find("gemma-4-e2b-ane")
	mac16 := Machine{GOOS: "darwin", GOARCH: "arm64", RAM: 16 * gib}
	linux8 := Machine{GOOS: "linux", GOARCH: "amd64", RAM: 8 * gib}
	if f := Assess(ane, 0, mac16); f.Verdict != Fits || !f.NeuralEngine || f.Size != ane.ApproxBytes || !strings.Contains(f.Note, "Neural Engine") {
		t.Errorf("bundle on a 16 GB Mac: %+v", f)
	}
	if f := Assess(ane, 0, linux8); f.Verdict != Elsewhere || f.NeuralEngine || !strings.Contains(f.Note, "linux/amd64") {
		t.Errorf("bundle on Linux: %+v", f)
	}
	if f := Assess(ane, 0, Machine{GOOS: "darwin", GOARCH: "arm64", RAM: 4 * gib}); f.Verdict != TooLarge {
		t.Errorf("bundle on a 4 GB Mac: %+v", f)
	}
	if f := Assess(ane, 0, Machine{GOOS: "darwin", GOARCH: "arm64", RAM: 5 * gib}); f.Verdict != Tight {
		t.Errorf("bundle on a 5 GB Mac: %+v", f)
	}
	small, _ := c.Find("smollm2-135m-instruct")
	if f := Assess(small, 0, linux8); f.Verdict != Unknown {
		t.Errorf("a GGUF of unknown size: %+v", f)
	}
	if f := Assess(small, 150<<20, Machine{GOOS: "linux", GOARCH: "amd64"}); f.Verdict != Unknown || !strings.Contains(f.Note, "not known") {
		t.Errorf("unknown RAM: %+v", f)
	}
	if i := c.Recommend(mac16, nil); i != 0 {
		t.Errorf("recommended on a 16 GB Mac: %d, want the bundle", i)
	}
	if i := c.Recommend(linux8, nil); i != -1 {
		t.Errorf("recommended on Linux with no sizes known: %d", i)
	}
	sizes := make([]int64, len(c.Entries))
	for i, e := range c.Entries {
		if e.Format == FormatGGUF {
			sizes[i] = 7 * gib // too large for 8 GB at 3/4
		}
	}
	q1, _ := c.Find("gemma-3-1b-it")
	for i := range c.Entries {
		if &c.Entries[i] == q1 {
			sizes[i] = 800 << 20
		}
	}
	if i := c.Recommend(linux8, sizes); i < 0 || c.Entries[i].Name != "gemma-3-1b-it" {
		t.Errorf("recommended on Linux 8 GB: %d", i)
	}
	if ThisMachine().GOOS == "linux" && ThisMachine().RAM <= 0 {
		t.Error("this Linux machine's memory was not read from /proc/meminfo")
	}
}
