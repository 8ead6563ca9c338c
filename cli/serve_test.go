package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"anechat/internal/testres"
	"anechat/storage"
)

// served is an `anechat serve` running in this process.
type served struct {
	url, token string // base URL (…/v1) and bearer token, as it printed them
	stderr     *syncBuffer
	// stop stops the server (as Ctrl-C does) and waits for it to exit,
	// failing the test if it exits other than 0; the test's end stops it
	// too.
	stop func()
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs `anechat serve --port 0` with args until the test ends,
// and returns once it listens.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	errb := &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, append([]string{"serve", "--port", "0"}, args...), nil, pw, errb)
		pw.Close()
	}()
	s := &served{stderr: errb}
	sc := bufio.NewScanner(pr)
	for (s.url == "" || s.token == "") && sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, " on http://"); strings.HasPrefix(line, "anechat serve: ") && i > 0 {
			s.url = line[i+len(" on "):]
		}
		if tok, ok := strings.CutPrefix(line, "token: "); ok {
			s.token = tok
		}
	}
	go io.Copy(io.Discard, pr)
	if s.url == "" || s.token == "" {
		cancel()
		t.Fatalf("serve %v did not start (exit %d): %s", args, <-exit, errb.String())
	}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if code := <-exit; code != 0 {
				t.Errorf("serve exited %d: %s", code, errb.String())
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

// post sends body to the server's path with the token and decodes the JSON
// reply into out; it returns the status.
func (s *served) post(t *testing.T, path string, body any, out any) int {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.url+strings.TrimPrefix(path, "/v1"), bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return resp.StatusCode
}

// apiReply is what the tests read of a completion.
type apiReply struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// Greedy output through the API is byte-identical to `anechat generate`
// for the same messages (a chat), or the same text (--raw, a completion),
// and usage counts what generate's ids count.
func TestServeMatchesGenerate(t *testing.T) {
	models := []string{testres.Stories(t)}
	if !testing.Short() {
		models = append(models, testres.SmolLM2GGUF(t))
	}
	for _, path := range models {
		s := startServe(t, "--data-dir", t.TempDir(), "--model", path)
		name := strings.TrimSuffix(path[strings.LastIndex(path, "/")+1:], ".gguf")
		prompts := []string{"Once upon a time", "What is the capital of France?"}
		if path != models[0] {
			prompts = prompts[1:] // SmolLM2 loads slower: one prompt
		}
		for _, prompt := range prompts {
			for _, raw := range []bool{false, true} {
				args := []string{"--model", path, "--prompt", prompt, "--max-tokens", "24", "--no-cache"}
				api, endpoint := map[string]any{"model": name, "max_tokens": 24, "temperature": 0}, "/v1/chat/completions"
				if raw {
					args = append(args, "--raw")
					api["prompt"], endpoint = prompt, "/v1/completions"
				} else {
					api["messages"] = []map[string]any{{"role": "user", "content": prompt}}
				}
				g := genJSON(t, args...)
				var r apiReply
				if code := s.post(t, endpoint, api, &r); code != 200 || len(r.Choices) != 1 {
					t.Fatalf("%s %s: %d %+v", name, endpoint, code, r)
				}
				got := r.Choices[0].Message.Content + r.Choices[0].Text
				if got != g.Text || r.Usage.PromptTokens != len(g.PromptIDs) || r.Usage.CompletionTokens != len(g.IDs) {
					t.Fatalf("%s %s %q: API %q (usage %+v), generate %q (%d prompt ids, %d ids)",
						name, endpoint, prompt, got, r.Usage, g.Text, len(g.PromptIDs), len(g.IDs))
				}
			}
		}
	}
}

// The token is kept in the data directory: a restart prints the same one.
// A registered model is served by its name, and without --model the data
// directory's default model is served.
func TestServeTokenAndModelName(t *testing.T) {
	dir := t.TempDir()
	path := testres.Stories(t)
	db, err := storage.Open(context.Background(), storage.DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	m, err := db.RegisterModel(context.Background(), storage.ModelInput{Path: path, Kind: "gguf", Name: "tiny stories"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetSetting(context.Background(), storage.SettingDefaultModelID, m.ID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	first := startServe(t, "--data-dir", dir, "--model", "tiny stories")
	// --compute-units is for Core ML bundles: a GGUF model runs on the CPU
	// backend whatever it says.
	second := startServe(t, "--data-dir", dir, "--compute-units", "gpu")
	if first.token != second.token || len(first.token) != 64 {
		t.Fatalf("tokens %q and %q: want one 64-digit token kept in the data dir", first.token, second.token)
	}
	for _, s := range []*served{first, second} {
		var r apiReply
		if code := s.post(t, "/v1/chat/completions", map[string]any{"model": "tiny stories", "max_tokens": 3,
			"messages": []map[string]any{{"role": "user", "content": "Lily"}}}, &r); code != 200 || r.Usage.CompletionTokens != 3 {
			t.Fatalf("%s: %d %+v", s.url, code, r)
		}
	}
}

func TestServeBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--width", "9"}, 2, "--width 9"},
		{[]string{"--port", "70000"}, 2, "--port 70000"},
		{[]string{"--queue", "0"}, 2, "--queue 0"},
		{[]string{"--warm-sessions", "0"}, 2, "--warm-sessions 0: want at least 1"},
		{[]string{"--warm-mb", "0"}, 2, "--warm-mb 0: want at least 1"},
		{[]string{"--cors", "localhost"}, 2, "--cors \"localhost\""},
		{[]string{"--temperature", "3"}, 2, "--temperature 3"},
		{[]string{"--compute-units", "npu"}, 2, `--compute-units "npu": want neural-engine, gpu, cpu or all`},
		{[]string{"--data-dir", t.TempDir(), "--model", "nothing-by-that-name"}, 1, "nothing-by-that-name: no such file or directory, and no model of that name is registered"},
		{[]string{"--data-dir", t.TempDir()}, 1, "no --model given and the data directory"},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"serve"}, tc.args...), nil, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}

// resumedReply is a chat completion's text and how much of its prompt the
// server resumed.
type resumedReply struct {
	apiReply
	Anechat struct {
		ResumedTokens int `json:"resumed_tokens"`
	} `json:"anechat"`
}

// interleavedOpenings are three clients' first messages: long enough that
// the next turn (stories260K's plain template) shares most of its prompt
// with the last one, short enough (under a 64-token block) that no snapshot
// on disk could serve it.
var interleavedOpenings = []string{
	"Lily and Tom played in the park with a big red ball all day long",
	"The little dog ran to the tree and barked at the bird in the sun",
	"Mom gave Sue a cake and a cup of milk and they sat in the garden",
}

// interleave sends the opening of each conversation, then the next turn of
// each, in turn, and returns the second turns' replies.
func interleave(t *testing.T, s *served) []resumedReply {
	t.Helper()
	convs := make([][]map[string]any, len(interleavedOpenings))
	var out []resumedReply
	for turn := range 2 {
		for i, o := range interleavedOpenings {
			if turn == 0 {
				convs[i] = []map[string]any{{"role": "user", "content": o}}
			}
			var r resumedReply
			if code := s.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "max_tokens": 8, "temperature": 0,
				"messages": convs[i]}, &r); code != 200 || len(r.Choices) == 0 {
				t.Fatalf("conversation %d, turn %d: status %d %+v", i, turn+1, code, r)
			}
			convs[i] = append(convs[i], map[string]any{"role": "assistant", "content": r.Choices[0].Message.Content},
				map[string]any{"role": "user", "content": "And then?"})
			if turn == 1 {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestServeWarmSessions: by default the server keeps each of three
// interleaved conversations warm, so their next turns resume from memory;
// --warm-sessions 1 keeps only the last (these prompts are too short for a
// snapshot on disk), and the replies are the same.
func TestServeWarmSessions(t *testing.T) {
	warm := interleave(t, startServe(t, "--data-dir", t.TempDir(), "--model", testres.Stories(t)))
	one := interleave(t, startServe(t, "--data-dir", t.TempDir(), "--model", testres.Stories(t), "--warm-sessions", "1"))
	for i := range warm {
		if warm[i].Anechat.ResumedTokens == 0 || one[i].Anechat.ResumedTokens != 0 ||
			warm[i].Choices[0].Message.Content != one[i].Choices[0].Message.Content {
			t.Errorf("conversation %d's next turn: resumed %d by default (%q), %d with --warm-sessions 1 (%q); want resumed, then not, the same text",
				i, warm[i].Anechat.ResumedTokens, warm[i].Choices[0].Message.Content, one[i].Anechat.ResumedTokens, one[i].Choices[0].Message.Content)
		}
	}
}
