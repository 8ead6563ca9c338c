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
	// model and calls emit with each piece of reply text as it is decoded.
	// It stops when the model ends its turn, at req.MaxTokens, when emit
	// returns an error, or when ctx is cancelled (then it returns ctx.Err()).
	Generate(ctx context.Context, req GenerateRequest, emit func(text string) error) (GenerateStats, error)
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
}

// GenerateStats is what a Generator reports about one reply; Chat stores it
// as the message's stats JSON.
type GenerateStats struct {
	Tokens        int     `json:"tokens"`
	PrefillTokens int     `json:"prefillTokens"`
	ResumedTokens int     `json:"resumedTokens"`
	TargetCalls   int     `json:"targetCalls"`
	Drafted       int     `json:"drafted"`
	Accepted      int     `json:"accepted"`
	TTFTms        float64 `json:"ttftMs"`
	DecodeTokS    float64 `json:"decodeTokS"`
	Width         int     `json:"width"`
	Stopped       string  `json:"stopped"` // stop, length, context, cancelled, error
}

// ErrNoEngine: this build has no inference engine wired into the app, so no
// reply can be generated.
var ErrNoEngine = errors.New("no model available: this build of anechat has no inference engine wired into the app yet (the command line runs models: see `anechat help`)")

// ErrNoModel: no model is registered or chosen.
var ErrNoModel = errors.New("no model available: put a model (a .gguf file or a model directory) in the data directory's models folder, press Scan on the Models page and choose a default")
