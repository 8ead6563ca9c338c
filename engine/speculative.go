package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"anechat/engine/model"
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
	// measurements counts the spec.Measure runs (Measurements).
	measurements int
	// costStore, when set, keeps measured costs between runs (PersistCosts).
	costStore CostStore
	costLog   *slog.Logger
}

// CostStore keeps JSON values under keys between runs: the settings table of
// the data directory's database (*storage.DB satisfies it). The speculative
// decoder keeps each model's measured costs there, so a later run (the next
// `anechat generate`, the app after a restart) skips measuring.
type CostStore interface {
	SettingRaw(ctx context.Context, key string) (value json.RawMessage, found bool, err error)
	SetSettingRaw(ctx context.Context, key string, value json.RawMessage) error
}

// CostsKey is the CostStore key of the measured costs of the model whose
// weights have fingerprint fp (model.Config.Fingerprint), run by the kernel
// set named kernels (model.KernelsOf): "spec.costs/<fp>/<kernels>", or
// "spec.costs/<fp>" for a backend that does not name its kernels. The costs
// depend on the kernels and the machine as much as on the model, so a table
// measured by a build with other kernels, or on a CPU that selects another
// set, is simply not found and the costs are measured again.
func CostsKey(fp, kernels string) string {
	if kernels == "" {
		return "spec.costs/" + fp
	}
	return "spec.costs/" + fp + "/" + kernels
}

// backendCostsKey is CostsKey for b; "" when b has no fingerprint (its
// costs are not kept).
func backendCostsKey(b model.Backend) string {
	fp := b.Config().Fingerprint
	if fp == "" {
		return ""
	}
	return CostsKey(fp, model.KernelsOf(b))
}

// storedCosts is the JSON form of a measured cost table: the widths that
// were measured (a table is used only for exactly the widths a decoder would
// measure) and spec.Costs.Table's per-width seconds.
type storedCosts struct {
	Widths  []int              `json:"widths"`
	Seconds map[string]float64 `json:"seconds"`
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

// PersistCosts makes the decoder load the backend's measured costs from
// store instead of measuring them, and save them there after measuring. The
// key is CostsKey of the backend's fingerprint and of its kernel set when it
// names one (model.KernelNamer): a table measured with other kernels, by an
// older build or on another CPU, is not found and the costs are measured
// anew. A stored table that does not decode, or was measured for other
// widths, is ignored with a warning on log (nil: slog's default) and
// measured again, then overwritten. A backend without a fingerprint, or a
// decoder given its costs, does neither. Call it before the first Decode.
func (d *SpecDecoder) PersistCosts(store CostStore, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	d.costStore, d.costLog = store, log
}

// Measurements is how many times the decoder has measured the backend's
// call costs (spec.Measure): 0 when its costs were given or loaded from the
// CostStore.
func (d *SpecDecoder) Measurements() int { return d.measurements }

// loadCosts returns the costs stored under key, measured for exactly
// widths; nil when there are none usable (the reason is logged).
func (d *SpecDecoder) loadCosts(ctx context.Context, key string, widths []int) *spec.Costs {
	raw, found, err := d.costStore.SettingRaw(ctx, key)
	if err != nil {
		d.costLog.Warn("speculation: stored call costs not read: measuring again", "key", key, "err", err)
		return nil
	}
	if !found {
		return nil
	}
	c, err := parseCosts(raw, widths)
	if err != nil {
		d.costLog.Warn("speculation: stored call costs ignored: measuring again", "key", key, "err", err)
		return nil
	}
	return c
}

// parseCosts decodes a storedCosts for exactly widths, every width's time
// positive and finite.
func parseCosts(raw json.RawMessage, widths []int) (*spec.Costs, error) {
	var sc storedCosts
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("decode %.80s: %w", raw, err)
	}
	if !slices.Equal(sc.Widths, widths) {
		return nil, fmt.Errorf("measured for widths %v, want %v", sc.Widths, widths)
	}
	if len(sc.Seconds) != len(widths) {
		return nil, fmt.Errorf("%d times for %d widths %v", len(sc.Seconds), len(widths), widths)
	}
	sec := map[int]float64{}
	for _, w := range widths {
		s, ok := sc.Seconds[fmt.Sprint(w)]
		if !ok || !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("width %d: time %v, want a positive number of seconds", w, s)
		}
		sec[w] = s
	}
	return spec.NewCosts(sec), nil
}

// saveCosts stores c as measured for widths under key; a failure is logged
// (the next run measures again).
func (d *SpecDecoder) saveCosts(ctx context.Context, key string, widths []int, c *spec.Costs) {
	sc := storedCosts{Widths: widths, Seconds: map[string]float64{}}
	for w, s := range c.Table() {
		sc.Seconds[fmt.Sprint(w)] = s
	}
	raw, err := json.Marshal(sc)
	if err == nil {
		err = d.costStore.SetSettingRaw(context.WithoutCancel(ctx), key, raw)
	}
	if err != nil {
		d.costLog.Warn("speculation: measured call costs not saved", "key", key, "err", err)
	}
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
			key := backendCostsKey(st.s.b)
			persist := d.costStore != nil && key != ""
			if persist {
				if c := d.loadCosts(ctx, key, widths); c != nil {
					d.spec.Costs, d.measured = c, w
				}
			}
			if d.measured < w {
				d.measurements++
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
					if persist {
						d.saveCosts(ctx, key, widths, c)
					}
				}
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
