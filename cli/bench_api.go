package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"anechat/internal/kvindex"
	"anechat/internal/sessions"
	"anechat/server"
)

// benchAPISystem and benchAPIQuestions are the replayed conversation: a
// system prompt and ten user turns, each answered before the next is sent.
const benchAPISystem = "You are a patient writing tutor. You answer in a few plain sentences, you give one short example " +
	"when it helps, and you never use lists or headings. The student is writing a short story for children about a " +
	"lighthouse keeper and her cat, and asks about style, words and structure."

var benchAPIQuestions = []string{
	"How should the story begin?",
	"What could the cat be called?",
	"How do I describe the lighthouse at night?",
	"Should the keeper talk to the cat?",
	"What problem could happen in the middle?",
	"How do I make a storm sound scary but not too scary?",
	"How does the cat help during the storm?",
	"How should the story end?",
	"What title would you give it?",
	"Can you suggest a first sentence?",
}

// maxBenchConversations bounds --conversations: the names of the openings
// run A..Z.
const maxBenchConversations = 26

// apiTarget is a server the benchmark replays the conversation against.
type apiTarget struct {
	Name  string `json:"name"`
	URL   string `json:"url"` // base URL, …/v1
	token string
	extra map[string]any // added to every request
}

// apiTurn is one turn's figures on one target.
type apiTurn struct {
	// TTFTms is the median over the rounds of the time from sending the
	// request to the first piece of text, measured by the client.
	TTFTms float64 `json:"ttft_ms"`
	// PromptTokens is the prompt as the server counted it (usage);
	// ResumedTokens how much of it anechat reused (0 for other servers).
	PromptTokens  int `json:"prompt_tokens"`
	ResumedTokens int `json:"resumed_tokens"`
}

// runBenchAPI is `anechat bench api`: time to first token of each turn of a
// replayed conversation through the HTTP API, on anechat serve with resume
// (the session in memory, KV snapshots on disk) and without (every prompt
// prefilled whole), and optionally on another OpenAI-compatible server
// (llama.cpp's llama-server with its prompt cache), in one run.
func runBenchAPI(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench api", "--model PATH [--turns 10] [--max-tokens 32] [--rounds 3] [--conversations 1] [--no-system] [--against URL] [--against-name NAME] [--json]")
	modelPath := fs.String("model", "", "model file (.gguf) both anechat servers run (give llama-server the same file)")
	turns := fs.Int("turns", len(benchAPIQuestions), "turns of the conversation replayed")
	maxTokens := fs.Int("max-tokens", 32, "tokens per reply")
	rounds := fs.Int("rounds", 3, "replays of the conversation per server (the median TTFT of each turn is reported); the servers take turns, turn by turn")
	conversations := fs.Int("conversations", 1, "conversations replayed side by side, taking turns (turn k of each before turn k+1 of any), as several clients of one server do; the figures of a turn are over all of them: TTFT the median, resumed the least")
	noSystem := fs.Bool("no-system", false, "no system prompt: the conversation's name opens its first question instead, so the first turns are short (under a 64-token block, which no snapshot on disk serves)")
	against := fs.String("against", "", "base URL (…/v1) of another OpenAI-compatible server to replay the same conversation against, e.g. llama-server's")
	againstName := fs.String("against-name", "llama-server", "what to call --against in the table")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *modelPath == "" {
		fs.Usage()
		return errUsage
	}
	switch {
	case *turns < 1 || *turns > len(benchAPIQuestions):
		return badFlag(env, "bench api", fmt.Errorf("--turns %d: want 1..%d", *turns, len(benchAPIQuestions)))
	case *maxTokens < 1:
		return badFlag(env, "bench api", fmt.Errorf("--max-tokens %d: want at least 1", *maxTokens))
	case *rounds < 1:
		return badFlag(env, "bench api", fmt.Errorf("--rounds %d: want at least 1", *rounds))
	case *conversations < 1 || *conversations > maxBenchConversations:
		return badFlag(env, "bench api", fmt.Errorf("--conversations %d: want 1..%d", *conversations, maxBenchConversations))
	}
	log := cliLogger(env)
	dir, err := os.MkdirTemp("", "anechat-bench-api-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	x, err := kvindex.Open(ctx, dir, log)
	if err != nil {
		return err
	}
	defer x.Close()
	name := *modelPath
	if m, err := servedModel(ctx, dir, *modelPath, log); err == nil {
		name = m.ID
	}
	var targets []apiTarget
	for _, resume := range []bool{true, false} {
		run := sessions.New(log, nil)
		defer run.Close()
		label := "anechat (resume)"
		if resume {
			run.UseStorage(x, x.DB())
			defer run.UseStorage(nil, nil)
		} else {
			// Measured call costs are kept (the database's settings), KV
			// neither in memory nor on disk.
			run.UseStorage(nil, x.DB())
			defer run.UseStorage(nil, nil)
			run.NoResume()
			label = "anechat (no resume)"
		}
		url, token, stop, err := benchServer(ctx, run, *modelPath, name, log)
		if err != nil {
			return err
		}
		defer stop()
		targets = append(targets, apiTarget{Name: label, URL: url, token: token})
	}
	if *against != "" {
		targets = append(targets, apiTarget{Name: *againstName, URL: strings.TrimSuffix(*against, "/"),
			extra: map[string]any{"cache_prompt": true}})
	}

	// Warm every server (model load, measured call costs) on another
	// conversation, so that the first timed turn is a turn like the others.
	for _, tg := range targets {
		if _, err := apiStream(ctx, tg, name, []map[string]any{{"role": "user", "content": "Hello."}}, 4); err != nil {
			return fmt.Errorf("%s (%s): %w", tg.Name, tg.URL, err)
		}
	}
	// The replies sent back are the first server's in the same round (what
	// a client sends back is what the model wrote for that conversation:
	// its KV holds it); every server is sent the same messages.
	ttft := make([][][]float64, len(targets)) // [target][turn][round and conversation]
	figures := make([][]apiTurn, len(targets))
	for i := range targets {
		ttft[i] = make([][]float64, *turns)
		figures[i] = make([]apiTurn, *turns)
		for k := range figures[i] {
			figures[i][k].ResumedTokens = -1 // none yet: the least is taken
		}
	}
	// opening names conversation c of round r ("Conversation 2B."); it
	// opens the system prompt, or the first question with --no-system.
	opening := func(r, c int) string {
		if *conversations > 1 {
			return fmt.Sprintf("Conversation %d%c.", r+1, 'A'+c)
		}
		return fmt.Sprintf("Conversation %d.", r+1)
	}
	for r := range *rounds {
		answers := make([][]string, *conversations) // [conversation][turn]
		// A new opening per round, so that no server resumes a round from
		// the last one. The servers take turns turn by turn, so that a
		// burst of load on the machine falls on all of them alike.
		msgs := make([][][]map[string]any, len(targets)) // [target][conversation]
		for i := range targets {
			msgs[i] = make([][]map[string]any, *conversations)
			for c := range *conversations {
				msgs[i][c] = []map[string]any{{"role": "system", "content": opening(r, c) + " " + benchAPISystem}}
				if *noSystem {
					msgs[i][c] = nil
				}
			}
		}
		for k := range *turns {
			for c := range *conversations {
				for i, tg := range targets {
					q := benchAPIQuestions[k]
					if *noSystem && k == 0 {
						q = opening(r, c) + " " + q
					}
					msgs[i][c] = append(msgs[i][c], map[string]any{"role": "user", "content": q})
					res, err := apiStream(ctx, tg, name, msgs[i][c], *maxTokens)
					if err != nil {
						return fmt.Errorf("%s turn %d: %w", tg.Name, k+1, err)
					}
					if len(answers[c]) <= k {
						answers[c] = append(answers[c], res.text)
					}
					msgs[i][c] = append(msgs[i][c], map[string]any{"role": "assistant", "content": answers[c][k]})
					ttft[i][k] = append(ttft[i][k], res.ttft.Seconds()*1000)
					f := &figures[i][k]
					f.PromptTokens = res.promptTokens
					if f.ResumedTokens < 0 || res.resumed < f.ResumedTokens {
						f.ResumedTokens = res.resumed
					}
				}
			}
		}
	}
	for i := range targets {
		for k := range *turns {
			figures[i][k].TTFTms = median(ttft[i][k])
		}
	}
	if *asJSON {
		type row struct {
			Target apiTarget `json:"target"`
			Turns  []apiTurn `json:"turns"`
		}
		var out []row
		for i, tg := range targets {
			out = append(out, row{tg, figures[i]})
		}
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(env.Stdout, "model %s, %d turns of up to %d tokens, median of %d rounds; TTFT in ms (client side, first piece of text)\n",
		name, *turns, *maxTokens, *rounds)
	if *conversations > 1 {
		fmt.Fprintf(env.Stdout, "%d conversations taking turns; per turn the median TTFT over them, the prompt of the last, the least resumed\n", *conversations)
	}
	fmt.Fprintf(env.Stdout, "%5s %8s", "turn", "prompt")
	for _, tg := range targets {
		fmt.Fprintf(env.Stdout, " %22s", tg.Name)
	}
	fmt.Fprintf(env.Stdout, " %9s\n", "resumed")
	sums := make([]float64, len(targets))
	for k := range *turns {
		fmt.Fprintf(env.Stdout, "%5d %8d", k+1, figures[0][k].PromptTokens)
		for i := range targets {
			fmt.Fprintf(env.Stdout, " %22.1f", figures[i][k].TTFTms)
			sums[i] += figures[i][k].TTFTms
		}
		fmt.Fprintf(env.Stdout, " %9d\n", figures[0][k].ResumedTokens)
	}
	fmt.Fprintf(env.Stdout, "%14s", "sum")
	for i := range targets {
		fmt.Fprintf(env.Stdout, " %22.1f", sums[i])
	}
	fmt.Fprintln(env.Stdout)
	for i := 1; i < len(targets); i++ {
		if sums[0] > 0 {
			fmt.Fprintf(env.Stdout, "%s / %s: %.2fx\n", targets[i].Name, targets[0].Name, sums[i]/sums[0])
		}
	}
	return nil
}

// benchServer starts an API server on run, on a free loopback port.
func benchServer(ctx context.Context, run *sessions.Manager, path, name string, log *slog.Logger) (url, token string, stop func(), err error) {
	token = "bench-token-0123456789abcdef"
	srv, err := server.New(server.Config{Sessions: run, Token: token, Log: slog.New(slog.DiscardHandler),
		Models: func(context.Context) ([]server.Model, error) { return []server.Model{{ID: name, Path: path}}, nil }})
	if err != nil {
		return "", "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			log.Warn("bench api: server", "err", err)
		}
	}()
	return "http://" + ln.Addr().String() + "/v1", token, func() { cancel(); <-done }, nil
}

// streamResult is what one streamed request gave.
type streamResult struct {
	ttft         time.Duration // to the first piece of text
	text         string
	promptTokens int
	resumed      int
}

// apiStream sends a streamed greedy chat completion and reads it to the end.
func apiStream(ctx context.Context, tg apiTarget, model string, msgs []map[string]any, maxTokens int) (streamResult, error) {
	body := map[string]any{"model": model, "messages": msgs, "max_tokens": maxTokens, "temperature": 0,
		"stream": true, "stream_options": map[string]any{"include_usage": true}}
	for k, v := range tg.extra {
		body[k] = v
	}
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.URL+"/chat/completions", bytes.NewReader(raw))
	if err != nil {
		return streamResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if tg.token != "" {
		req.Header.Set("Authorization", "Bearer "+tg.token)
	}
	began := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return streamResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return streamResult{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var res streamResult
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			break
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
			Anechat *struct {
				ResumedTokens int `json:"resumed_tokens"`
			} `json:"anechat"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return res, fmt.Errorf("event %q: %w", data, err)
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			if text.Len() == 0 {
				res.ttft = time.Since(began)
			}
			text.WriteString(ch.Choices[0].Delta.Content)
		}
		if ch.Usage != nil {
			res.promptTokens = ch.Usage.PromptTokens
		}
		if ch.Anechat != nil {
			res.resumed = ch.Anechat.ResumedTokens
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if text.Len() == 0 {
		return res, errors.New("the reply has no text")
	}
	res.text = text.String()
	return res, nil
}
