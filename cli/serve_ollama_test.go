package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// ollamaClientReply is what cli/testdata/ollama_client.py saw of a finished
// reply.
type ollamaClientReply struct {
	Role, Content   string
	Response        string
	Pieces          []string
	Context         []int32
	Done            bool
	DoneReason      string  `json:"done_reason"`
	PromptEvalCount int     `json:"prompt_eval_count"`
	EvalCount       int     `json:"eval_count"`
	Durations       []int64 // total, load, prompt eval, eval (ns)
}

// realOllamaClient drives the Ollama routes of the started server s with the
// official ollama Python package (the venv build/scripts/deps-ollama.sh
// installs): chat and generate, whole and streamed, a context sent back,
// list, show, the version and the errors. want is the text the OpenAI route
// gave the same greedy request (16 tokens of "Once upon a time"): one
// generation path, so the same text.
func realOllamaClient(t *testing.T, ctx context.Context, root string, s *served, want string, promptTokens int) {
	python := filepath.Join(root, ".tools", "ollama-venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the ollama client venv is missing (%s): run bash build/scripts/deps-ollama.sh", python)
	}
	host := strings.TrimSuffix(s.url, "/v1")
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "ollama_client.py"), host, s.token, "stories260K")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("ollama client: %v\n%s", err, stderr.String())
	}
	type clientErr struct {
		Status int
		Error  string
	}
	var got struct {
		Version                   string
		Chat, Generate, Continued ollamaClientReply
		ChatStream                ollamaClientReply `json:"chat_stream"`
		GenerateStream            ollamaClientReply `json:"generate_stream"`
		List                      []struct {
			Model, Digest, Modified string
			Size                    int64
			Details                 map[string]any
		}
		Show struct {
			Details      map[string]any
			ModelInfo    map[string]any `json:"model_info"`
			Capabilities []string
		}
		ServerVersion map[string]string `json:"server_version"`
		Errors        map[string]*clientErr
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("ollama client printed %q: %v", raw, err)
	}
	t.Logf("ollama %s", got.Version)

	finished := func(what string, r ollamaClientReply) {
		t.Helper()
		d := r.Durations
		if !r.Done || r.DoneReason != "length" || r.PromptEvalCount != promptTokens || r.EvalCount != 16 || len(d) != 4 || d[0] <= 0 || d[2] <= 0 || d[1]+d[2]+d[3] > d[0] {
			t.Errorf("%s through ollama: %+v; want done, length, %d prompt and 16 reply tokens, durations in ns", what, r, promptTokens)
		}
	}
	if c := got.Chat; c.Role != "assistant" || c.Content != want {
		t.Errorf("chat through ollama: %+v; want %q", c, want)
	}
	finished("chat", got.Chat)
	if st := got.ChatStream; strings.Join(st.Pieces, "") != want || len(st.Pieces) < 2 {
		t.Errorf("streamed chat through ollama: %q, want %q in pieces", st.Pieces, want)
	}
	finished("streamed chat", got.ChatStream)
	// /api/generate renders its prompt as the user's message: the same.
	if g := got.Generate; g.Response != want || len(g.Context) != promptTokens+16 {
		t.Errorf("generate through ollama: %q with a context of %d ids; want %q and %d", g.Response, len(g.Context), want, promptTokens+16)
	}
	finished("generate", got.Generate)
	if g := got.GenerateStream; strings.Join(g.Pieces, "") != want || !slices.Equal(g.Context, got.Generate.Context) {
		t.Errorf("streamed generate through ollama: %q, context %v", g.Pieces, g.Context)
	}
	finished("streamed generate", got.GenerateStream)
	if c := got.Continued; c.PromptEvalCount <= len(got.Generate.Context) || !slices.Equal(c.Context[:len(got.Generate.Context)], got.Generate.Context) {
		t.Errorf("generate continuing a context through ollama: %+v; want it to begin with %v", c, got.Generate.Context)
	}

	st, err := os.Stat(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	if l := got.List; len(l) != 1 || l[0].Model != "stories260K" || l[0].Size != st.Size() || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(l[0].Digest) ||
		l[0].Modified == "" || l[0].Details["family"] != "llama" || l[0].Details["format"] != "gguf" || l[0].Details["parameter_size"] == "" || l[0].Details["quantization_level"] == "" {
		t.Errorf("list through ollama: %+v", l)
	}
	if sh := got.Show; sh.Details["family"] != "llama" || sh.ModelInfo["general.architecture"] != "llama" || sh.ModelInfo["llama.context_length"] == nil ||
		!slices.Equal(sh.Capabilities, []string{"completion"}) {
		t.Errorf("show through ollama: %+v", sh)
	}
	if v := got.ServerVersion["version"]; !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		t.Errorf("/api/version through ollama's httpx: %v", got.ServerVersion)
	}
	for name, c := range map[string]struct {
		status int
		says   string
	}{
		"unknown_model":        {404, `model "no-such-model" not found`},
		"unknown_model_stream": {404, `model "no-such-model" not found`},
		"unknown_show":         {404, `model "no-such-model" not found`},
		"bad_option":           {400, "options.top_k"},
		"format":               {400, "format:"},
		"bad_token":            {401, "bearer token"},
	} {
		if e := got.Errors[name]; e == nil || e.Status != c.status || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: ollama raised %+v, want %d saying %q", name, e, c.status, c.says)
		}
	}
}
