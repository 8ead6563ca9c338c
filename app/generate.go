package app

import (
	"context"
	"errors"

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

// Piece is a piece of decoded reply text: one token's worth (possibly empty
// text held back by the detokenizer is not emitted).
type Piece struct {
	Text string
	// Drafted: the token came from an accepted draft (speculation guessed it
	// and the model confirmed it), not from the model's own verify step.
	Drafted bool
	// Tokens, Accepted and Calls are the reply's counts when the piece
	// comes out: tokens generated (this one included, and those whose text
	// the detokenizer held back), tokens from accepted drafts, and model
	// calls made. The window shows τ = Tokens/Calls and the drafted share
	// Accepted/Tokens from them while the reply streams. 0 from a
	// Generator that does not count.
	Tokens, Accepted, Calls int
}

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
// as the message's stats JSON.
type GenerateStats struct {
	Tokens        int `json:"tokens"`
	PrefillTokens int `json:"prefillTokens"`
	ResumedTokens int `json:"resumedTokens"`
	TargetCalls   int `json:"targetCalls"`
	Drafted       int `json:"drafted"`
	Accepted      int `json:"accepted"`
	// Declined, Probes and DraftNote say why the reply drafted less than it
	// could (spec.Stats): the window shows DraftNote on the stats line.
	Declined   int     `json:"declined,omitempty"`
	Probes     int     `json:"probes,omitempty"`
	DraftNote  string  `json:"draftNote,omitempty"`
	TTFTms     float64 `json:"ttftMs"`
	DecodeTokS float64 `json:"decodeTokS"`
	Width      int     `json:"width"`
	Stopped    string  `json:"stopped"` // stop, length, context, cancelled, error
	// DraftedSpans are the stretches of the reply's text that came from
	// accepted drafts, as [start, end) offsets in UTF-16 code units (what the
	// window's strings index), in order and not touching. Chat fills it in
	// from the pieces, so the highlighting survives a reload.
	DraftedSpans [][2]int `json:"draftedSpans,omitempty"`
	// Model is the name of the model that wrote the reply (Chat fills it
	// in), "" in replies stored before it was recorded.
	Model string `json:"model,omitempty"`
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
