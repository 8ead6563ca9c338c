package engine

import (
	"context"
	"log/slog"

	"anechat/engine/spec"
)

// SpecDecoder is engine/spec's speculative verify loop as a Session Decoder:
// drafts from prompt lookup (and a corpus of earlier text, when set), one
// model call of width 1+drafts per step, output identical to PlainDecoder.
// It serves one Session (one request at a time).
type SpecDecoder struct {
	// Ungated sends every proposal whatever its acceptance rate (for
	// tests and for measuring what the drafters could accept).
	Ungated bool

	spec spec.Decoder
	last spec.Stats
	// measure: the costs are measured here, at the first speculative
	// Decode, for widths 1..measured only (the width asked for: measuring
	// every width would hold up the first token for longer, and the CLI
	// pays that on every run); a request for a wider width measures again.
	measure  bool
	measured int
}

// measureReps is the number of timed calls per width when the decoder
// measures the costs itself: few, since the cost model then follows the
// calls actually made.
const measureReps = 3

// NewSpecDecoder returns a speculative decoder. costs is the backend's cost
// model (spec.Measure at load); nil measures it on the Session's backend at
// the first speculative Decode, for the widths up to the one requested (a
// wider request later measures again; see spec.MeasureOptions.Budget for
// the bound on the time it takes).
// corpus, when not nil, adds suffix matching over earlier conversations and
// saved prompts.
func NewSpecDecoder(costs *spec.Costs, corpus *spec.Corpus) *SpecDecoder {
	return &SpecDecoder{spec: spec.Decoder{Sources: spec.DefaultSources(corpus), Costs: costs}, measure: costs == nil}
}

// Decode implements Decoder.
func (d *SpecDecoder) Decode(ctx context.Context, t Target, req DecodeRequest, emit func(id int32, drafted bool) error) (DecodeResult, error) {
	w := req.Width
	if w == 0 {
		w = spec.MaxWidth
	}
	if d.measure && w > 1 && w > d.measured {
		if st, ok := t.(sessionTarget); ok {
			var widths []int
			for _, x := range req.Widths {
				if x <= w {
					widths = append(widths, x)
				}
			}
			if req.Widths == nil {
				for x := 1; x <= w; x++ {
					widths = append(widths, x)
				}
			}
			c, err := spec.Measure(ctx, st.s.b, spec.MeasureOptions{Widths: widths, Reps: measureReps})
			if err != nil && ctx.Err() != nil {
				return DecodeResult{Pending: -1}, err // measure again next time
			}
			d.measured = w
			if err != nil {
				// The loop then starts from assumed costs and learns.
				slog.Warn("speculation: measuring call costs failed", "err", err)
			} else {
				d.spec.Costs = c
			}
		}
	}
	st, err := d.spec.Run(ctx, t, spec.Request{
		History:   req.History,
		Logits:    req.Logits,
		Room:      req.Room,
		MaxTokens: req.MaxTokens,
		Width:     req.Width,
		Widths:    req.Widths,
		Sampler:   req.Sampler,
		Stop:      req.Stop,
		Ungated:   d.Ungated,
	}, func(tk spec.Token) error { return emit(tk.ID, tk.Drafted) })
	d.last = st
	return DecodeResult{
		TargetCalls: st.TargetCalls,
		Drafted:     st.Drafted,
		Accepted:    st.Accepted,
		Stopped:     st.Stopped,
		Pending:     st.Pending,
	}, err
}

// LastStats returns the verify loop's statistics for the last Decode (per
// source drafts, wide calls), beyond what Stats carries.
func (d *SpecDecoder) LastStats() spec.Stats { return d.last }

// Costs is the cost model in use (nil before the first Decode when none was
// given; until the first speculative Decode, one that width-1 calls fed).
func (d *SpecDecoder) Costs() *spec.Costs { return d.spec.Costs }
