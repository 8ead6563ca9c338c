package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"anechat/engine"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/spec"
)

// specPrompt is one line of a speculation workload (JSON Lines).
type specPrompt struct {
	ID       string `json:"id"`
	Category string `json:"category"`
	Prompt   string `json:"prompt"`
	// Raw skips the chat template: BOS (if the tokenizer adds one) + text.
	Raw bool `json:"raw"`
	// MaxTokens caps the generation (0: the --max-tokens flag).
	MaxTokens int `json:"max_tokens"`
	// IDs, when present, is the prompt as token ids, fed as is (for models
	// without a tokenizer, and tests).
	IDs []int32 `json:"ids,omitempty"`
}

// specRun is one prompt at one width.
type specRun struct {
	Width int `json:"width"`
	// Identical: ids and text equal those of width 1.
	Identical   bool    `json:"identical"`
	Tokens      int     `json:"tokens"`
	TargetCalls int     `json:"target_calls"`
	Tau         float64 `json:"tau"`
	Drafted     int     `json:"drafted"`
	Accepted    int     `json:"accepted"`
	Wide        int     `json:"wide_calls"`
	TokS        float64 `json:"tok_s"`
	Speedup     float64 `json:"speedup"`
	// ModelSpeedup is the speedup the cost model measured at load predicts
	// for the calls made (width 1's calls x its cost over the sum of each
	// call's cost): what an idle machine would show, free of the noise of a
	// shared one.
	ModelSpeedup float64 `json:"model_speedup"`
	seconds      float64
	modelSeconds float64
}

type specPromptResult struct {
	ID           string    `json:"id"`
	Category     string    `json:"category"`
	PromptTokens int       `json:"prompt_tokens"`
	Stopped      string    `json:"stopped"`
	Runs         []specRun `json:"runs"`
}

// specSummary aggregates one category at one width: tokens per second is the
// category's total tokens over its total decode time.
type specSummary struct {
	Category  string  `json:"category"`
	Width     int     `json:"width"`
	Prompts   int     `json:"prompts"`
	Identical int     `json:"identical"`
	Tau       float64 `json:"tau"`
	Drafted   int     `json:"drafted"`
	Accepted  int     `json:"accepted"`
	TokS      float64 `json:"tok_s"`
	Speedup   float64 `json:"speedup"`
	// ModelSpeedup: see specRun.
	ModelSpeedup float64 `json:"model_speedup"`
	tokens       int
	calls        int
	seconds      float64
	modelSeconds float64
}

type specReport struct {
	Model   string             `json:"model"`
	Widths  []int              `json:"widths"`
	CostsMs map[string]float64 `json:"call_ms_by_width"`
	Prompts []specPromptResult `json:"prompts"`
	Summary []specSummary      `json:"summary"`
}

// readSpecWorkload parses a JSON Lines workload file.
func readSpecWorkload(path string) ([]specPrompt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %w", err)
	}
	defer f.Close()
	var out []specPrompt
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := strings.TrimSpace(sc.Text())
		if b == "" || strings.HasPrefix(b, "//") {
			continue
		}
		var p specPrompt
		dec := json.NewDecoder(strings.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("%s:%d: %w (want {\"id\",\"category\",\"prompt\",\"raw\",\"max_tokens\"})", path, line, err)
		}
		if p.Prompt == "" && len(p.IDs) == 0 {
			return nil, fmt.Errorf("%s:%d: prompt %q has neither prompt text nor ids", path, line, p.ID)
		}
		if p.ID == "" {
			p.ID = strconv.Itoa(line)
		}
		if p.Category == "" {
			p.Category = "uncategorised"
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompts", path)
	}
	return out, nil
}

func parseWidths(s string) ([]int, error) {
	ws := []int{1}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		w, err := strconv.Atoi(f)
		if err != nil || w < 0 || w > spec.MaxWidth {
			return nil, fmt.Errorf("--widths: %q is not a width 1..%d (or 0 = auto)", f, spec.MaxWidth)
		}
		if !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	return ws, nil
}

// runBenchSpec is `anechat bench spec`: every prompt of a workload at every
// width, compared with width 1.
func runBenchSpec(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench spec", "--model PATH --prompts FILE.jsonl [--widths 1,2,4,8] [--json]")
	modelPath := fs.String("model", "", "model file (.gguf) or directory, or \"random\" for a generated memory-bound llama (no tokenizer: text prompts become byte ids)")
	promptsPath := fs.String("prompts", "bench/workloads/spec.jsonl", "workload: JSON Lines {\"id\",\"category\",\"prompt\",\"raw\",\"max_tokens\"}")
	widthsFlag := fs.String("widths", "1,2,4,8", "comma-separated widths (1 = off, 0 = auto); width 1 is always run as the reference")
	maxTokens := fs.Int("max-tokens", 128, "tokens per prompt when its line has no max_tokens")
	limitTokens := fs.Int("limit", 0, "cap every prompt's max_tokens at this (0 = no cap), for slow models")
	reps := fs.Int("reps", 3, "runs of each prompt and width; the fastest counts (the machine is shared)")
	category := fs.String("category", "", "run only this category")
	useCorpus := fs.Bool("corpus", false, "also draft from a corpus of the workload's earlier prompts and outputs (suffix matching)")
	fixedCosts := fs.Bool("fixed-costs", false, "keep the cost model measured at load instead of following the calls' timing (reproducible gating on a noisy machine)")
	ungated := fs.Bool("ungated", false, "send every proposal whatever its acceptance rate (measures what the drafters could accept, not a setting to use)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *modelPath == "" {
		fmt.Fprintln(env.Stderr, "bench spec needs --model")
		fs.Usage()
		return errUsage
	}
	switch {
	case *maxTokens < 1:
		return badFlag(env, "bench spec", fmt.Errorf("--max-tokens %d: want at least 1", *maxTokens))
	case *limitTokens < 0:
		return badFlag(env, "bench spec", fmt.Errorf("--limit %d: want 0 (no cap) or a positive number", *limitTokens))
	case *reps < 1:
		return badFlag(env, "bench spec", fmt.Errorf("--reps %d: want at least 1", *reps))
	}
	widths, err := parseWidths(*widthsFlag)
	if err != nil {
		return err
	}
	prompts, err := readSpecWorkload(*promptsPath)
	if err != nil {
		return err
	}
	if *category != "" {
		prompts = slices.DeleteFunc(prompts, func(p specPrompt) bool { return p.Category != *category })
		if len(prompts) == 0 {
			return fmt.Errorf("--category %q: no prompts in %s", *category, *promptsPath)
		}
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	m, closeModel, err := openSpecModel(*modelPath)
	if err != nil {
		return err
	}
	defer closeModel()
	rep, err := benchSpec(ctx, m, prompts, widths, benchSpecOptions{
		maxTokens: *maxTokens, limit: *limitTokens, reps: max(*reps, 1), corpus: *useCorpus, ungated: *ungated, fixedCosts: *fixedCosts,
		progress: func(msg string) {
			if !*asJSON {
				fmt.Fprintln(env.Stderr, msg)
			}
		},
	})
	if err != nil {
		return err
	}
	rep.Model = *modelPath
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printSpecReport(env.Stdout, rep)
	}
	for _, p := range rep.Prompts {
		for _, r := range p.Runs {
			if !r.Identical {
				return fmt.Errorf("prompt %s width %d: %w", p.ID, r.Width, errNotLossless)
			}
		}
	}
	return nil
}

// openSpecModel opens the model to benchmark; "random" is bench resume's
// generated memory-bound llama.
func openSpecModel(path string) (*loadedModel, func(), error) {
	if path == "random" {
		b, _, closeFn, err := openBenchModel(path)
		if err != nil {
			return nil, nil, err
		}
		return &loadedModel{backend: b}, closeFn, nil
	}
	m, err := openModel(path)
	if err != nil {
		return nil, nil, err
	}
	return m, func() { m.Close() }, nil
}

// byteIDs encodes text as one id per byte (3 + byte, wrapped into the
// vocabulary) for models without a tokenizer: the repetition structure of
// the text, which is what drafting feeds on, is kept.
func byteIDs(text string, cfg model.Config) []int32 {
	ids := []int32{}
	if cfg.BOS >= 0 {
		ids = append(ids, cfg.BOS)
	}
	for _, c := range []byte(text) {
		ids = append(ids, int32(3+int(c))%int32(max(cfg.VocabSize, 1)))
	}
	return ids
}

type benchSpecOptions struct {
	maxTokens  int
	limit      int
	reps       int
	corpus     bool
	ungated    bool
	fixedCosts bool
	progress   func(string)
}

// benchSpec runs the workload. Width 1 is plain decoding (engine's
// PlainDecoder); the others run the verify loop, each from the same
// cost model measured once at load.
func benchSpec(ctx context.Context, m *loadedModel, prompts []specPrompt, widths []int, o benchSpecOptions) (*specReport, error) {
	b := m.backend
	// More repetitions than the app affords at load: the figures should
	// not hinge on one noisy measurement.
	costs, err := spec.Measure(ctx, b, spec.MeasureOptions{Reps: 7, Budget: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	if o.fixedCosts {
		costs = costs.Frozen()
	}
	rep := &specReport{Widths: widths, CostsMs: map[string]float64{}}
	for w := 1; w <= spec.MaxWidth; w++ {
		if s := costs.Seconds(w); s > 0 {
			rep.CostsMs[strconv.Itoa(w)] = s * 1000
		}
	}
	// Warm up (page in the weights, grow the heap) before anything is timed.
	warm, err := prefillPrompt(ctx, b, []int32{max(b.Config().BOS, 0)})
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if _, _, _, _, err := specRunOnce(ctx, m, warm, 32, 1, costs, nil, false); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	var corpus *spec.Corpus
	if o.corpus {
		corpus = spec.NewCorpus(0)
	}
	for _, p := range prompts {
		ids := p.IDs
		if ids == nil && m.codec == nil {
			ids = byteIDs(p.Prompt, b.Config())
		} else if ids == nil {
			if ids, err = m.promptIDs(p.Prompt, p.Raw); err != nil {
				return nil, fmt.Errorf("prompt %s: %w", p.ID, err)
			}
		}
		limit := p.MaxTokens
		if limit <= 0 {
			limit = o.maxTokens
		}
		// Leave room in the context for the generation.
		if room := b.Config().ContextLen - len(ids); room < 2 {
			return nil, fmt.Errorf("prompt %s: %d tokens leave no room in the context of %d", p.ID, len(ids), b.Config().ContextLen)
		}
		if o.limit > 0 {
			limit = min(limit, o.limit)
		}
		limit = min(limit, b.Config().ContextLen-len(ids))
		ps, err := prefillPrompt(ctx, b, ids)
		if err != nil {
			return nil, fmt.Errorf("prompt %s: %w", p.ID, err)
		}
		pr := specPromptResult{ID: p.ID, Category: p.Category, PromptTokens: len(ids)}
		pr.Runs = make([]specRun, len(widths))
		identical := make([]bool, len(widths))
		var refIDs []int32
		var refText string
		// Repetitions run width after width (not all of one width, then
		// the next), so a burst of load on the shared machine spreads over
		// the widths; the fastest repetition of each width counts.
		for rep := range o.reps {
			for wi, w := range widths {
				r, out, text, stopped, err := specRunOnce(ctx, m, ps, limit, w, costs, corpus, o.ungated)
				if err != nil {
					return nil, fmt.Errorf("prompt %s width %d: %w", p.ID, w, err)
				}
				if rep == 0 && wi == 0 {
					refIDs, refText, pr.Stopped = out, text, stopped
					for i := range identical {
						identical[i] = true
					}
				}
				identical[wi] = identical[wi] && slices.Equal(out, refIDs) && text == refText
				if rep == 0 || r.TokS > pr.Runs[wi].TokS {
					pr.Runs[wi] = r
				}
				if corpus != nil && rep == o.reps-1 && wi == len(widths)-1 {
					corpus.Add(append(slices.Clone(ids), out...))
				}
			}
		}
		for wi := range pr.Runs {
			pr.Runs[wi].Identical = identical[wi]
		}
		base := pr.Runs[0].TokS
		for i := range pr.Runs {
			if base > 0 {
				pr.Runs[i].Speedup = pr.Runs[i].TokS / base
			}
			if ms := pr.Runs[i].modelSeconds; ms > 0 {
				pr.Runs[i].ModelSpeedup = pr.Runs[0].modelSeconds / ms
			}
		}
		rep.Prompts = append(rep.Prompts, pr)
		if o.progress != nil {
			var parts []string
			for _, r := range pr.Runs {
				parts = append(parts, fmt.Sprintf("w%d τ=%.2f x%.2f", r.Width, r.Tau, r.Speedup))
			}
			o.progress(fmt.Sprintf("%-14s %s", p.ID, strings.Join(parts, "  ")))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	rep.Summary = summarise(rep.Prompts, widths)
	return rep, nil
}

// promptState is one prompt prefilled once: its ids but the last are
// committed in cache, and every run truncates back to that point, so a
// long prompt on a slow model is not prefilled again for every width.
type promptState struct {
	b     model.Backend
	cache *kv.Cache
	ids   []int32
}

// prefillPrompt runs ids[:len-1] through the model in batched calls.
func prefillPrompt(ctx context.Context, b model.Backend, ids []int32) (*promptState, error) {
	cache, err := kv.New(b.Config().KV, engine.DefaultMaxBatch)
	if err != nil {
		return nil, err
	}
	ps := &promptState{b: b, cache: cache, ids: ids}
	return ps, ps.refill(ctx)
}

func (ps *promptState) refill(ctx context.Context) error {
	ps.cache.Reset()
	end := len(ps.ids) - 1
	for pos := 0; pos < end; {
		n := min(ps.cache.MaxBatch(), end-pos)
		if _, err := ps.b.Forward(ctx, ps.ids[pos:pos+n], pos, ps.cache, model.Argmax|model.Last); err != nil {
			ps.cache.Rollback()
			return fmt.Errorf("prefill at %d: %w", pos, err)
		}
		if err := ps.cache.Commit(n); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// rewind drops the rows of the last run; a sliding window that lost the
// rows it needs is prefilled again.
func (ps *promptState) rewind(ctx context.Context) error {
	ps.cache.Rollback()
	if err := ps.cache.Truncate(len(ps.ids) - 1); err != nil {
		return ps.refill(ctx)
	}
	return nil
}

// specRunOnce generates once from the prefilled prompt at width w (width 1:
// engine.PlainDecoder, the reference) and returns the figures, ids, text and
// stop reason.
func specRunOnce(ctx context.Context, m *loadedModel, ps *promptState, limit, w int, costs *spec.Costs, corpus *spec.Corpus, ungated bool) (specRun, []int32, string, string, error) {
	if err := ps.rewind(ctx); err != nil {
		return specRun{}, nil, "", "", err
	}
	var dec engine.Decoder = engine.PlainDecoder{}
	var sd *engine.SpecDecoder
	if w != 1 {
		sd = engine.NewSpecDecoder(costs.Clone(), corpus)
		sd.Ungated = ungated
		dec = sd
	}
	cfg := ps.b.Config()
	stop := slices.Clone(cfg.EOS)
	var stream engine.TextStream
	if m.codec != nil {
		stop = append(stop, m.codec.stops()...)
		stream = m.codec.stream()
	}
	req := engine.DecodeRequest{
		History: ps.ids, Room: cfg.ContextLen - ps.cache.Len(), MaxTokens: limit,
		Width: w, Widths: ps.b.Widths(), Stop: stop,
	}
	var out []int32
	var text strings.Builder
	t0 := time.Now()
	res, err := dec.Decode(ctx, spec.BackendTarget{Backend: ps.b, Cache: ps.cache}, req, func(id int32, drafted bool) error {
		out = append(out, id)
		if stream != nil {
			text.WriteString(stream.Next(id))
		}
		return nil
	})
	elapsed := time.Since(t0)
	if err != nil {
		return specRun{}, nil, "", "", err
	}
	if stream != nil {
		text.WriteString(stream.Flush())
	}
	r := specRun{Width: w, Tokens: len(out), TargetCalls: res.TargetCalls, Drafted: res.Drafted, Accepted: res.Accepted, seconds: elapsed.Seconds()}
	if r.TargetCalls > 0 {
		r.Tau = float64(r.Tokens) / float64(r.TargetCalls)
	}
	if elapsed > 0 {
		r.TokS = float64(r.Tokens) / elapsed.Seconds()
	}
	if sd != nil {
		ls := sd.LastStats()
		r.Wide = ls.Wide
		for w, n := range ls.Calls {
			r.modelSeconds += float64(n) * costs.Seconds(w)
		}
	} else {
		r.modelSeconds = float64(res.TargetCalls) * costs.Seconds(1)
	}
	return r, out, text.String(), res.Stopped, nil
}

// summarise aggregates per category (in first-seen order) and overall.
func summarise(prs []specPromptResult, widths []int) []specSummary {
	var cats []string
	for _, p := range prs {
		if !slices.Contains(cats, p.Category) {
			cats = append(cats, p.Category)
		}
	}
	cats = append(cats, "all")
	var out []specSummary
	for _, c := range cats {
		var rows []specSummary
		for wi, w := range widths {
			s := specSummary{Category: c, Width: w}
			for _, p := range prs {
				if c != "all" && p.Category != c {
					continue
				}
				r := p.Runs[wi]
				s.Prompts++
				if r.Identical {
					s.Identical++
				}
				s.tokens += r.Tokens
				s.calls += r.TargetCalls
				s.seconds += r.seconds
				s.modelSeconds += r.modelSeconds
				s.Drafted += r.Drafted
				s.Accepted += r.Accepted
			}
			if s.calls > 0 {
				s.Tau = float64(s.tokens) / float64(s.calls)
			}
			if s.seconds > 0 {
				s.TokS = float64(s.tokens) / s.seconds
			}
			rows = append(rows, s)
		}
		for i := range rows {
			if rows[0].TokS > 0 {
				rows[i].Speedup = rows[i].TokS / rows[0].TokS
			}
			if rows[i].modelSeconds > 0 {
				rows[i].ModelSpeedup = rows[0].modelSeconds / rows[i].modelSeconds
			}
		}
		out = append(out, rows...)
	}
	return out
}

func printSpecReport(w io.Writer, rep *specReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "prompt\tcategory\twidth\tidentical\ttokens\tcalls\tτ\tdrafted\taccepted\ttok/s\tspeedup\tmodel x\t")
	for _, p := range rep.Prompts {
		for _, r := range p.Runs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%d\t%d\t%.2f\t%d\t%d\t%.0f\t%.2f\t%.2f\t\n",
				p.ID, p.Category, r.Width, r.Identical, r.Tokens, r.TargetCalls, r.Tau, r.Drafted, r.Accepted, r.TokS, r.Speedup, r.ModelSpeedup)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "category\twidth\tprompts\tidentical\tτ\tdrafted\taccepted\ttok/s\tspeedup\tmodel x\t")
	for _, s := range rep.Summary {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%d\t%d\t%.0f\t%.2f\t%.2f\t\n",
			s.Category, s.Width, s.Prompts, s.Identical, s.Tau, s.Drafted, s.Accepted, s.TokS, s.Speedup, s.ModelSpeedup)
	}
	tw.Flush()
	var ms []string
	for w := 1; w <= spec.MaxWidth; w++ {
		if v, ok := rep.CostsMs[strconv.Itoa(w)]; ok {
			ms = append(ms, fmt.Sprintf("w%d %.3f", w, v))
		}
	}
	fmt.Fprintf(w, "\nmeasured call time at load (ms): %s\n", strings.Join(ms, ", "))
	bad := 0
	for _, s := range rep.Summary {
		if s.Category == "all" {
			bad += s.Prompts - s.Identical
		}
	}
	if bad > 0 {
		fmt.Fprintf(w, "NOT LOSSLESS: %d runs differ from width 1\n", bad)
	}
}

// errNotLossless is returned when any run differs from width 1.
var errNotLossless = errors.New("speculative output differs from width 1")
