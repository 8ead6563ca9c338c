package engine

import (
	"context"
	"fmt"
	"slices"

	"anechat/engine/model"
	"anechat/engine/sample"
)

// Target is the model and the KV cache of one sequence as a decode loop sees
// it: one step is Forward(pending token + drafts) and Commit(accepted rows).
type Target interface {
	// Forward runs tokens at the positions right after the committed ones;
	// their K/V rows stay pending until Commit.
	Forward(ctx context.Context, tokens []int32, want model.Output) (model.Result, error)
	// Commit keeps the first n pending rows and drops the rest.
	Commit(n int) error
}

// DecodeRequest is what a Decoder continues.
type DecodeRequest struct {
	// History is the whole sequence so far. When Logits is nil its last token
	// is not in the cache: the first call feeds it.
	History []int32
	// Logits, when set, follow History's last token, which is committed.
	Logits []float32
	// Room is the number of free positions in the cache's context.
	Room int
	// MaxTokens caps generated tokens (<= 0: no cap).
	MaxTokens int
	// Width is the speculation width (1 = off, 0 = auto).
	Width int
	// Widths lists the widths the backend runs (nil = any).
	Widths []int
	// Sampler picks tokens; nil means greedy.
	Sampler *sample.Sampler
	// Stop ids end generation and are not emitted.
	Stop []int32
}

// DecodeResult describes a finished decode loop.
type DecodeResult struct {
	// TargetCalls counts Forward calls; Drafted and Accepted count drafts.
	TargetCalls, Drafted, Accepted int
	// Stopped is "stop", "length" or "context".
	Stopped string
	// Pending is the sequence's last token (the last emitted one, or the stop
	// id), not in the cache; -1 if none.
	Pending int32
}

// A Decoder runs Generate's decode loop: it calls emit for every generated
// token in order and commits exactly the rows of the tokens it keeps. engine/
// spec's verify loop is one; PlainDecoder is the reference.
type Decoder interface {
	Decode(ctx context.Context, t Target, req DecodeRequest, emit func(id int32, drafted bool) error) (DecodeResult, error)
}

// PlainDecoder decodes one token per model call, with no drafts, whatever the
// width: the reference that speculative decoding must reproduce.
type PlainDecoder struct{}

// Decode implements Decoder.
func (PlainDecoder) Decode(ctx context.Context, t Target, req DecodeRequest, emit func(id int32, drafted bool) error) (DecodeResult, error) {
	res := DecodeResult{Pending: -1}
	if len(req.History) == 0 {
		return res, fmt.Errorf("engine: decode: empty history")
	}
	greedy := req.Sampler == nil || req.Sampler.IsGreedy()
	want := model.Logits
	if greedy {
		want = model.Argmax
	}
	pick := func(r model.Result) int32 {
		if greedy && r.Argmax != nil {
			return r.Argmax[0]
		}
		if greedy {
			return sample.Greedy(r.Logits[0])
		}
		return req.Sampler.Sample(r.Logits[0])
	}
	remaining := req.MaxTokens
	if remaining <= 0 {
		remaining = int(^uint(0) >> 1)
	}
	room := req.Room
	pending := req.History[len(req.History)-1]
	res.Pending = pending
	if req.Logits != nil {
		id := pick(model.Result{Logits: [][]float32{req.Logits}})
		if id < 0 {
			return res, fmt.Errorf("engine: decode: the logits of the last prompt token: %w", model.ErrDamaged)
		}
		res.Pending = id
		if slices.Contains(req.Stop, id) {
			res.Stopped = "stop"
			return res, nil
		}
		remaining--
		if err := emit(id, false); err != nil {
			return res, err
		}
		pending = id
	}
	call := make([]int32, 1) // reused: Forward does not keep its tokens (spec's loop relies on it too)
	for {
		switch {
		case remaining <= 0:
			res.Stopped = "length"
			return res, nil
		case room <= 0:
			res.Stopped = "context"
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		call[0] = pending
		r, err := t.Forward(ctx, call, want)
		res.TargetCalls++
		if err != nil {
			return res, err
		}
		if len(r.Argmax) != 1 && len(r.Logits) != 1 {
			return res, fmt.Errorf("engine: decode: model returned no row")
		}
		id := pick(r)
		if id < 0 {
			return res, fmt.Errorf("engine: decode: %w", model.ErrDamaged)
		}
		if err := t.Commit(1); err != nil {
			return res, err
		}
		room--
		pending, res.Pending = id, id
		if slices.Contains(req.Stop, id) {
			res.Stopped = "stop"
			return res, nil
		}
		remaining--
		if err := emit(id, false); err != nil {
			return res, err
		}
	}
}
