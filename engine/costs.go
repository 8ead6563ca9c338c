package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"anechat/engine/model"
	"anechat/engine/spec"
)

// CostStore keeps JSON values under keys between runs: the settings table of
// the data directory's database (*storage.DB satisfies it). A Session keeps
// each model's measured call costs there, so a later run (the next `anechat
// generate`, the app after a restart) skips measuring.
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
// were measured (every width the backend runs; a table for other widths is
// not used) and spec.Costs.Table's per-width seconds.
type storedCosts struct {
	Widths  []int              `json:"widths"`
	Seconds map[string]float64 `json:"seconds"`
}

// measureReps is the number of timed calls per width when the Session
// measures the costs itself: few, since the cost model then follows the
// calls actually made. Two of each width 1..8 hold up the first token a
// little longer than three of 1..4 did (SmolLM2 on 2 shared Xeon cores:
// ~350 ms against ~240 ms at best), and only once per model and kernel set
// when the table is kept.
const measureReps = 2

// costState says where a Session's cost model came from.
type costState struct {
	// known: given (SessionOptions.Costs, ResetDrafting), loaded or
	// measured; nothing more to do.
	known bool
	// measurements counts the spec.Measure runs (Measurements).
	measurements int
}

// measureWidths is every call width b runs: its own list, or 1..MaxWidth.
func measureWidths(b model.Backend) []int {
	if ws := b.Widths(); ws != nil {
		return slices.Clone(ws)
	}
	ws := make([]int, spec.MaxWidth)
	for i := range ws {
		ws[i] = i + 1
	}
	return ws
}

// ensureCosts gives the verify loop the backend's cost model when it has
// none yet: the table CostStore keeps for the backend (CostsKey), else a
// measurement of every width the backend runs, once, stored for the next
// runs. Whatever width is asked later, the table serves it. A measurement
// cut short by ctx is an error (measured again next time); one that fails
// otherwise is logged and the loop starts from assumed costs that learn
// from the calls made.
func (s *Session) ensureCosts(ctx context.Context) error {
	if s.costs.known {
		return nil
	}
	widths := measureWidths(s.b)
	key := backendCostsKey(s.b)
	persist := s.opts.CostStore != nil && key != ""
	if persist {
		if c := s.loadCosts(ctx, key, widths); c != nil {
			s.dec.Costs, s.costs.known = c, true
			return nil
		}
	}
	s.costs.measurements++
	c, err := spec.Measure(ctx, s.b, spec.MeasureOptions{Widths: widths, Reps: measureReps})
	if err != nil && ctx.Err() != nil {
		return err
	}
	s.costs.known = true
	if err != nil {
		s.log.Warn("speculation: measuring call costs failed; starting from assumed costs", "err", err)
		return nil
	}
	s.dec.Costs = c
	if persist {
		s.saveCosts(ctx, key, widths, c)
	}
	return nil
}

// Measurements is how many times the session has measured the backend's
// call costs (spec.Measure): 0 while its costs were given or loaded from
// the CostStore, or before its first speculative Generate.
func (s *Session) Measurements() int { return s.costs.measurements }

// Costs is the cost model the verify loop uses: nil before the first
// Generate when none was given; until the first speculative Generate, one
// that width-1 calls fed.
func (s *Session) Costs() *spec.Costs { return s.dec.Costs }

// loadCosts returns the costs stored under key, measured for exactly
// widths; nil when there are none usable (the reason is logged).
func (s *Session) loadCosts(ctx context.Context, key string, widths []int) *spec.Costs {
	raw, found, err := s.opts.CostStore.SettingRaw(ctx, key)
	if err != nil {
		s.log.Warn("speculation: stored call costs not read: measuring again", "key", key, "err", err)
		return nil
	}
	if !found {
		return nil
	}
	c, err := parseCosts(raw, widths)
	if err != nil {
		s.log.Warn("speculation: stored call costs ignored: measuring again", "key", key, "err", err)
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
		v, ok := sc.Seconds[fmt.Sprint(w)]
		if !ok || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("width %d: time %v, want a positive number of seconds", w, v)
		}
		sec[w] = v
	}
	return spec.NewCosts(sec), nil
}

// saveCosts stores c as measured for widths under key; a failure is logged
// (the next run measures again).
func (s *Session) saveCosts(ctx context.Context, key string, widths []int, c *spec.Costs) {
	sc := storedCosts{Widths: widths, Seconds: map[string]float64{}}
	for w, v := range c.Table() {
		sc.Seconds[fmt.Sprint(w)] = v
	}
	raw, err := json.Marshal(sc)
	if err == nil {
		err = s.opts.CostStore.SetSettingRaw(context.WithoutCancel(ctx), key, raw)
	}
	if err != nil {
		s.log.Warn("speculation: measured call costs not saved", "key", key, "err", err)
	}
}
