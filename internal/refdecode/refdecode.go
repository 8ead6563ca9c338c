// Package refdecode is the reference that speculative decoding is checked
// against in tests: decoding without speculation, one token per model call of
// width 1, the prompt included. It shares no code with engine/spec's verify
// loop or with the engine's Session (not even their batched prefill), so a
// bug there cannot hide in the reference: the tests compare every width, and
// every Session path, with what this plain loop produces.
package refdecode

import (
	"context"
	"fmt"
	"slices"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
)

// Result is what Generate produced.
type Result struct {
	// IDs are the generated tokens, the stop token excluded.
	IDs []int32
	// Stopped is why generation ended: "stop" (a stop token), "length"
	// (maxTokens) or "context" (the model's context is full).
	Stopped string
	// Stop is the stop token that ended generation; -1 when none did.
	Stop int32
}

// Generate continues history on b, on a cache of its own: every token of
// history goes through the model one call at a time, then each generated
// token is picked from the last call's row (b's argmax when sampler is nil
// or greedy, else one sampler.Sample of the logits) and fed back. It stops
// at a token of stop (picked but not emitted), after maxTokens tokens (<= 0:
// no cap), or when the context is full: the last token, picked from the
// logits of the last position, never needs a position of its own.
func Generate(ctx context.Context, b model.Backend, history []int32, maxTokens int, sampler *sample.Sampler, stop []int32) (Result, error) {
	res := Result{Stop: -1}
	cfg := b.Config()
	if len(history) == 0 || len(history) > cfg.ContextLen {
		return res, fmt.Errorf("refdecode: history of %d tokens for a context of %d", len(history), cfg.ContextLen)
	}
	c, err := kv.New(cfg.KV, 1)
	if err != nil {
		return res, fmt.Errorf("refdecode: %w", err)
	}
	greedy := sampler == nil || sampler.IsGreedy()
	want := model.Logits
	if greedy {
		want = model.Argmax
	}
	seq := slices.Clone(history)
	// next runs seq's token at position c.Len() and picks what follows it
	// (the prompt's rows but the last are not picked from: that would
	// draw from the sampler).
	next := func(pick bool) (int32, error) {
		p := c.Len()
		r, err := b.Forward(ctx, seq[p:p+1], p, c, want)
		if err != nil {
			return -1, fmt.Errorf("refdecode: position %d: %w", p, err)
		}
		if err := c.Commit(1); err != nil {
			return -1, fmt.Errorf("refdecode: %w", err)
		}
		if !pick {
			return -1, nil
		}
		if greedy && len(r.Argmax) == 1 {
			return r.Argmax[0], nil
		}
		if len(r.Logits) != 1 {
			return -1, fmt.Errorf("refdecode: position %d: %d rows for one token", p, len(r.Logits))
		}
		if greedy {
			return sample.Greedy(r.Logits[0]), nil
		}
		return sampler.Sample(r.Logits[0]), nil
	}
	for c.Len() < len(history)-1 {
		if _, err := next(false); err != nil {
			return res, err
		}
	}
	for {
		switch {
		case maxTokens > 0 && len(res.IDs) >= maxTokens:
			res.Stopped = "length"
			return res, nil
		case c.Len() >= cfg.ContextLen:
			res.Stopped = "context"
			return res, nil
		}
		id, err := next(true)
		if err != nil {
			return res, err
		}
		if id < 0 || int(id) >= cfg.VocabSize {
			return res, fmt.Errorf("refdecode: picked token %d outside the vocabulary of %d", id, cfg.VocabSize)
		}
		if slices.Contains(stop, id) {
			res.Stopped, res.Stop = "stop", id
			return res, nil
		}
		res.IDs = append(res.IDs, id)
		seq = append(seq, id)
	}
}
