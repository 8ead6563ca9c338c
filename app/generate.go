package app

import (
	"context"
	"errors"

	"anechat/engine"
	"anechat/storage"
)

// Generator runs a model over a conversation and streams the reply. The
// engine plugs in here (an engine.Session behind it); Chat owns storage,
// events and cancellation, the Generator only turns messages into tokens.
type Generator interface {
	// Generate renders req.Messages with the model's chat template, runs the
	// model and calls emit with each piece of reply text as it is decoded,
	// saying whether it came from an accepted speculative draft.
	// It stops when the model ends its turn, at req.MaxTokens, when emit
	// returns an error, or when ctx is cancelled (then it returns ctx.Err()).
	Generate(ctx context.Context, req GenerateRequest, emit func(Piece) error) (GenerateStats, error)
}

// Preparer is a Generator that can store a KV snapshot of a conversation's
// opening (a library prompt: its system prompt and body) under key, so that a
// chat starting with it later resumes instead of prefilling it.
type Preparer interface {
	// Prepare renders req.Messages as Generate would (with the generation
	// prompt), prefills them and saves the KV snapshot under key. It returns
	// the snapshot; a Path of "" means the opening was too short to store.
	Prepare(ctx context.Context, req GenerateRequest, key string) (Prepared, error)
}

// Prepared is the snapshot Prepare stored.
type Prepared struct {
	Path   string // the snapshot file, "" if none was stored
	Tokens int    // token positions it holds
}

// Piece is a piece of decoded reply text: one token's worth (a token whose
// text the detokenizer holds back is not emitted), with the reply's counts
// when it comes out (engine.Token: tokens generated, this one included and
// those whose text was held back; tokens from accepted drafts; model calls
// made), from which the window shows τ = Tokens/Calls and the drafted share
// Accepted/Tokens while the reply streams. The engine counts them; a
// Generator that does not count leaves them 0.
type Piece = engine.Token

// ChatMessage is one turn sent to the model.
type ChatMessage struct {
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
}

// GenerateRequest is one reply to generate.
type GenerateRequest struct {
	// Model is the registered model to run (path, kind, fingerprint).
	Model storage.Model
	// ConversationID identifies the conversation, for KV cache reuse.
	ConversationID int64
	// Messages is the branch being answered, system prompt first if any.
	Messages []ChatMessage
	// Width is the speculation width: 1 = off, 2..8, 0 = auto.
	Width int
	// MaxTokens caps the reply; Temperature 0 is greedy, else sampled with Seed.
	MaxTokens   int
	Temperature float64
	Seed        uint64
	// Library is text the reply may repeat (the prompt library's system
	// prompts and bodies): speculation drafts from it by suffix matching.
	Library []string
	// Progress, if not nil, hears how far the prompt's prefill is: done of
	// total tokens, after each batched model call. Cancelling ctx stops the
	// prefill between calls.
	Progress func(done, total int) `json:"-"`
}

// GenerateStats is what a Generator reports about one reply; Chat stores it
// as the message's stats JSON. The engine's figures (engine.Stats: tokens,
// prompt tokens prefilled and resumed, model calls, drafts, time to first
// token, speed, why it stopped) carry their JSON names; the app adds what
// only it knows.
type GenerateStats struct {
	engine.Stats
	// Width is the speculation width the reply was asked for.
	Width int `json:"width"`
	// DraftedSpans are the stretches of the reply's text that came from
	// accepted drafts, as [start, end) offsets in UTF-16 code units (what the
	// window's strings index), in order and not touching. Chat fills it in
	// from the pieces, so the highlighting survives a reload.
	DraftedSpans [][2]int `json:"draftedSpans,omitempty"`
	// Model is the name of the model that wrote the reply (Chat fills it
	// in), "" in replies stored before it was recorded.
	Model string `json:"model,omitempty"`
	// ResumedPrompt is the title of the prepared library prompt whose KV
	// snapshot the reply resumed from (Chat fills it in: the window says so
	// in the reply), "" when it did not.
	ResumedPrompt string `json:"resumedPrompt,omitempty"`
}

// addPiece extends spans by a piece of n UTF-16 units at offset at.
func addPiece(spans [][2]int, at, n int, drafted bool) [][2]int {
	if !drafted || n == 0 {
		return spans
	}
	if k := len(spans); k > 0 && spans[k-1][1] == at {
		spans[k-1][1] = at + n
		return spans
	}
	return append(spans, [2]int{at, at + n})
}

// ErrNoEngine: this build has no inference engine wired into the app, so no
// reply can be generated.
var ErrNoEngine = errors.New("no model available: this build of anechat has no inference engine wired into the app yet (the command line runs models: see `anechat help`)")

// ErrNoModel: no model is registered or chosen.
var ErrNoModel = errors.New("no model available: put a model (a .gguf file or a model directory) in the data directory's models folder, press Scan on the Models page and choose a default")
