package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"anechat/internal/testres"
)

func TestBenchResume(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"bench", "resume", "--model", testres.Stories(t), "--prompt-tokens", "128", "--repeat", "1", "--json"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Results []resumeFigures `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(res.Results) != 1 {
		t.Fatalf("results %+v", res.Results)
	}
	r := res.Results[0]
	if r.PromptTokens != 128 || !r.Exact || r.SnapshotBytes <= 0 || r.FreshTTFTms <= 0 || r.ResumedTTFTms <= 0 || r.LoadGBps <= 0 {
		t.Errorf("figures %+v", r)
	}
}

func TestBenchUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"bench"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "resume") {
		t.Errorf("bench with no case: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := Run(context.Background(), []string{"bench", "nope"}, nil, &out, &errb); code != 2 {
		t.Errorf("unknown bench: exit %d", code)
	}
	if code := Run(context.Background(), []string{"bench", "resume"}, nil, &out, &errb); code != 2 {
		t.Errorf("bench resume without --model: exit %d", code)
	}
	if code := Run(context.Background(), []string{"bench", "resume", "--model", "x", "--prompt-tokens", "10"}, nil, &out, &errb); code != 1 {
		t.Errorf("bench resume with a short prompt: exit %d", code)
	}
}
