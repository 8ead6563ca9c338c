// Package spec is lossless speculative decoding without a draft model: cheap
// Go drafters propose tokens from text the model has already seen (prompt
// lookup over the request, suffix matching over a corpus of earlier turns and
// saved prompts), and the verify loop checks them with one model call of width
// 1+len(drafts), keeping the longest prefix the model agrees with plus the
// model's own next token.
//
// The output is the output of decoding without speculation, token for token:
// with greedy decoding a draft is kept only when it equals the model's argmax;
// with sampling, each emitted token is picked with exactly one draw of the
// seeded sampler, as width 1 would (see sample.Sampler.Pick), and a draft is
// kept only when the pick equals it. That relies on the backend's row
// independence (DESIGN.md invariant 1).
//
// The package owns the decode contract: Request, Stats, Token, MaxWidth and
// the Target the loop drives (the model plus its KV cache; BackendTarget
// adapts a model.Backend and kv.Cache). Width 1 is the same loop with no
// drafts, so there is one decode path; the tests check every width against
// internal/refdecode, an independent plain loop.
package spec

import (
	"context"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
)

// MaxWidth is the widest verify call: the pending token plus 7 drafts.
const MaxWidth = 8

// DefaultWidth is the speculation width when the user has not chosen one.
const DefaultWidth = 4

// A Target is the model the verify loop drives: a backend and the KV cache of
// one sequence.
type Target interface {
	// Forward runs tokens at the positions right after the committed ones
	// and returns a row per token (logits or argmax, as want asks). Their
	// K/V rows stay pending until Commit.
	Forward(ctx context.Context, tokens []int32, want model.Output) (model.Result, error)
	// Commit keeps the first n pending rows of the last Forward and drops
	// the rest (DESIGN.md invariant 3).
	Commit(n int) error
}

// BackendTarget is a Target made of a backend and the cache it runs against
// (the engine's Session drives the loop through one).
type BackendTarget struct {
	Backend model.Backend
	Cache   *kv.Cache
}

// Forward runs tokens at positions Cache.Len()...
func (t BackendTarget) Forward(ctx context.Context, tokens []int32, want model.Output) (model.Result, error) {
	return t.Backend.Forward(ctx, tokens, t.Cache.Len(), t.Cache, want)
}

// Commit keeps the first n pending rows.
func (t BackendTarget) Commit(n int) error { return t.Cache.Commit(n) }

// Token is one generated token, with the generation's counts when it is
// emitted. Its JSON (the counts, not the id) is what the app's window gets
// of each piece of a reply (app.TokenEvent): the counts are made here once,
// where they are counted, not recounted by each caller.
type Token struct {
	ID int32 `json:"-"`
	// Drafted is true when the token came from an accepted draft rather
	// than from the model's own next-token choice (the UI highlights it).
	Drafted bool `json:"drafted"`
	// Tokens is the number of tokens this generation has emitted, this one
	// included; Accepted, how many of them came from accepted drafts.
	// Tokens over Calls is τ so far, Accepted over Tokens the drafted
	// share: exact while the reply streams, and the last token's equal the
	// generation's Stats.
	Tokens   int `json:"tokens"`
	Accepted int `json:"accepted"`
	// Calls is the number of model calls this generation has made when the
	// token is emitted (the call that produced it included; 0 for a first
	// token picked from Request.Logits). A stop token may take one call
	// more, which no token follows.
	Calls int `json:"calls"`
	// Logprob is the token's log-probability at its position, and Top the
	// Request.TopLogprobs most likely ids there with theirs (most likely
	// first, ties to the lower id): the log-softmax of the model's logits
	// row, before temperature and top-p (sample.Logprobs). Set only with
	// Request.Logprobs; the same at every width.
	Logprob float64               `json:"-"`
	Top     []sample.TokenLogprob `json:"-"`
}
