// Package engine runs a model for one conversation: the Session owns the token
// sequence, the KV cache and the backend, prefills prompts in batched calls
// and generates through a decode loop (plain decoding here; the speculative
// verify loop of engine/spec plugs in as a Decoder).
package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
)

// DefaultMaxBatch is the widest call a Session makes when SessionOptions
// leaves it unset: prefill runs in chunks of this many tokens.
const DefaultMaxBatch = 64

// MaxWidth is the widest decode call (the pending token plus 7 drafts).
const MaxWidth = 8

// ErrContextFull is returned (wrapped) by Prefill when the sequence would
// no longer fit in the model's context: the caller starts a new sequence
// (Reset) or a shorter one.
var ErrContextFull = errors.New("the sequence does not fit in the model's context")

// Token is one generated token as Generate emits it.
type Token struct {
	// ID is the token id. A final event with ID -1 carries only text the
	// detokenizer held back at the end (an incomplete UTF-8 sequence); it is
	// not a model token.
	ID int32
	// Text is the token's text from the streaming detokenizer ("" without one,
	// or while a multi-byte character is incomplete).
	Text string
	// Drafted is true when the token came from an accepted draft.
	Drafted bool
}

// Stats describes one Generate call and the prefill that preceded it.
type Stats struct {
	// TargetCalls is the number of decode calls to the model.
	TargetCalls int
	// Drafted and Accepted count draft tokens sent to and kept by the model.
	Drafted, Accepted int
	// PrefillTokens is the number of prompt tokens run through the model
	// since the previous Generate (by Prefill, or by Generate itself).
	PrefillTokens int
	// ResumedTokens is the number of positions restored from a snapshot
	// instead of prefilled (see Restored).
	ResumedTokens int
	// TTFTms is the time from the start of the prefill (or of Generate, if
	// there was none) to the first generated token, in milliseconds.
	TTFTms float64
	// DecodeTokS is generated tokens per second of Generate's wall time.
	DecodeTokS float64
	// Tokens is the number of tokens generated.
	Tokens int
	// Stopped says why generation ended: "stop", "length" or "context".
	Stopped string
}

// GenerateOptions controls one Generate call.
type GenerateOptions struct {
	// MaxTokens caps the generated tokens; <= 0 means until a stop id or the
	// end of the context.
	MaxTokens int
	// Width is the speculation width: 1 = off, 2..8, 0 = auto.
	Width int
	// Temperature 0 is greedy decoding; > 0 samples with Seed.
	Temperature float64
	// Seed fixes the sampler's random stream.
	Seed uint64
	// Stop lists ids that end generation in addition to the model's EOS ids.
	Stop []int32
}

// TextStream turns ids into text incrementally (tokenizer.Stream has this
// shape).
type TextStream interface {
	Next(id int32) string
	Flush() string
}

// SessionOptions configures a Session.
type SessionOptions struct {
	// MaxBatch is the widest call (prefill chunk size); 0 = DefaultMaxBatch.
	// It is at least MaxWidth.
	MaxBatch int
	// Decoder runs the decode loop; nil = plain decoding (one token per
	// call, no drafts).
	Decoder Decoder
	// Text returns a fresh streaming detokenizer; nil leaves Token.Text empty.
	Text func() TextStream
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
}

// NewSession returns an empty session on b.
func NewSession(b model.Backend, opts SessionOptions) (*Session, error) {
	if b == nil {
		return nil, errors.New("engine: new session: nil backend")
	}
	cfg := b.Config()
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	opts.MaxBatch = max(opts.MaxBatch, MaxWidth)
	if ws := b.Widths(); ws != nil {
		// A fixed-shape backend: the widest call it runs bounds the cache.
		opts.MaxBatch = max(MaxWidth, slices.Max(ws))
	}
	c, err := kv.New(cfg.KV, opts.MaxBatch)
	if err != nil {
		return nil, fmt.Errorf("engine: new session for %s: %w", cfg.Arch, err)
	}
	if opts.Decoder == nil {
		opts.Decoder = PlainDecoder{}
	}
	return &Session{b: b, cfg: cfg, cache: c, opts: opts}, nil
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
// most cache.MaxBatch tokens (DESIGN.md invariant 5). progress, if not nil,
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
		n := min(s.cache.MaxBatch(), end-pos)
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
// error.
func (s *Session) Generate(ctx context.Context, opts GenerateOptions, emit func(Token) error) (Stats, error) {
	var st Stats
	if opts.Width < 0 || opts.Width > MaxWidth {
		return st, fmt.Errorf("engine: generate: width %d, want 1..%d or 0 for auto", opts.Width, MaxWidth)
	}
	if len(s.tokens) == 0 {
		return st, errors.New("engine: generate: empty sequence (prefill a prompt first)")
	}
	if err := model.CheckFiles(s.b); err != nil {
		return st, fmt.Errorf("engine: generate: %w", err)
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
	req := DecodeRequest{
		History:   s.tokens,
		Room:      s.cfg.ContextLen - s.cache.Len(),
		MaxTokens: opts.MaxTokens,
		Width:     opts.Width,
		Widths:    s.b.Widths(),
		Stop:      append(slices.Clone(s.cfg.EOS), opts.Stop...),
	}
	if s.cache.Len() == len(s.tokens) {
		req.Logits = s.logits
	}
	if opts.Temperature > 0 {
		req.Sampler = sample.New(opts.Temperature, opts.Seed, 0, 1)
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
	var emitErr error
	res, err := s.opts.Decoder.Decode(ctx, sessionTarget{s}, req, func(id int32, drafted bool) error {
		if st.Tokens == 0 {
			st.TTFTms = float64(time.Since(began).Microseconds()) / 1000
		}
		st.Tokens++
		s.tokens = append(s.tokens, id)
		tok := Token{ID: id, Drafted: drafted}
		if stream != nil {
			tok.Text = stream.Next(id)
		}
		if emitErr = emit(tok); emitErr != nil {
			return emitErr
		}
		return nil
	})
	elapsed := time.Since(t0)
	st.TargetCalls, st.Drafted, st.Accepted, st.Stopped = res.TargetCalls, res.Drafted, res.Accepted, res.Stopped
	if elapsed > 0 {
		st.DecodeTokS = float64(st.Tokens) / elapsed.Seconds()
	}
	if res.Stopped == "stop" && res.Pending >= 0 {
		s.tokens = append(s.tokens, res.Pending)
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
			if err := emit(Token{ID: -1, Text: tail}); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// sessionTarget is the model plus the session's cache, as a Decoder drives it.
type sessionTarget struct{ s *Session }

func (t sessionTarget) Forward(ctx context.Context, tokens []int32, want model.Output) (model.Result, error) {
	return t.s.b.Forward(ctx, tokens, t.s.cache.Len(), t.s.cache, want)
}

func (t sessionTarget) Commit(n int) error { return t.s.cache.Commit(n) }
