// Package engine runs a model for one conversation: the Session owns the token
// sequence, the KV cache and the backend, prefills prompts in batched calls,
// generates through engine/spec's verify loop (width 1: one token per call,
// no drafts), resumes from and saves KV snapshots, and measures and keeps the
// backend's call costs. NewSession builds all of it from SessionOptions.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
	"anechat/engine/spec"
)

// DefaultMaxBatch is the widest call a Session makes when SessionOptions
// leaves it unset: prefill runs in chunks of this many tokens.
const DefaultMaxBatch = 64

// ErrContextFull is returned (wrapped) by Prefill when the sequence would
// no longer fit in the model's context: the caller starts a new sequence
// (Reset) or a shorter one.
var ErrContextFull = errors.New("the sequence does not fit in the model's context")

// Token is one generated token as Generate emits it: the verify loop's
// (its id, whether a draft gave it, the generation's counts so far) and its
// text. Its JSON is a piece of a reply as the app's window gets it
// (app.Piece).
type Token struct {
	spec.Token
	// Text is the token's text from the streaming detokenizer ("" without
	// one, or while a multi-byte character is incomplete). A final event
	// with ID -1 carries only text the detokenizer held back at the end (an
	// incomplete UTF-8 sequence), with the last token's counts; it is not a
	// model token.
	Text string `json:"text"`
}

// Stats describes one Generate call and the prefill that preceded it: the
// verify loop's figures (tokens, model calls per width, drafts per source,
// why it stopped) and the Session's own. Its JSON is a reply's figures as
// the app stores them (app.GenerateStats embeds it).
type Stats struct {
	spec.Stats
	// PrefillTokens is the number of prompt tokens run through the model
	// since the previous Generate (by Prefill, or by Generate itself).
	PrefillTokens int `json:"prefillTokens"`
	// ResumedTokens is the number of positions restored from a snapshot
	// instead of prefilled (see Restored).
	ResumedTokens int `json:"resumedTokens"`
	// TTFTms is the time from the start of the prefill (or of Generate, if
	// there was none) to the first generated token, in milliseconds.
	TTFTms float64 `json:"ttftMs"`
	// DecodeTokS is generated tokens per second of Generate's wall time.
	DecodeTokS float64 `json:"decodeTokS"`
}

// GenerateOptions controls one Generate call.
type GenerateOptions struct {
	// MaxTokens caps the generated tokens; <= 0 means until a stop id or the
	// end of the context.
	MaxTokens int
	// Width is the speculation width: 1 = off (one token per call), 2..8
	// (up to Width-1 drafts per call), 0 = auto (spec.Request.Width).
	Width int
	// Temperature 0 is greedy decoding; > 0 samples with Seed.
	Temperature float64
	// TopP, when in (0, 1), samples only from the most likely tokens whose
	// probabilities sum to TopP (nucleus sampling); 0 or 1 keeps every
	// token. Like the rest of sampling it draws the same numbers at every
	// width (sample.Sampler.Pick), so the output does not depend on it.
	TopP float64
	// Seed fixes the sampler's random stream.
	Seed uint64
	// Stop lists ids that end generation in addition to the model's EOS ids.
	Stop []int32
	// Constraint, when set, restricts the generated tokens (constrained
	// decoding: spec.Grammar of a constrain.State for a JSON schema); the
	// EOS and Stop ids are allowed only where it is complete. Generate
	// advances it.
	Constraint spec.Constraint
	// Logprobs gives every emitted token its log-probability and the
	// TopLogprobs (0..sample.MaxTopLogprobs) most likely ids at its
	// position (spec.Request.Logprobs): the model's own distribution,
	// before temperature and top-p, the same at every width. A backend
	// that returns only greedy ids refuses it (ErrNoLogits).
	Logprobs    bool
	TopLogprobs int
}

// ErrNoLogits is returned (wrapped) by Generate when logprobs are asked of
// a backend that computes only the greedy token (model.ArgmaxOnly: a
// published Core ML bundle), which has no logits to take them from.
var ErrNoLogits = errors.New("the model returns only its greedy token, not the logits that logprobs are taken from")

// TextStream turns ids into text incrementally (tokenizer.Stream has this
// shape).
type TextStream interface {
	Next(id int32) string
	Flush() string
}

// SessionOptions configures a Session: its calls, its drafting, where it
// keeps KV snapshots and measured call costs. The zero value prefills in
// calls of DefaultMaxBatch, drafts by prompt lookup, measures the call
// costs at the first speculative Generate without keeping them, and neither
// resumes nor saves snapshots.
type SessionOptions struct {
	// MaxBatch is the widest prefill call; 0 = DefaultMaxBatch (a
	// fixed-shape backend's widest listed width instead). The cache is
	// sized for at least spec.MaxWidth, the widest decode call.
	MaxBatch int
	// Text returns a fresh streaming detokenizer (tokenizer.Tokenizer's
	// NewStream); nil leaves Token.Text empty.
	Text func() TextStream

	// Corpus, when set, adds suffix-matching drafts over earlier text
	// (finished messages, saved prompts) to prompt lookup.
	Corpus *spec.Corpus
	// Costs is the backend's cost model; nil measures it (spec.Measure,
	// every width the backend runs) at the first Generate of width other
	// than 1, or loads it from CostStore.
	Costs *spec.Costs
	// CostStore, when set, keeps the measured costs between runs under
	// CostsKey (the data directory's settings: *storage.DB satisfies it),
	// so each model and kernel set is measured once.
	CostStore CostStore
	// Ungated sends every proposal whatever its acceptance rate (tests, and
	// measuring what the drafters could accept).
	Ungated bool
	// NoLookahead leaves call slots the drafters do not fill empty instead
	// of filling them with lookahead guesses where the cost model says they
	// pay (spec.Decoder.Lookahead; benchmarks compare the two).
	NoLookahead bool

	// Snapshots, when set, is the index that Resume restores the longest
	// stored prefix of a prompt from and that Save and SaveRun record new
	// snapshots in; Meta binds them to the model, tokenizer and template.
	Snapshots SnapshotStore
	Meta      kv.Meta

	// Log receives why a snapshot or a stored cost table was not used;
	// nil means slog.Default().
	Log *slog.Logger
}

// Session is one sequence on one backend. It is not safe for concurrent use.
//
// The sequence is tokens; the cache holds the K/V rows of tokens[:cache.Len()]
// (committed). The rest, tokens[cache.Len():], is fed to the model by the
// next Prefill or Generate. logits, when non-nil, are the logits after the
// last token (only when every token is committed).
type Session struct {
	b       model.Backend
	cfg     model.Config
	cache   *kv.Cache
	opts    SessionOptions
	log     *slog.Logger
	tokens  []int32
	logits  []float32
	resumed int
	// genPending: the last token was generated (not prefilled) and is not
	// in the cache yet.
	genPending bool

	// Prefill accounting since the last Generate: prefilled positions
	// from prefillFrom on.
	prefilled    int
	prefillFrom  int
	prefillStart time.Time

	dec     spec.Decoder // the verify loop: drafters, rates, cost model
	costs   costState    // how dec.Costs was obtained
	resumer *Resumer     // nil without Snapshots
}

// NewSession returns an empty session on b, configured by opts.
func NewSession(b model.Backend, opts SessionOptions) (*Session, error) {
	if b == nil {
		return nil, errors.New("engine: new session: nil backend")
	}
	cfg := b.Config()
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if ws := b.Widths(); ws != nil {
		// A fixed-shape backend: the widest call it runs bounds the cache.
		opts.MaxBatch = max(spec.MaxWidth, slices.Max(ws))
	}
	c, err := kv.New(cfg.KV, max(opts.MaxBatch, spec.MaxWidth))
	if err != nil {
		return nil, fmt.Errorf("engine: new session for %s: %w", cfg.Arch, err)
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	s := &Session{b: b, cfg: cfg, cache: c, opts: opts, log: log}
	s.dec = spec.Decoder{Sources: spec.DefaultSources(opts.Corpus), Costs: opts.Costs, Lookahead: !opts.NoLookahead}
	s.costs.known = opts.Costs != nil
	if opts.Snapshots != nil {
		s.resumer = &Resumer{Store: opts.Snapshots, Meta: opts.Meta, Log: log}
	}
	return s, nil
}

// Backend is the session's backend.
func (s *Session) Backend() model.Backend { return s.b }

// Cache is the session's KV cache (for snapshots and resume).
func (s *Session) Cache() *kv.Cache { return s.cache }

// Tokens returns the whole sequence so far (prompt and generated tokens).
func (s *Session) Tokens() []int32 { return slices.Clone(s.tokens) }

// Reset empties the sequence and the cache.
func (s *Session) Reset() {
	s.cache.Reset()
	s.tokens, s.logits, s.resumed, s.prefilled, s.genPending = s.tokens[:0], nil, 0, 0, false
	s.prefillStart = time.Time{}
}

// Restored tells the session that its cache now holds ids, committed (a
// snapshot was loaded into Cache()). It replaces the sequence; Prefill then
// continues from len(ids).
func (s *Session) Restored(ids []int32) error {
	if s.cache.Len() != len(ids) || s.cache.Pending() != 0 {
		return fmt.Errorf("engine: restored %d ids but the cache holds %d committed and %d pending rows", len(ids), s.cache.Len(), s.cache.Pending())
	}
	// Positions prefilled since the last Generate (a cancelled Prefill,
	// or one made ahead) stay counted as prefilled, not as resumed.
	s.prefilled = min(s.prefilled, max(0, len(ids)-s.prefillFrom))
	s.tokens, s.logits, s.resumed, s.genPending = slices.Clone(ids), nil, len(ids)-s.prefilled, false
	return nil
}

// Prefill appends ids to the sequence and runs every token not yet in the
// cache through the model, from the current offset, in batched calls of at
// most MaxBatch tokens (DESIGN.md invariant 5). progress, if not nil,
// is called after each call with the tokens done and the total to do. On
// error or cancellation, the rows of completed calls stay committed, the
// sequence keeps ids, and a later Prefill or Generate resumes the work.
func (s *Session) Prefill(ctx context.Context, ids []int32, progress func(done, total int)) error {
	for _, id := range ids {
		if id < 0 || int(id) >= s.cfg.VocabSize {
			return fmt.Errorf("engine: prefill: token id %d outside the vocabulary 0..%d", id, s.cfg.VocabSize-1)
		}
	}
	if len(s.tokens)+len(ids) > s.cfg.ContextLen {
		return fmt.Errorf("engine: prefill: %d tokens exceed the context length %d: %w", len(s.tokens)+len(ids), s.cfg.ContextLen, ErrContextFull)
	}
	// A weights file changed on disk since loading (a re-download over
	// it): fail cleanly here rather than compute with it, or fault on it.
	if err := model.CheckFiles(s.b); err != nil {
		return fmt.Errorf("engine: prefill: %w", err)
	}
	s.tokens = append(s.tokens, ids...)
	if len(ids) > 0 {
		s.genPending = false
	}
	return s.feed(ctx, len(s.tokens), progress)
}

// feed runs tokens[cache.Len():end] through the model in batched calls and
// keeps the logits of the last one when end is the whole sequence.
func (s *Session) feed(ctx context.Context, end int, progress func(done, total int)) error {
	start := s.cache.Len()
	if start >= end {
		return nil
	}
	if s.prefillStart.IsZero() {
		s.prefillStart = time.Now()
	}
	s.logits = nil
	total := end - start
	for pos := start; pos < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(s.opts.MaxBatch, end-pos)
		res, err := s.b.Forward(ctx, s.tokens[pos:pos+n], pos, s.cache, model.Logits|model.Last)
		if err != nil {
			s.cache.Rollback()
			return fmt.Errorf("engine: prefill at position %d: %w", pos, err)
		}
		if err := s.cache.Commit(n); err != nil {
			return fmt.Errorf("engine: prefill: %w", err)
		}
		if s.prefilled == 0 {
			s.prefillFrom = pos
		}
		pos += n
		s.prefilled += n
		if pos == len(s.tokens) && len(res.Logits) > 0 {
			s.logits = res.Logits[len(res.Logits)-1]
		}
		if progress != nil {
			progress(pos-start, total)
		}
	}
	return nil
}

// Generate continues the sequence, calling emit for each generated token, and
// stops at an EOS or Stop id (not emitted), at MaxTokens, or at the end of the
// context. A stop id stays in the sequence (uncommitted) so the next turn
// continues after it. emit returning an error stops generation with that
// error. The first Generate of a width other than 1 measures the backend's
// call costs first (or loads them from CostStore), inside its TTFT.
func (s *Session) Generate(ctx context.Context, opts GenerateOptions, emit func(Token) error) (Stats, error) {
	var st Stats
	if opts.Width < 0 || opts.Width > spec.MaxWidth {
		return st, fmt.Errorf("engine: generate: width %d, want 1..%d or 0 for auto", opts.Width, spec.MaxWidth)
	}
	if len(s.tokens) == 0 {
		return st, errors.New("engine: generate: empty sequence (prefill a prompt first)")
	}
	if err := model.CheckFiles(s.b); err != nil {
		return st, fmt.Errorf("engine: generate: %w", err)
	}
	if opts.Logprobs && model.ArgmaxOnly(s.b) {
		return st, fmt.Errorf("engine: generate: %w", ErrNoLogits)
	}
	// Finish any prefill left undone (cancelled, or tokens added without a
	// call). The last token of a previous generation is instead fed as the
	// first token of the first decode call, where drafts can join it.
	end := len(s.tokens)
	if s.genPending {
		end--
	}
	if err := s.feed(ctx, end, nil); err != nil {
		return st, err
	}
	// TTFT counts from the start of the prefill, including one just
	// finished by feed.
	began := s.prefillStart
	if s.cache.Len() == len(s.tokens) && s.logits == nil {
		// Committed without logits (a restored snapshot): recompute the last.
		if err := s.cache.Truncate(len(s.tokens) - 1); err != nil {
			return st, fmt.Errorf("engine: generate: %w", err)
		}
	}
	req := spec.Request{
		History:    s.tokens,
		Room:       s.cfg.ContextLen - s.cache.Len(),
		MaxTokens:  opts.MaxTokens,
		Width:      opts.Width,
		Widths:     s.b.Widths(),
		Stop:       append(slices.Clone(s.cfg.EOS), opts.Stop...),
		Ungated:    s.opts.Ungated,
		Constraint: opts.Constraint,

		Logprobs:    opts.Logprobs,
		TopLogprobs: opts.TopLogprobs,
	}
	if s.cache.Len() == len(s.tokens) {
		req.Logits = s.logits
	}
	if opts.Temperature > 0 {
		req.Sampler = sample.New(opts.Temperature, opts.Seed, 0, opts.TopP)
	}
	st.PrefillTokens, st.ResumedTokens = s.prefilled, s.resumed
	s.prefilled, s.resumed, s.prefillStart = 0, 0, time.Time{}

	var stream TextStream
	if s.opts.Text != nil {
		stream = s.opts.Text()
	}
	t0 := time.Now()
	if began.IsZero() {
		began = t0
	}
	var err error
	if opts.Width != 1 {
		err = s.ensureCosts(ctx)
	}
	var emitErr error
	var last spec.Token // the last token emitted, for the tail's counts
	if err == nil {
		first := true
		st.Stats, err = s.dec.Run(ctx, spec.BackendTarget{Backend: s.b, Cache: s.cache}, req, func(tk spec.Token) error {
			if first {
				st.TTFTms = float64(time.Since(began).Microseconds()) / 1000
				first = false
			}
			s.tokens = append(s.tokens, tk.ID)
			last = tk
			tok := Token{Token: tk}
			if stream != nil {
				tok.Text = stream.Next(tk.ID)
			}
			emitErr = emit(tok)
			return emitErr
		})
	}
	elapsed := time.Since(t0)
	if elapsed > 0 {
		st.DecodeTokS = float64(st.Tokens) / elapsed.Seconds()
	}
	if st.Stopped == "stop" && st.Pending >= 0 {
		s.tokens = append(s.tokens, st.Pending)
	}
	s.logits = nil
	s.genPending = true
	s.cache.Rollback()
	if s.cache.Len() > len(s.tokens) {
		// Cannot happen with a correct decoder; keep the state consistent.
		return st, fmt.Errorf("engine: generate: decoder committed %d rows for %d tokens", s.cache.Len(), len(s.tokens))
	}
	if err != nil {
		if emitErr != nil && errors.Is(err, emitErr) {
			return st, emitErr
		}
		return st, fmt.Errorf("engine: generate: %w", err)
	}
	if stream != nil {
		if tail := stream.Flush(); tail != "" {
			last.ID, last.Drafted, last.Logprob, last.Top = -1, false, 0, nil
			if err := emit(Token{Token: last, Text: tail}); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// Resume makes the session hold exactly the prompt ids, prefilled, at the
// least cost (Resumer.Prefill): it continues from what its cache holds when
// that is a prefix of ids (the next turn), truncates it to the shared part
// when most of ids is a prefix of what it holds (a regenerated or edited
// message, or a benchmark's rerun), else restores the longest stored
// snapshot (with Snapshots set) or starts empty, and prefills the rest in
// batched calls. The next Stats report the reused positions as
// ResumedTokens.
func (s *Session) Resume(ctx context.Context, ids []int32, progress func(done, total int)) error {
	return s.resumer.Prefill(ctx, s, ids, progress)
}

// Save writes the committed part of the sequence as the snapshot of key
// (Resumer.SaveSession), replacing key's previous one; it returns the file's
// path, "" when there is no snapshot store or the sequence is shorter than a
// block.
func (s *Session) Save(ctx context.Context, key string) (string, error) {
	return s.resumer.SaveSession(ctx, key, s)
}

// SaveRun is Save for a run that no conversation or prompt owns (`anechat
// generate`): reruns of a prompt keep one snapshot (Resumer.SaveRun).
func (s *Session) SaveRun(ctx context.Context) (string, error) {
	return s.resumer.SaveRun(ctx, s)
}

// Logits returns the logits after the sequence's last token when the
// prefill just computed them (every token committed, nothing generated
// since), else nil. The slice is the session's: do not modify it.
func (s *Session) Logits() []float32 { return s.logits }

// ResetDrafting makes the next Generate draft as a new Session's first one
// would: the drafters' acceptance rates carried over from earlier turns are
// forgotten, and costs, when not nil, becomes the cost model (then no
// measuring). Benchmarks use it to give every rerun of a prompt the same
// start.
func (s *Session) ResetDrafting(costs *spec.Costs) {
	if costs == nil {
		costs = s.dec.Costs
	} else {
		s.costs.known = true
	}
	s.dec = spec.Decoder{Sources: spec.DefaultSources(s.opts.Corpus), Costs: costs, Lookahead: !s.opts.NoLookahead}
}
