package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/constrain"
	"anechat/engine/spec"
	"anechat/internal/testres"
)

func TestBenchSpecStories(t *testing.T) {
	model := testres.Stories(t)
	// Token-id prompts (no tokenizer needed): one with a repeated span, where
	// prompt lookup finds drafts, one without.
	work := filepath.Join(t.TempDir(), "w.jsonl")
	lines := `{"id":"copy","category":"rewrite","ids":[1,403,407,261,378,432,383,286,261,376,298,315,421,395,1,403,407,261,378,432,383],"max_tokens":24}
{"id":"open","category":"chat","ids":[1,403,407],"max_tokens":16}
`
	if err := os.WriteFile(work, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"bench", "spec", "--model", model, "--prompts", work, "--widths", "2,4,0", "--reps", "1", "--fixed-costs", "--json"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep specReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out.String())
	}
	if len(rep.Prompts) != 2 || len(rep.Widths) != 4 || rep.Widths[0] != 1 {
		t.Fatalf("report shape: %d prompts, widths %v", len(rep.Prompts), rep.Widths)
	}
	for _, p := range rep.Prompts {
		if len(p.Runs) != 4 {
			t.Fatalf("%s: %d runs", p.ID, len(p.Runs))
		}
		for _, r := range p.Runs {
			// Every call yields its accepted drafts plus one token; the
			// first token comes from the prompt's prefill.
			if !r.Identical || r.Tokens != p.Runs[0].Tokens || r.TargetCalls+r.Accepted+1 != r.Tokens {
				t.Fatalf("%s width %d: %+v", p.ID, r.Width, r)
			}
			// Fixed costs are the measured ones: nothing is declined on
			// cost, nothing probed.
			if r.Declined != 0 || r.Probes != 0 {
				t.Fatalf("%s width %d with --fixed-costs: declined %d, probes %d", p.ID, r.Width, r.Declined, r.Probes)
			}
		}
		if p.Runs[0].Drafted != 0 || p.Runs[0].Speedup != 1 || p.Runs[0].ModelSpeedup != 1 {
			t.Fatalf("%s width 1: %+v", p.ID, p.Runs[0])
		}
	}
	cats := map[string]bool{}
	for _, s := range rep.Summary {
		cats[s.Category] = true
		if s.Identical != s.Prompts {
			t.Fatalf("summary %+v", s)
		}
	}
	if !cats["rewrite"] || !cats["chat"] || !cats["all"] || len(rep.CostsMs) != 8 {
		t.Fatalf("summary categories %v, costs %v", cats, rep.CostsMs)
	}
	// Model speedup follows from the calls made and the measured costs:
	// with drafts accepted it differs from 1, with none it is at most 1.
	for _, p := range rep.Prompts {
		for _, r := range p.Runs[1:] {
			if r.ModelSpeedup <= 0 || (r.Accepted == 0 && r.ModelSpeedup > 1+1e-9) {
				t.Fatalf("%s width %d: model speedup %v with %d accepted", p.ID, r.Width, r.ModelSpeedup, r.Accepted)
			}
		}
	}
	// The table form prints the summary.
	out.Reset()
	if code := Run(context.Background(), []string{"bench", "spec", "--model", model, "--prompts", work, "--widths", "4", "--reps", "1"}, nil, &out, &errb); code != 0 {
		t.Fatalf("table: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "category") || !strings.Contains(out.String(), "rewrite") {
		t.Fatalf("table output:\n%s", out.String())
	}
	// --carry: one verify loop for every run (the app's case), its costs
	// following the calls; the output stays that of width 1.
	out.Reset()
	if code := Run(context.Background(), []string{"bench", "spec", "--model", model, "--prompts", work, "--widths", "2,4,0", "--reps", "2", "--carry", "--json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("--carry: exit %d: %s", code, errb.String())
	}
	rep = specReport{}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("--carry: bad JSON: %v\n%s", err, out.String())
	}
	for _, p := range rep.Prompts {
		for _, r := range p.Runs {
			if !r.Identical || r.Tokens != p.Runs[0].Tokens {
				t.Fatalf("--carry: %s width %d: %+v", p.ID, r.Width, r)
			}
		}
	}
}

func TestBenchSpecBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"id\":\"x\",\"prompt\":\"hi\",\"bogus\":1}\n"), 0o644)
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, []byte("\n"), 0o644)
	noText := filepath.Join(dir, "notext.jsonl")
	os.WriteFile(noText, []byte("{\"id\":\"x\"}\n"), 0o644)
	for name, args := range map[string][]string{
		"no model":      {"bench", "spec"},
		"bad widths":    {"bench", "spec", "--model", "m.gguf", "--widths", "9"},
		"unknown field": {"bench", "spec", "--model", "m.gguf", "--prompts", bad},
		"empty file":    {"bench", "spec", "--model", "m.gguf", "--prompts", empty},
		"no text":       {"bench", "spec", "--model", "m.gguf", "--prompts", noText},
		"missing file":  {"bench", "spec", "--model", "m.gguf", "--prompts", filepath.Join(dir, "nope")},
	} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, nil, &out, &errb); code == 0 {
			t.Errorf("%s: exit 0", name)
		}
	}
	ws, err := parseWidths("4, 2,4,0")
	if err != nil || len(ws) != 4 || ws[0] != 1 || ws[1] != 4 || ws[3] != 0 {
		t.Fatalf("parseWidths: %v %v", ws, err)
	}
}

func TestWorkloadFileParses(t *testing.T) {
	ps, err := readSpecWorkload(filepath.Join("..", "bench", "workloads", "spec.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	cats := map[string]int{}
	for _, p := range ps {
		cats[p.Category]++
	}
	for _, c := range []string{"summarise", "rewrite", "code-edit", "doc-qa", "list", "chat", "creative"} {
		if cats[c] < 3 {
			t.Errorf("category %s has %d prompts", c, cats[c])
		}
	}
}

// A workload line's schema constrains its reply: the finished reply matches
// it at every width, --unconstrained drops it, and the JSON workload's
// schemas all compile.
func TestBenchSpecSchema(t *testing.T) {
	model := testres.Stories(t)
	work := filepath.Join(t.TempDir(), "w.jsonl")
	lines := `{"id":"mood","category":"json","prompt":"Once upon a time","raw":true,"max_tokens":60,"schema":{"type":"object","properties":{"mood":{"enum":["happy","sad"]},"ok":{"type":"boolean"}},"required":["mood","ok"],"additionalProperties":false}}
`
	if err := os.WriteFile(work, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, unconstrained := range []bool{false, true} {
		args := []string{"bench", "spec", "--model", model, "--prompts", work, "--widths", "4,0", "--reps", "1", "--fixed-costs", "--json"}
		if unconstrained {
			args = append(args, "--unconstrained")
		}
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var rep specReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		p := rep.Prompts[0]
		if p.Constrained == unconstrained {
			t.Errorf("unconstrained %v: report says constrained %v", unconstrained, p.Constrained)
		}
		if !unconstrained && (p.Stopped != "stop" || p.Valid == nil || !*p.Valid) {
			t.Errorf("constrained reply: stopped %q, valid %v", p.Stopped, p.Valid)
		}
		forced := 0
		for _, r := range p.Runs {
			if !r.Identical {
				t.Errorf("unconstrained %v width %d: not identical to width 1", unconstrained, r.Width)
			}
			forced += r.Sources[spec.ForcedName].Drafted
		}
		// The grammar's forced text drafts under the schema (the enum's
		// keys and quotes), and nothing without it.
		if (forced > 0) == unconstrained {
			t.Errorf("unconstrained %v: %d drafts from the forced text (%v)", unconstrained, forced, p.Runs)
		}
	}
	ps, err := readSpecWorkload(filepath.Join("..", "bench", "workloads", "json.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if _, err := constrain.CompileSchema(p.Schema); err != nil {
			t.Errorf("%s: %v", p.ID, err)
		}
	}
}
