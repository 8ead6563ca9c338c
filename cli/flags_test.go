package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"anechat/engine"
	"anechat/internal/sessions"
	"anechat/internal/testres"
)

// TestWidthDefault: speculation is on by default at spec.DefaultWidth (4),
// for generate and chat, and the help says what 1 and 0 mean.
func TestWidthDefault(t *testing.T) {
	for _, cmd := range []string{"generate", "chat"} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), []string{cmd, "--help"}, nil, &out, &errb); code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		help := out.String()
		i := strings.Index(help, "\n  -width ")
		if i < 0 {
			t.Fatalf("%s --help has no --width:\n%s", cmd, help)
		}
		// The flag's entry runs to the next flag's.
		line := help[i+1:]
		if j := strings.Index(line, "\n  -"); j >= 0 {
			line = line[:j]
		}
		line = strings.Join(strings.Fields(line), " ")
		for _, want := range []string{"1 = off", "0 = auto", "(default 4)"} {
			if !strings.Contains(line, want) {
				t.Errorf("%s --width help %q lacks %q", cmd, line, want)
			}
		}
	}
}

// TestBadFlags: a bad value gives exit code 2 and a message naming the flag
// and what it accepts, before the model is read (the model path here does
// not exist: had it been opened first, the error would name it instead).
func TestBadFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.gguf")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--width", "9"}, "--width 9: want 1 (speculation off), 2..8, or 0 (auto)"},
		{[]string{"--width", "-1"}, "--width -1"},
		{[]string{"--max-tokens", "-1"}, "--max-tokens -1: want a positive number, or 0 for no limit"},
		{[]string{"--temperature", "-0.5"}, "--temperature -0.5: want 0 (greedy) or a positive number"},
		{[]string{"--temperature", "NaN"}, "--temperature NaN"},
		{[]string{"--compute-units", "npu"}, `--compute-units "npu": want neural-engine, gpu, cpu or all`},
	} {
		for _, cmd := range []string{"generate", "chat"} {
			args := append([]string{cmd, "--model", missing}, tc.args...)
			if cmd == "generate" {
				args = append(args, "--prompt", "x", "--no-cache")
			}
			var out, errb bytes.Buffer
			code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), tc.want) || strings.Contains(errb.String(), "goroutine") {
				t.Errorf("%v: exit %d, stderr %q, want %q", args, code, errb.String(), tc.want)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"generate", "--model", missing, "--prompt-ids", "1 x"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), `--prompt-ids: "x" is not a token id`) {
		t.Errorf("bad --prompt-ids: exit %d, %q", code, errb.String())
	}
}

// TestBadModelAndPrompt: model files that cannot be used, ids outside the
// vocabulary and a prompt longer than the context each give exit code 1 and
// a message naming the file or flag and what to do; never a panic.
func TestBadModelAndPrompt(t *testing.T) {
	dir := t.TempDir()
	stories := testres.Stories(t)
	data, err := os.ReadFile(stories)
	if err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "text.gguf")
	os.WriteFile(text, []byte("hello, not a model\n"), 0o644)
	trunc := filepath.Join(dir, "trunc.gguf")
	os.WriteFile(trunc, data[:len(data)*2/5], 0o644)
	noConfig := filepath.Join(dir, "emptydir")
	os.Mkdir(noConfig, 0o755)
	long := strings.Repeat("Once upon a time there was a dog. ", 300) // > 2048 tokens
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing", []string{"--model", filepath.Join(dir, "none.gguf"), "--prompt", "x"}, []string{"none.gguf", "check the path given to --model"}},
		{"dir without config.json", []string{"--model", noConfig, "--prompt", "x"}, []string{"emptydir", "config.json"}},
		{"text file", []string{"--model", text, "--prompt", "x"}, []string{"text.gguf", "not a GGUF", "fetch it again"}},
		{"truncated", []string{"--model", trunc, "--prompt", "x"}, []string{"trunc.gguf", "tensor", "fetch it again"}},
		{"id outside the vocabulary", []string{"--model", stories, "--prompt-ids", "1 512"}, []string{"--prompt-ids", "512", "0..511"}},
		{"prompt too long", []string{"--model", stories, "--prompt", long, "--raw"}, []string{"prompt is", "context of 2048", "shorten it"}},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"generate", "--no-cache"}, tc.args...), nil, &out, &errb)
		msg := errb.String()
		ok := code == 1 && !strings.Contains(msg, "goroutine") && !strings.Contains(msg, "panic")
		for _, w := range tc.want {
			ok = ok && strings.Contains(msg, w)
		}
		if !ok {
			t.Errorf("%s: exit %d, stderr %q, want %q", tc.name, code, msg, tc.want)
		}
	}
}

// TestChatContextFull: a message that does not fit in the context is
// refused with a message, and the chat goes on.
func TestChatContextFull(t *testing.T) {
	long := strings.Repeat("Once upon a time there was a dog. ", 300)
	out := runChatWith(t, long+"\nOnce upon a time\n", "--model", testres.Stories(t), "--max-tokens", "20")
	turns := strings.Split(out, "\n> ")
	if len(turns) != 4 || !strings.Contains(turns[1], "no longer fits in the model's context of 2048 tokens: /reset") || !strings.Contains(turns[2], "Lily") {
		t.Fatalf("chat transcript (%d parts):\n%q", len(turns), out)
	}
}

// firstWrite is an io.Writer that signals its first write after armed.
type firstWrite struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	armed bool
	hit   chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed && len(p) > 0 {
		w.armed = false
		close(w.hit)
	}
	return w.buf.Write(p)
}

func (w *firstWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestChatInterrupt: Ctrl-C during an answer stops the answer, not the chat,
// even though the process-wide handler cancels the command's context on the
// same signal; the next message is answered; Ctrl-C at the prompt leaves.
func TestChatInterrupt(t *testing.T) {
	mgr := sessions.New(nil, nil)
	defer mgr.Close()
	out := &firstWrite{hit: make(chan struct{})}
	c := &chatLoop{env: &Env{Stdout: out, Stderr: io.Discard}, mgr: mgr, path: testres.Stories(t), log: slog.New(slog.DiscardHandler),
		gen: engine.GenerateOptions{MaxTokens: 20}, ctxLen: 2048}
	// As main.go does: the first interrupt cancels ctx, with the signal as
	// the cause.
	root, cancelRoot := context.WithCancelCause(context.Background())
	interrupts := make(chan os.Signal, 1)
	inR, inW := io.Pipe()
	ended := make(chan error, 1)
	go func() { ended <- c.run(root, inR, interrupts) }()

	// A long answer (to the end of the context), interrupted at its first
	// token.
	c.gen.MaxTokens = 0
	waitFor(t, out, "\n> ") // the prompt is out: the next write is the answer
	out.mu.Lock()
	out.armed = true
	out.mu.Unlock()
	io.WriteString(inW, "Once upon a time\n")
	select {
	case <-out.hit:
	case <-time.After(20 * time.Second):
		t.Fatalf("no answer to the first message: %q", out.String())
	}
	interrupts <- os.Interrupt
	cancelRoot(errors.New(os.Interrupt.String() + " signal received"))
	waitFor(t, out, "(stopped)")
	// Run to the end of the context, the answer would be some 2,000 tokens
	// of ASCII text: stopped at its first, it is a few bytes.
	if first := strings.Split(out.String(), "\n> ")[1]; len(first) > 1000 {
		t.Fatalf("the answer was not stopped: %d bytes", len(first))
	}
	c.gen.MaxTokens = 20
	before := strings.Count(out.String(), "\n> ")
	io.WriteString(inW, "Once upon a time\n")
	waitUntil(t, out, "the prompt after the second answer", func(s string) bool { return strings.Count(s, "\n> ") > before })
	interrupts <- os.Interrupt // at the prompt: leave
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("chat ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("chat did not leave on an interrupt at the prompt")
	}
	parts := strings.Split(out.String(), "\n> ")
	if len(parts) != 4 || !strings.Contains(parts[1], "(stopped)") || strings.TrimSpace(parts[2]) == "" {
		t.Fatalf("transcript (%d parts): %q", len(parts), out.String())
	}
	inW.Close()
}

// waitFor waits until out contains s.
func waitFor(t *testing.T, out *firstWrite, s string) {
	t.Helper()
	waitUntil(t, out, fmt.Sprintf("%q", s), func(o string) bool { return strings.Contains(o, s) })
}

// waitUntil waits until ok holds for what out holds, failing the test
// (naming what) if it does not within 20 s: a chat that hangs fails
// instead of holding up the whole test run.
func waitUntil(t *testing.T, out *firstWrite, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in %q", what, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBenchBadFlags: the benchmarks refuse values they would otherwise
// clamp or ignore silently, naming the flag, before loading the model.
func TestBenchBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "spec", "--model", "none.gguf", "--max-tokens", "-5"}, "--max-tokens -5: want at least 1"},
		{[]string{"bench", "spec", "--model", "none.gguf", "--limit", "-1"}, "--limit -1"},
		{[]string{"bench", "spec", "--model", "none.gguf", "--reps", "0"}, "--reps 0: want at least 1"},
		{[]string{"bench", "resume", "--model", "none.gguf", "--batch", "0"}, "--batch 0: want a prefill call width of 1..512"},
		{[]string{"bench", "resume", "--model", "none.gguf", "--repeat", "0"}, "--repeat 0: want at least 1"},
		{[]string{"bench", "coreml", "--bundle", "none", "--compute-units", "ane2"}, `--compute-units "ane2": want neural-engine`},
		{[]string{"doctor", "--bundle", "none", "--compute-units", "ane2"}, `--compute-units "ane2": want neural-engine`},
		{[]string{"doctor", "--compute-units", "gpu"}, "give it with --bundle DIR"},
	} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), tc.args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
