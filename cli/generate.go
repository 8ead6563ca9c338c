package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/spec"
	"anechat/internal/sessions"
)

// generateJSON is the --json output of generate (issue 4).
type generateJSON struct {
	PromptIDs []int32      `json:"prompt_ids"`
	IDs       []int32      `json:"ids"`
	Text      string       `json:"text"`
	Stats     generateStat `json:"stats"`
}

// generateStat is the --json output's stats: the reply's figures
// (engine.Stats), as the API's "anechat" field and the app's stats show
// them, in this format's snake_case.
type generateStat struct {
	// Width is the speculation width asked for (--width; 0 = auto);
	// Stopped, why the reply ended ("stop", "length" or "context").
	Width       int    `json:"width"`
	Stopped     string `json:"stopped"`
	TargetCalls int    `json:"target_calls"`
	Drafted     int    `json:"drafted"`
	Accepted    int    `json:"accepted"`
	// Declined, Probes and DraftNote say why the reply drafted less than
	// it could (spec.Stats).
	Declined      int     `json:"declined"`
	Probes        int     `json:"probes"`
	DraftNote     string  `json:"draft_note,omitempty"`
	PrefillTokens int     `json:"prefill_tokens"`
	ResumedTokens int     `json:"resumed_tokens"`
	TTFTms        float64 `json:"ttft_ms"`
	DecodeTokS    float64 `json:"decode_tok_s"`
	// CostsMeasured: this run timed the model's calls per width (the
	// speculative decoder's cost model) rather than loading the table a
	// previous run stored in the data directory.
	CostsMeasured bool `json:"costs_measured"`
}

// statJSON is the --json stats of a reply at width.
func statJSON(st engine.Stats, width int) generateStat {
	return generateStat{Width: width, Stopped: st.Stopped, TargetCalls: st.TargetCalls, Drafted: st.Drafted, Accepted: st.Accepted,
		Declined: st.Declined, Probes: st.Probes, DraftNote: st.DraftNote, PrefillTokens: st.PrefillTokens,
		ResumedTokens: st.ResumedTokens, TTFTms: st.TTFTms, DecodeTokS: st.DecodeTokS}
}

// draftNote is the stats line's ending for why a reply drafted less than it
// could ("; drafting paused: wide calls measured 3.1x width 1"), "" when
// nothing held drafting back.
func draftNote(st engine.Stats) string {
	if st.DraftNote == "" {
		return ""
	}
	return "; " + st.DraftNote
}

// genFlags are the sampling and speculation flags generate and chat share.
type genFlags struct {
	model       *string
	maxTokens   *int
	width       *int
	temperature *float64
	seed        *uint64
	// units is --compute-units: where Core ML may run a bundle (the CPU
	// backend ignores it).
	units *string
}

func addGenFlags(fs interface {
	String(string, string, string) *string
	Int(string, int, string) *int
	Float64(string, float64, string) *float64
	Uint64(string, uint64, string) *uint64
}, defMax int) genFlags {
	return genFlags{
		model:       fs.String("model", "", "model file (.gguf) or directory (safetensors); default: the data directory's default model"),
		maxTokens:   fs.Int("max-tokens", defMax, "most tokens to generate (0 = until a stop token or the context ends)"),
		width:       fs.Int("width", spec.DefaultWidth, "speculation width K: 1 = off, 2..8 = up to K-1 drafted tokens checked per model call, 0 = auto (output identical at every width)"),
		temperature: fs.Float64("temperature", 0, "sampling temperature (0 = greedy)"),
		seed:        fs.Uint64("seed", 0, "random seed for sampling (same seed, same output at every width)"),
		units:       computeUnitsFlag(fs),
	}
}

// validate checks the flags' values before the model is loaded, naming the
// flag and what it accepts.
func (g genFlags) validate() error {
	switch {
	case *g.width < 0 || *g.width > spec.MaxWidth:
		return fmt.Errorf("--width %d: want 1 (speculation off), 2..%d, or 0 (auto)", *g.width, spec.MaxWidth)
	case *g.maxTokens < 0:
		return fmt.Errorf("--max-tokens %d: want a positive number, or 0 for no limit (until a stop token or the end of the context)", *g.maxTokens)
	case math.IsNaN(*g.temperature) || math.IsInf(*g.temperature, 0) || *g.temperature < 0:
		return fmt.Errorf("--temperature %v: want 0 (greedy) or a positive number", *g.temperature)
	}
	return checkComputeUnits(*g.units)
}

func (g genFlags) options() engine.GenerateOptions {
	return engine.GenerateOptions{MaxTokens: *g.maxTokens, Width: *g.width, Temperature: *g.temperature, Seed: *g.seed}
}

// badFlag reports a flag value that validate rejected: the message, then the
// usage's exit code.
func badFlag(env *Env, cmd string, err error) error {
	fmt.Fprintf(env.Stderr, "anechat %s: %v\n", cmd, err)
	return errUsage
}

// modelError adds what to do to an error opening --model.
func modelError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w (check the path given to --model)", err)
	case errors.Is(err, gguf.ErrFormat):
		return fmt.Errorf("%w (%s is damaged or not a GGUF model: fetch it again)", err, path)
	}
	return err
}

// interruptible returns a context cancelled by Ctrl-C.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt)
}

// parseIDs parses "1 403 407" or "1,403,407".
func parseIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--prompt-ids: %q is not a token id", f)
		}
		out = append(out, int32(n))
	}
	if len(out) == 0 {
		return nil, errors.New("--prompt-ids: no ids")
	}
	return out, nil
}

func runGenerate(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "generate", "[--model PATH] (--prompt TEXT | --prompt-ids IDS) [--raw] [--max-tokens N] [--width K] [--temperature T] [--seed S] [--compute-units U] [--data-dir DIR] [--no-cache] [--json]")
	g := addGenFlags(fs, 256)
	prompt := fs.String("prompt", "", "prompt text")
	promptIDs := fs.String("prompt-ids", "", "prompt as token ids (\"1 403 407\"), fed as is: no BOS added, no template")
	raw := fs.Bool("raw", false, "skip the chat template: BOS (if the tokenizer adds one) + the encoded prompt")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	dataDir := fs.String("data-dir", "", "data directory holding the KV snapshot cache (default $ANECHAT_HOME or the OS default)")
	noCache := noCacheFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if (*prompt == "") == (*promptIDs == "") {
		fmt.Fprintln(env.Stderr, "generate needs exactly one of --prompt or --prompt-ids")
		fs.Usage()
		return errUsage
	}
	if err := g.validate(); err != nil {
		return badFlag(env, "generate", err)
	}
	if err := g.useDefaultModel(ctx, *dataDir, cliLogger(env)); err != nil {
		return err
	}
	var ids []int32
	if *promptIDs != "" {
		var err error
		if ids, err = parseIDs(*promptIDs); err != nil {
			return badFlag(env, "generate", err)
		}
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	log := cliLogger(env)
	run, closeRun := openSessions(ctx, *dataDir, *noCache, *g.units, log)
	defer closeRun()
	var out []int32
	var text strings.Builder
	var st engine.Stats
	measured := false
	err := run.Do(ctx, *g.model, func(m *sessions.Model) error {
		mode := sessions.IDs
		switch {
		case *promptIDs != "":
		case *raw:
			mode, ids = sessions.Raw, engine.RawPrompt(m.Tokenizer(), *prompt)
		default:
			var err error
			mode = sessions.Chat
			if ids, err = m.Render(ctx, []chat.Message{{Role: chat.RoleUser, Content: *prompt}}); err != nil {
				return err
			}
		}
		cfg := m.Backend().Config()
		for _, id := range ids {
			if id < 0 || int(id) >= cfg.VocabSize {
				return fmt.Errorf("--prompt-ids: token id %d is outside the model's vocabulary 0..%d", id, cfg.VocabSize-1)
			}
		}
		if len(ids) > cfg.ContextLen {
			return fmt.Errorf("the prompt is %d tokens, more than the model's context of %d: shorten it", len(ids), cfg.ContextLen)
		}
		var err error
		st, err = m.Reply(ctx, sessions.Request{Mode: mode, Prompt: ids, Options: g.options(), Emit: func(t engine.Token) error {
			if t.ID >= 0 {
				out = append(out, t.ID)
			}
			text.WriteString(t.Text)
			if !*asJSON {
				io.WriteString(env.Stdout, t.Text)
			}
			return nil
		}})
		if err != nil {
			return err
		}
		// The data directory keeps the KV snapshots and, in its settings,
		// the measured call costs per model, so only the first speculative
		// run with this model measures them. SaveRun, not Save: reruns of a
		// prompt keep one snapshot, not one per run.
		s, err := m.Session(mode)
		if err != nil {
			return err
		}
		measured = s.Measurements() > 0
		if _, err := s.SaveRun(context.WithoutCancel(ctx)); err != nil {
			log.Warn("kv snapshot not saved", "err", err)
		}
		return nil
	})
	if err != nil {
		return modelError(*g.model, err)
	}
	if *asJSON {
		if out == nil {
			out = []int32{}
		}
		js := statJSON(st, *g.width)
		js.CostsMeasured = measured
		enc := json.NewEncoder(env.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(generateJSON{PromptIDs: ids, IDs: out, Text: text.String(), Stats: js})
	}
	fmt.Fprintln(env.Stdout)
	fmt.Fprintf(env.Stderr, "[%d prompt tokens (%d resumed), %d generated (%s), %d calls, drafted %d, accepted %d, ttft %.1f ms, %.1f tok/s%s]\n",
		st.PrefillTokens+st.ResumedTokens, st.ResumedTokens, st.Tokens, st.Stopped, st.TargetCalls, st.Drafted, st.Accepted, st.TTFTms, st.DecodeTokS, draftNote(st))
	return nil
}

// loadedModel is a backend plus what turns text into ids and back, for
// `anechat bench spec`, which drives engine Sessions itself (every rerun of
// a prompt starts alike); generate and chat run on internal/sessions.
type loadedModel struct {
	backend model.Backend
	codec   textCodec // nil until a tokenizer is available for the model
}

func (m *loadedModel) Close() error {
	if c, ok := m.backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (m *loadedModel) textStream() func() engine.TextStream {
	if m.codec == nil {
		return nil
	}
	return m.codec.stream
}

func (m *loadedModel) promptIDs(ctx context.Context, prompt string, raw bool) ([]int32, error) {
	if m.codec == nil {
		return nil, errors.New("no tokenizer for this model: pass --prompt-ids")
	}
	if raw {
		return m.codec.raw(prompt), nil
	}
	return m.codec.chatPrompt(ctx, prompt)
}

// textCodec is the tokenizer and chat template of a model.
type textCodec interface {
	raw(text string) []int32
	chatPrompt(ctx context.Context, user string) ([]int32, error)
	stops() []int32
	stream() engine.TextStream
}
