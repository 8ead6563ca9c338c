package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/coreml/published"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/spec"
	"anechat/internal/backends"
)

// coremlCheckOptions say which bundle `anechat doctor --bundle` and `anechat
// bench coreml` check, and how.
type coremlCheckOptions struct {
	bundle string
	// reference, when set, runs the bundle with the reference executor
	// (its function contract on the CPU kernels) on the checkpoint at this
	// path instead of Core ML.
	reference string
	units     string
	tokens    int // per prompt and width
	rowChecks int // tokens checked for row independence
	progress  func(string)
}

// coremlReport is what the check measured.
type coremlReport struct {
	Bundle string `json:"bundle"`
	// Published is true for a CoreML-LLM bundle (published.Model), whose
	// decode and verify functions differ: Note says so.
	Published    bool            `json:"published,omitempty"`
	Note         string          `json:"note,omitempty"`
	Executor     string          `json:"executor"`
	LoadSeconds  float64         `json:"load_seconds"`
	Chunks       []coremlChunk   `json:"chunks,omitempty"`
	Width        int             `json:"generate_width"`
	Prompts      int             `json:"prompts"`
	Identical    int             `json:"identical"`
	Differing    []string        `json:"differing,omitempty"`
	RowChecks    int             `json:"row_checks"`
	RowSameBits  int             `json:"row_same_bits"`
	RowMaxDiff   float64         `json:"row_max_abs_diff"`
	RowSameIDs   int             `json:"row_same_argmax"`
	TokSOff      float64         `json:"tok_s_spec_off"`
	TokSOn       float64         `json:"tok_s_spec_on"`
	TauOn        float64         `json:"tau_spec_on"`
	Latency      []coremlLatency `json:"latency"`
	CostsByWidth map[int]float64 `json:"call_ms_by_width"`
	// Placement is where each chunk's functions run, from Core ML's
	// compute plans (a Mac with macOS 14.4 or later); PlacementAbsent says
	// why it is missing otherwise.
	Placement       []coreml.ChunkPlacement `json:"placement,omitempty"`
	PlacementAbsent string                  `json:"placement_absent,omitempty"`
	// SharedBuffers counts the buffers Core ML shares with the host
	// (IOSurface-backed) and those that fell back to plain memory.
	SharedBuffers *sharedBuffers `json:"iosurface_buffers,omitempty"`
	// placementFailed is true when the compute plan was there to read
	// and failed (doctor reports it as a problem), not merely unsupported.
	placementFailed bool
}

type sharedBuffers struct {
	Backed   int `json:"backed"`
	Fallback int `json:"fell_back"`
	// Predictions counts Core ML calls; OutputCopies the outputs Core ML
	// wrote into memory of its own instead of the backing it was given
	// (copied in by mlcore): 0 when every backing was honoured.
	Predictions  int64 `json:"predictions"`
	OutputCopies int64 `json:"output_copies"`
}

type coremlChunk struct {
	Package        string     `json:"package"`
	Compiled       bool       `json:"compiled"`
	CompileSeconds float64    `json:"compile_seconds"`
	LoadSeconds    [3]float64 `json:"load_seconds"`
	// Functions names what LoadSeconds timed ("" for none).
	Functions [3]string `json:"functions"`
}

// loads says which functions of the chunk loaded in how long: "generate_8
// loaded in 1.20 s, prefill_64 in 0.80 s" (sample_8 too on the last chunk;
// a published bundle's decode_q1 and verify_qK, or its prefill chunk's one
// function).
func (c coremlChunk) loads() string {
	var parts []string
	for i, name := range c.Functions {
		if name == "" {
			continue
		}
		if len(parts) == 0 {
			parts = append(parts, fmt.Sprintf("%s loaded in %.2f s", name, c.LoadSeconds[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%s in %.2f s", name, c.LoadSeconds[i]))
		}
	}
	if len(parts) == 0 {
		return "no function loaded"
	}
	return strings.Join(parts, ", ")
}

type coremlLatency struct {
	Kind   string  `json:"kind"`
	Rows   int     `json:"rows"`
	Calls  int     `json:"calls"`
	MeanMs float64 `json:"mean_ms"`
	MinMs  float64 `json:"min_ms"`
}

// errNoNeuralEngine: this build or machine has no Core ML, and no
// reference checkpoint was given.
var errNoNeuralEngine = errors.New("the Neural Engine is not available")

// noNeuralEngine says plainly what runs instead.
func noNeuralEngine() string {
	return fmt.Sprintf("the Neural Engine is not available on %s/%s (Core ML needs an Apple silicon Mac and a darwin/arm64 build); the CPU backend runs every model here. Pass --reference CHECKPOINT (the checkpoint the bundle was converted from) to run the bundle's functions with the reference executor (their contract, on the CPU kernels) instead",
		runtime.GOOS, runtime.GOARCH)
}

// checkPrompts are the prompt set: chat-like text, with repeated spans
// where prompt lookup has drafts to send.
var checkPrompts = []string{
	"Once upon a time, there was a little girl named Lily. She loved to play outside.",
	"Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog.",
	"Write a short list of fruits: apple, banana, cherry, apple, banana, cherry.",
	"func add(a, b int) int { return a + b }\nRename add to sum:",
	"Why is the sky blue?",
}

// runCoreMLCheck loads the bundle, runs the prompt set with speculation off
// and on, checks the generation functions' row independence and collects
// the latency of every call.
func runCoreMLCheck(ctx context.Context, o coremlCheckOptions) (*coremlReport, error) {
	say := func(format string, args ...any) {
		if o.progress != nil {
			o.progress(fmt.Sprintf(format, args...))
		}
	}
	src, err := load.Detect(o.bundle)
	if err != nil {
		return nil, err
	}
	if src.Format != load.CoreML {
		return nil, fmt.Errorf("%s is a %s model, not a Core ML bundle", o.bundle, src.Format)
	}
	var reg *load.Registry
	if o.reference != "" {
		reg = backends.Reference(o.reference)
	} else {
		if st := backends.Statuses(); !st[0].Available {
			return nil, fmt.Errorf("%w: %s", errNoNeuralEngine, noNeuralEngine())
		}
		reg = backends.RegistryWith(backends.Options{ComputeUnits: o.units})
	}
	if coreml.IsPublished(o.bundle) && o.reference != "" {
		return nil, fmt.Errorf("%s: %s. --reference runs the function contract of the anechat converter's bundles; a CoreML-LLM bundle runs with Core ML only", o.bundle, describePublished(o.bundle))
	}
	say("loading %s (compiling takes long the first time) ...", o.bundle)
	t0 := time.Now()
	lm, err := reg.OpenSource(ctx, src, load.Options{Progress: func(done, total int) {}})
	if err != nil {
		return nil, err
	}
	defer lm.Close()
	rep := &coremlReport{Bundle: o.bundle, LoadSeconds: time.Since(t0).Seconds(), CostsByWidth: map[int]float64{}}
	// be is either backend: a bundle of the anechat converter (generate
	// and sample functions of one width) or a published one (decode and
	// verify).
	var be interface {
		model.Backend
		CallStats() []coreml.CallStat
	}
	var executor coreml.Executor
	switch b := lm.Backend.(type) {
	case *coreml.Model:
		be, executor, rep.Width = b, b.Executor(), b.Bundle().Manifest.Geometry.GenerateWidth
	case *published.Model:
		be, executor, rep.Width, rep.Published = b, b.Executor(), max(b.VerifyWidth(), 1), true
		rep.Note = fmt.Sprintf("a CoreML-LLM bundle: its decode (%s) and verify (%s) functions are different functions, so identity with speculation on and off is measured here, not built in (a bundle of `make bundle` runs one function for every generation call of a session and holds it by construction); it returns greedy ids only", published.FuncDecode, published.FuncVerify)
		if cr, ok := b.Executor().(*coreml.CoreMLExecutor); ok && cr.NoVerify != "" {
			rep.Note += "; " + cr.NoVerify
		}
		if n := b.PrefillNote(); n != "" {
			rep.Note += "; prefill chunks not used: " + n
		}
	default:
		return nil, fmt.Errorf("%s opened on the %s backend, not Core ML", o.bundle, lm.BackendName)
	}
	rep.Executor = executor.Name()
	if cr, ok := executor.(*coreml.CoreMLExecutor); ok {
		for _, l := range cr.Loads() {
			rep.Chunks = append(rep.Chunks, coremlChunk{Package: l.Package, Compiled: l.Compiled, CompileSeconds: l.Compile.Seconds(),
				LoadSeconds: [3]float64{l.Load[0].Seconds(), l.Load[1].Seconds(), l.Load[2].Seconds()}, Functions: l.Functions})
		}
		backed, fallback := cr.SharedBuffers()
		rep.SharedBuffers = &sharedBuffers{Backed: backed, Fallback: fallback}
		say("reading the compute plans (where each operation runs) ...")
		placement(ctx, cr, rep)
	} else {
		rep.PlacementAbsent = placementNeedsMac(rep.Executor)
	}
	tmpl, err := chat.ForModel(ctx, be.Config().Arch, lm.Tokenizer, lm.Chat)
	if err != nil {
		return nil, err
	}
	costs, err := spec.Measure(ctx, be, spec.MeasureOptions{Reps: 3})
	if err != nil {
		return nil, err
	}
	for w := 1; w <= spec.MaxWidth; w++ {
		if s := costs.Seconds(w); s > 0 {
			rep.CostsByWidth[w] = s * 1000
		}
	}
	width := min(rep.Width, spec.MaxWidth)
	var offTok, onTok, onCalls int
	var offSec, onSec float64
	for i, p := range checkPrompts {
		ids, err := tmpl.Render(ctx, []chat.Message{{Role: chat.RoleUser, Content: p}}, true)
		if err != nil {
			return nil, err
		}
		if len(ids)+o.tokens > be.Config().ContextLen {
			ids = ids[:max(1, be.Config().ContextLen-o.tokens-1)]
		}
		var out [2][]int32
		var text [2]string
		for k, w := range []int{1, width} {
			s, err := engine.NewSession(be, engine.SessionOptions{Costs: costs.Clone(), Text: func() engine.TextStream { return lm.Tokenizer.NewStream() }})
			if err != nil {
				return nil, err
			}
			if err := s.Prefill(ctx, ids, nil); err != nil {
				return nil, err
			}
			var b strings.Builder
			st, err := s.Generate(ctx, engine.GenerateOptions{MaxTokens: o.tokens, Width: w, Stop: tmpl.Stops()}, func(t engine.Token) error {
				if t.ID >= 0 {
					out[k] = append(out[k], t.ID)
				}
				b.WriteString(t.Text)
				return nil
			})
			if err != nil {
				return nil, err
			}
			text[k] = b.String()
			if k == 0 {
				offTok, offSec = offTok+st.Tokens, offSec+st.Decode.Seconds()
			} else {
				onTok, onSec, onCalls = onTok+st.Tokens, onSec+st.Decode.Seconds(), onCalls+st.TargetCalls
			}
		}
		rep.Prompts++
		if slices.Equal(out[0], out[1]) && text[0] == text[1] {
			rep.Identical++
		} else {
			rep.Differing = append(rep.Differing, fmt.Sprintf("prompt %d", i+1))
		}
		say("prompt %d: %d tokens, speculation on and off %s", i+1, len(out[0]), map[bool]string{true: "identical", false: "DIFFER"}[slices.Equal(out[0], out[1]) && text[0] == text[1]])
	}
	if offSec > 0 {
		rep.TokSOff = float64(offTok) / offSec
	}
	if onSec > 0 {
		rep.TokSOn = float64(onTok) / onSec
	}
	if onCalls > 0 {
		rep.TauOn = float64(onTok) / float64(onCalls)
	}
	if b, ok := be.(*coreml.Model); ok {
		if err := rowIndependence(ctx, b, o.rowChecks, rep); err != nil {
			return nil, err
		}
	}
	if cr, ok := executor.(*coreml.CoreMLExecutor); ok {
		for _, fns := range cr.Stats() {
			for _, st := range fns {
				rep.SharedBuffers.Predictions += st.Calls
				rep.SharedBuffers.OutputCopies += st.OutputCopies
			}
		}
	}
	for _, c := range be.CallStats() {
		rep.Latency = append(rep.Latency, coremlLatency{Kind: c.Kind, Rows: c.Rows, Calls: c.Calls,
			MeanMs: float64(c.Total.Microseconds()) / 1000 / float64(c.Calls), MinMs: float64(c.Min.Microseconds()) / 1000})
	}
	return rep, nil
}

// placementNeedsMac says why a run without Core ML has no placement;
// executor is what ran the bundle instead ("" for nothing).
func placementNeedsMac(executor string) string {
	here := fmt.Sprintf("this is %s/%s", runtime.GOOS, runtime.GOARCH)
	if executor != "" {
		here = fmt.Sprintf("this run used %s on %s/%s", executor, runtime.GOOS, runtime.GOARCH)
	}
	return "not checked: where the operations run is Core ML's compute plan (MLComputePlan), which needs a Mac with Apple silicon and macOS 14.4 or later; " + here
}

// placement records the compute plans of the executor's chunks in rep, or
// why there are none: a macOS before 14.4 or a runtime without compute
// plans is not a failure; a plan Core ML could not give is.
func placement(ctx context.Context, cr *coreml.CoreMLExecutor, rep *coremlReport) {
	pl, err := cr.Placement(ctx)
	var old *mlcore.OSVersionError
	switch {
	case err == nil:
		rep.Placement = pl
	case errors.Is(err, errors.ErrUnsupported) || errors.As(err, &old):
		rep.PlacementAbsent = "not checked: " + err.Error()
	default:
		rep.PlacementAbsent = "failed: " + err.Error()
		rep.placementFailed = true
	}
}

// rowIndependence checks that the generation functions compute a token's
// row from its own inputs only: token x at position p after the rows of
// a[0..s-1] gives the same logits (the sample function) and the same id
// (the generate function) whether those rows come from the same call (x in
// slot s) or from the cache (x alone in slot 0), for every slot s of the
// functions.
func rowIndependence(ctx context.Context, be *coreml.Model, checks int, rep *coremlReport) error {
	cfg := be.Config()
	K := min(rep.Width, cfg.ContextLen-20)
	V := int32(cfg.VocabSize)
	prefix := []int32{max(cfg.BOS, 0), 17 % V, 250 % V, 3 % V}
	for c := range checks {
		s := 1 + c%max(K-1, 1)
		if s >= K {
			s = K - 1
		}
		a := make([]int32, s)
		for i := range a {
			a[i] = int32((1000 + 37*c + 11*i) % int(V))
		}
		x := int32((5 + 101*c) % int(V))
		cache, err := kv.New(cfg.KV, max(spec.MaxWidth, K, len(prefix)))
		if err != nil {
			return err
		}
		if _, err := be.Forward(ctx, prefix, 0, cache, model.Argmax|model.Last); err != nil {
			return err
		}
		if err := cache.Commit(len(prefix)); err != nil {
			return err
		}
		// both runs tokens through the sample function (logits) and the
		// generate function (ids) on the same state.
		both := func(tokens []int32) (model.Result, error) {
			l, err := be.Forward(ctx, tokens, cache.Len(), cache, model.Logits)
			if err != nil {
				return l, err
			}
			cache.Rollback()
			g, err := be.Forward(ctx, tokens, cache.Len(), cache, model.Argmax)
			cache.Rollback()
			l.Argmax = g.Argmax
			return l, err
		}
		together, err := both(append(slices.Clone(a), x))
		if err != nil {
			return err
		}
		if _, err := be.Forward(ctx, a, cache.Len(), cache, model.Argmax); err != nil {
			return err
		}
		if err := cache.Commit(len(a)); err != nil {
			return err
		}
		alone, err := both([]int32{x})
		if err != nil {
			return err
		}
		got, want := together.Logits[s], alone.Logits[0]
		rep.RowChecks++
		if model.SameBits(got, want) {
			rep.RowSameBits++
		}
		for i := range got {
			rep.RowMaxDiff = max(rep.RowMaxDiff, float64(abs32(got[i]-want[i])))
		}
		if together.Argmax[s] == alone.Argmax[0] {
			rep.RowSameIDs++
		}
	}
	return nil
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// printCoreMLReport prints the report as doctor's lines (table false) or
// bench's tables.
func printCoreMLReport(w io.Writer, rep *coremlReport, table bool) {
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	if !table {
		line := func(label, format string, args ...any) {
			fmt.Fprintf(w, "%-10s %s\n", label+":", fmt.Sprintf(format, args...))
		}
		line("bundle", "%s", rep.Bundle)
		if rep.Note != "" {
			line("note", "%s", rep.Note)
		}
		line("runs on", "%s", rep.Executor)
		line("load", "%.2f s in all", rep.LoadSeconds)
		for _, c := range rep.Chunks {
			what := "found in the compile cache"
			if c.Compiled {
				what = "compiled now"
			}
			fmt.Fprintf(w, "  %s: %s in %.2f s, %s\n", c.Package, what, c.CompileSeconds, c.loads())
		}
		line("identity", "%s: %d of %d prompts byte-identical with speculation on (width %d) and off", yes(rep.Identical == rep.Prompts), rep.Identical, rep.Prompts, min(rep.Width, spec.MaxWidth))
		if rep.Published {
			line("rows", "not checked: the bundle returns no logits, and its widths run two different functions")
		} else {
			line("rows", "%s: the same token in slots 1..%d and alone in slot 0 gives the same logits bits (sample function) in %d of %d checks (max |diff| %.3g) and the same id (generate function) in %d",
				yes(rep.RowSameBits == rep.RowChecks && rep.RowSameIDs == rep.RowChecks), rep.Width-1, rep.RowSameBits, rep.RowChecks, rep.RowMaxDiff, rep.RowSameIDs)
		}
		line("speed", "%.1f tok/s speculation off, %.1f tok/s on (τ %.2f)", rep.TokSOff, rep.TokSOn, rep.TauOn)
		var ms []string
		for wd := 1; wd <= spec.MaxWidth; wd++ {
			if v, ok := rep.CostsByWidth[wd]; ok {
				ms = append(ms, fmt.Sprintf("w%d %.2f", wd, v))
			}
		}
		line("call ms", "%s (measured per width with logits: the sample function; a published bundle's ids)", strings.Join(ms, ", "))
		for _, l := range rep.Latency {
			fmt.Fprintf(w, "  %-8s %2d rows: %4d calls, mean %.2f ms, min %.2f ms\n", l.Kind, l.Rows, l.Calls, l.MeanMs, l.MinMs)
		}
		if sb := rep.SharedBuffers; sb != nil {
			line("buffers", "%d IOSurface-backed (KV caches and outputs the host reads), %d fell back to plain memory; %d of the outputs of %d Core ML calls were copied in (not written into their backing)",
				sb.Backed, sb.Fallback, sb.OutputCopies, sb.Predictions)
		}
		printPlacement(w, rep, line)
		return
	}
	fmt.Fprintf(w, "bundle %s on %s, loaded in %.2f s\n\n", rep.Bundle, rep.Executor, rep.LoadSeconds)
	if rep.Note != "" {
		fmt.Fprintf(w, "%s\n\n", rep.Note)
	}
	if len(rep.Chunks) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "chunk\tcompiled now\tcompile s\tfunctions loaded\t")
		for _, c := range rep.Chunks {
			fmt.Fprintf(tw, "%s\t%v\t%.2f\t%s\t\n", c.Package, c.Compiled, c.CompileSeconds, c.loads())
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "call kind\trows\tcalls\tmean ms\tmin ms\t")
	for _, l := range rep.Latency {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%.3f\t\n", l.Kind, l.Rows, l.Calls, l.MeanMs, l.MinMs)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "prompts\tidentical\trow checks\tsame bits\tmax |diff|\ttok/s off\ttok/s on\tτ on\t")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.3g\t%.1f\t%.1f\t%.2f\t\n", rep.Prompts, rep.Identical, rep.RowChecks, rep.RowSameBits, rep.RowMaxDiff, rep.TokSOff, rep.TokSOn, rep.TauOn)
	tw.Flush()
	if rep.PlacementAbsent != "" {
		fmt.Fprintf(w, "\nplacement %s\n", rep.PlacementAbsent)
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "chunk\tfunction\tops\tANE\tGPU\tCPU\tunplaced\test. cost\toff-ANE cost\t")
	for _, c := range rep.Placement {
		for _, p := range c.Functions {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.4f\t\n", filepath.Base(c.Package), p.Function, p.Ops, p.NeuralEngine, p.GPU, p.CPU, p.Unplaced, p.Cost, p.OffANECost)
		}
	}
	tw.Flush()
}

// maxOffANEShown bounds the operations doctor lists per function; the
// JSON report has them all.
const maxOffANEShown = 12

// printPlacement prints doctor's placement lines: per chunk and function,
// the operations on each device, the estimated cost and the operations
// that left the Neural Engine.
func printPlacement(w io.Writer, rep *coremlReport, line func(label, format string, args ...any)) {
	if rep.PlacementAbsent != "" {
		line("placement", "%s", rep.PlacementAbsent)
		return
	}
	line("placement", "where Core ML's compute plan puts each operation (const and constexpr_* ops left out)")
	for _, c := range rep.Placement {
		for _, p := range c.Functions {
			fmt.Fprintf(w, "  %s %s: %d of %d ops on the Neural Engine (%.1f%%), %d GPU, %d CPU, %d unplaced; estimated cost %.4f, off the Neural Engine %.4f\n",
				filepath.Base(c.Package), p.Function, p.NeuralEngine, p.Ops, 100*p.OnNeuralEngine(), p.GPU, p.CPU, p.Unplaced, p.Cost, p.OffANECost)
			for i, op := range p.OffANE {
				if i == maxOffANEShown {
					fmt.Fprintf(w, "    ... and %d more (doctor --json lists them all)\n", len(p.OffANE)-i)
					break
				}
				fmt.Fprintf(w, "    %-7s %-28s %s (cost %.4f)\n", op.Device, op.Operator, op.Output, op.Cost)
			}
		}
	}
}

// describePublished says what a CoreML-LLM bundle is and how it runs.
func describePublished(dir string) string {
	p, err := coreml.ReadPublished(dir)
	if err != nil {
		return err.Error()
	}
	return p.Describe()
}
