package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"anechat/engine"
	"anechat/engine/constrain"
	"anechat/engine/model"
	"anechat/engine/spec"
	"anechat/engine/tokenizer"
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
	// Schema, when present, is a JSON schema the reply is constrained to
	// (as response_format json_schema does; --unconstrained ignores it).
	Schema json.RawMessage `json:"schema,omitempty"`
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
	// Declined and Probes: calls the gate sent without drafts because
	// wide calls cost more lately than measured, and calls that sent them
	// all the same to measure afresh (spec.Stats).
	Declined int     `json:"declined"`
	Probes   int     `json:"probes"`
	TokS     float64 `json:"tok_s"`
	Speedup  float64 `json:"speedup"`
	// ModelSpeedup is the speedup the cost model measured at load predicts
	// for the calls made (width 1's calls x its cost over the sum of each
	// call's cost): what an idle machine would show, free of the noise of a
	// shared one.
	ModelSpeedup float64 `json:"model_speedup"`
	// Sources has the drafts each source sent and how many were kept, by
	// source name ("lookup", "forced", "lookahead").
	Sources      map[string]specSource `json:"sources,omitempty"`
	seconds      float64
	modelSeconds float64
}

// specSource counts one drafting source's drafts.
type specSource struct {
	Drafted  int `json:"drafted"`
	Accepted int `json:"accepted"`
}

// addSources adds src's counts into dst (allocated when nil).
func addSources(dst map[string]specSource, src map[string]specSource) map[string]specSource {
	for name, c := range src {
		if dst == nil {
			dst = map[string]specSource{}
		}
		d := dst[name]
		d.Drafted += c.Drafted
		d.Accepted += c.Accepted
		dst[name] = d
	}
	return dst
}

type specPromptResult struct {
	ID           string `json:"id"`
	Category     string `json:"category"`
	PromptTokens int    `json:"prompt_tokens"`
	Stopped      string `json:"stopped"`
	// Constrained: the prompt's schema constrained the reply; Valid, for
	// a constrained reply that finished, whether its schema's grammar
	// matches the text (it must).
	Constrained bool      `json:"constrained,omitempty"`
	Valid       *bool     `json:"valid,omitempty"`
	Runs        []specRun `json:"runs"`
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
	Declined  int     `json:"declined"`
	Probes    int     `json:"probes"`
	TokS      float64 `json:"tok_s"`
	Speedup   float64 `json:"speedup"`
	// ModelSpeedup: see specRun.
	ModelSpeedup float64 `json:"model_speedup"`
	// Sources: see specRun.
	Sources      map[string]specSource `json:"sources,omitempty"`
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
			return nil, fmt.Errorf("%s:%d: %w (want {\"id\",\"category\",\"prompt\",\"raw\",\"max_tokens\",\"schema\"})", path, line, err)
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
	fs := newFlags(env, "bench spec", "--model PATH|random [--prompts FILE.jsonl] [--widths 1,2,4,8] [--max-tokens N] [--limit N] [--reps N] [--category C] [--corpus] [--fixed-costs] [--ungated] [--free-width] [--no-lookahead] [--carry] [--unconstrained] [--json]")
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
	freeWidth := fs.Bool("free-width", false, "inject a cost table in which every width costs what width 1 does (the Neural Engine's case) instead of the measured one, frozen")
	noLookahead := fs.Bool("no-lookahead", false, "leave the call slots the drafters do not fill empty (no lookahead guesses)")
	carry := fs.Bool("carry", false, "keep one verify loop for the whole run, as the app and the API keep one per model load: its cost model follows every call made and its drafting state carries from run to run (else every run starts afresh from the costs measured at load)")
	unconstrained := fs.Bool("unconstrained", false, "ignore the workload's schemas: generate those prompts unconstrained (to compare constrained decoding's cost)")
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
	m, closeModel, err := openSpecModel(ctx, *modelPath)
	if err != nil {
		return err
	}
	defer closeModel()
	rep, err := benchSpec(ctx, m, prompts, widths, benchSpecOptions{
		maxTokens: *maxTokens, limit: *limitTokens, reps: max(*reps, 1), corpus: *useCorpus, ungated: *ungated, fixedCosts: *fixedCosts,
		freeWidth: *freeWidth, noLookahead: *noLookahead, carry: *carry, unconstrained: *unconstrained,
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
func openSpecModel(ctx context.Context, path string) (*loadedModel, func(), error) {
	if path == "random" {
		b, _, closeFn, err := openBenchModel(path)
		if err != nil {
			return nil, nil, err
		}
		return &loadedModel{backend: b}, closeFn, nil
	}
	m, err := openModel(ctx, path, "")
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
	// freeWidth replaces the measured costs by a table in which every
	// width costs the measured width-1 time; noLookahead turns the
	// lookahead guesses off.
	freeWidth   bool
	noLookahead bool
	// carry keeps the session's verify loop from run to run instead of
	// starting each run afresh (ResetDrafting): what a model load serving
	// many requests does.
	carry bool
	// unconstrained ignores the prompts' schemas.
	unconstrained bool
	progress      func(string)
}

// benchSpec runs the workload on one Session: every run resumes it to the
// prompt (Session.Resume truncates the cache back to the prompt, or
// prefills it again where a sliding window lost rows) and starts its drafting
// afresh from the same cost model, measured once at load (with carry, the
// drafting and the cost model carry on from the run before). Width 1 is the
// verify loop with no drafts, the reference the other widths must equal.
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
	if o.freeWidth {
		sec := map[int]float64{}
		for w := 1; w <= spec.MaxWidth; w++ {
			sec[w] = costs.Seconds(1)
		}
		costs = spec.FixedCosts(sec)
	}
	rep := &specReport{Widths: widths, CostsMs: map[string]float64{}}
	for w := 1; w <= spec.MaxWidth; w++ {
		if s := costs.Seconds(w); s > 0 {
			rep.CostsMs[strconv.Itoa(w)] = s * 1000
		}
	}
	var corpus *spec.Corpus
	if o.corpus {
		corpus = spec.NewCorpus(0)
	}
	s, err := engine.NewSession(b, engine.SessionOptions{Text: m.textStream(), Corpus: corpus, Costs: costs.Clone(), Ungated: o.ungated,
		NoLookahead: o.noLookahead})
	if err != nil {
		return nil, err
	}
	var stop []int32
	if m.codec != nil {
		stop = m.codec.stops()
	}
	// Warm up (page in the weights, grow the heap) before anything is timed.
	if _, _, _, _, err := specRunOnce(ctx, s, []int32{max(b.Config().BOS, 0)}, 32, 1, costs, stop, false, nil); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	for _, p := range prompts {
		ids := p.IDs
		if ids == nil && m.codec == nil {
			ids = byteIDs(p.Prompt, b.Config())
		} else if ids == nil {
			if ids, err = m.promptIDs(ctx, p.Prompt, p.Raw); err != nil {
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
		newCon, g, err := promptConstraint(m, p, o.unconstrained)
		if err != nil {
			return nil, err
		}
		pr := specPromptResult{ID: p.ID, Category: p.Category, PromptTokens: len(ids), Constrained: g != nil}
		pr.Runs = make([]specRun, len(widths))
		identical := make([]bool, len(widths))
		var refIDs []int32
		var refText string
		// Repetitions run width after width (not all of one width, then
		// the next), so a burst of load on the shared machine spreads over
		// the widths; the fastest repetition of each width counts.
		for rep := range o.reps {
			for wi, w := range widths {
				r, out, text, stopped, err := specRunOnce(ctx, s, ids, limit, w, costs, stop, o.carry, newCon)
				if err != nil {
					return nil, fmt.Errorf("prompt %s width %d: %w", p.ID, w, err)
				}
				if rep == 0 && wi == 0 {
					refIDs, refText, pr.Stopped = out, text, stopped
					if g != nil && stopped == "stop" {
						valid := g.Match([]byte(text))
						pr.Valid = &valid
					}
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

// specRunOnce generates once from the prompt ids at width w on s, its
// drafting started afresh from costs (with carry, carried on from the run
// before), and returns the figures, ids, text and stop reason. The prompt's
// prefill (a truncation back to it, and the call for its last token) is not
// timed.
func specRunOnce(ctx context.Context, s *engine.Session, ids []int32, limit, w int, costs *spec.Costs, stop []int32, carry bool, con func() spec.Constraint) (specRun, []int32, string, string, error) {
	if err := s.Resume(ctx, ids, nil); err != nil {
		return specRun{}, nil, "", "", err
	}
	if !carry {
		s.ResetDrafting(costs.Clone())
	}
	var out []int32
	var text strings.Builder
	opts := engine.GenerateOptions{MaxTokens: limit, Width: w, Stop: stop}
	if con != nil {
		opts.Constraint = con()
	}
	t0 := time.Now()
	st, err := s.Generate(ctx, opts, func(t engine.Token) error {
		if t.ID >= 0 {
			out = append(out, t.ID)
		}
		text.WriteString(t.Text)
		return nil
	})
	elapsed := time.Since(t0)
	if err != nil {
		return specRun{}, nil, "", "", err
	}
	r := specRun{Width: w, Tokens: len(out), TargetCalls: st.TargetCalls, Tau: st.Tau(), Drafted: st.Drafted, Accepted: st.Accepted,
		Wide: st.Wide, Declined: st.Declined, Probes: st.Probes, seconds: elapsed.Seconds()}
	if elapsed > 0 {
		r.TokS = float64(r.Tokens) / elapsed.Seconds()
	}
	for name, c := range st.Sources {
		r.Sources = addSources(r.Sources, map[string]specSource{name: {c.Drafted, c.Accepted}})
	}
	for cw, n := range st.Calls {
		r.modelSeconds += float64(n) * costs.Seconds(cw)
	}
	return r, out, text.String(), st.Stopped, nil
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
				s.Declined += r.Declined
				s.Probes += r.Probes
				s.Sources = addSources(s.Sources, r.Sources)
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
	// Drafts by source, over all prompts: which source drafted, which paid.
	for _, s := range rep.Summary {
		if s.Category != "all" || len(s.Sources) == 0 {
			continue
		}
		names := slices.Sorted(maps.Keys(s.Sources))
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s %d/%d", n, s.Sources[n].Accepted, s.Sources[n].Drafted)
		}
		fmt.Fprintf(w, "accepted/drafted by source, width %d: %s\n", s.Width, strings.Join(parts, ", "))
	}
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

// promptConstraint compiles a prompt's schema and binds it to the model's
// vocabulary: newCon starts a constrained reply (nil without a schema, or
// with ignore). The Matcher, and so its cached masks, serves every run of
// the prompt, as the server's serves every request with one schema.
func promptConstraint(m *loadedModel, p specPrompt, ignore bool) (newCon func() spec.Constraint, g *constrain.Grammar, err error) {
	if len(p.Schema) == 0 || ignore {
		return nil, nil, nil
	}
	tc, ok := m.codec.(*tokCodec)
	if !ok {
		return nil, nil, fmt.Errorf("prompt %s: a schema needs the model's tokenizer (not --model random)", p.ID)
	}
	if g, err = constrain.CompileSchema(p.Schema); err != nil {
		return nil, nil, fmt.Errorf("prompt %s: schema: %w", p.ID, err)
	}
	v := constrainVocab(tc.tok)
	mt, err := constrain.NewMatcher(g, v)
	if err != nil {
		return nil, nil, fmt.Errorf("prompt %s: %w", p.ID, err)
	}
	return func() spec.Constraint { return spec.Grammar(mt.Start()) }, g, nil
}

// vocabCache keeps the last tokenizer's matching vocabulary (building one
// sorts the vocabulary).
var vocabCache struct {
	tok *tokenizer.Tokenizer
	v   *constrain.Vocab
}

func constrainVocab(tok *tokenizer.Tokenizer) *constrain.Vocab {
	if vocabCache.tok != tok {
		vocabCache.tok, vocabCache.v = tok, constrain.NewVocab(tok)
	}
	return vocabCache.v
}
