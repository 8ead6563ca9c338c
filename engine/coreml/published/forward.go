package published

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"anechat/engine/coreml"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/mmap"
)

// Forward implements model.Backend. A call asking for model.Last runs the
// prefill chunks for its first N tokens when it starts at position 0, and
// the decode function token by token for the rest, and returns the last
// row's argmax (and no logits row: the
// Session then computes the last token again with its first decode call);
// any other call runs the decode function for one
// token and the verify function, in pieces of K, for more. A call asking
// for logits without model.Last fails with ErrNoLogits.
func (be *Model) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (_ model.Result, err error) {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		return model.Result{}, errors.New("coreml: forward on a closed backend")
	}
	defer mmap.Guard(&err, be.mappings()...)()
	if len(tokens) == 0 {
		return model.Result{}, fmt.Errorf("%w: forward of no tokens", coreml.ErrInput)
	}
	if want&model.Logits != 0 && want&model.Last == 0 {
		return model.Result{}, ErrNoLogits
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= be.cfg.VocabSize {
			return model.Result{}, fmt.Errorf("%w: token id %d outside the vocabulary 0..%d", coreml.ErrInput, id, be.cfg.VocabSize-1)
		}
	}
	if g := cache.Geometry(); !slices.EqualFunc(g.Layers, be.cfg.KV.Layers, func(a, b kv.LayerSpec) bool { return a == b }) || g.Context > be.cfg.KV.Context {
		return model.Result{}, fmt.Errorf("%w: the cache's geometry is not this model's", coreml.ErrInput)
	}
	if err := cache.Reserve(start, len(tokens)); err != nil {
		return model.Result{}, err
	}
	var ids []int32
	verify := be.fns[FuncVerify]
	for off := 0; off < len(tokens); {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		f := be.fns[FuncDecode]
		n := 1
		switch pre := be.fns[FuncPrefill]; {
		case want&model.Last != 0 && pre != nil && start+off == 0 && len(tokens)-off > 1:
			// The prefill chunks start at position 0 only.
			f, n = pre, min(pre.width, len(tokens)-off)
		case want&model.Last == 0 && verify != nil && len(tokens)-off > 1 && start+off <= be.geo.window-verify.width:
			// Past W-K the verify graph's shift drops positions that
			// its early rows need (PUBLISHED.md, "The sliding window"):
			// there decode_q1 runs token by token, so speculation stays
			// lossless.
			f, n = verify, min(verify.width, len(tokens)-off)
		}
		t0 := time.Now()
		got, err := be.call(ctx, f, tokens[off:off+n], start+off, cache)
		if err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		be.stats.Add(f.name, n, time.Since(t0))
		ids = append(ids, got...)
		off += n
	}
	var res model.Result
	if want&model.Argmax != 0 {
		if want&model.Last != 0 {
			ids = ids[len(ids)-1:]
		}
		res.Argmax = ids
	}
	return res, nil
}

// call runs function f on tokens at start (n <= f.width real rows, the
// rest padded with the last token) and writes their new K/V rows into the
// cache's pending rows; it returns the argmax of the real rows.
func (be *Model) call(ctx context.Context, f *function, tokens []int32, start int, cache *kv.Cache) ([]int32, error) {
	g := &be.geo
	T, n := f.width, len(tokens)
	tok := func(t int) int { return int(tokens[min(t, n-1)]) }
	if x := f.host["hidden_states"]; x != nil {
		for t := range T {
			be.embed.RowHalf(x.f16[t*g.hidden:(t+1)*g.hidden], tok(t))
		}
	}
	if x := f.host["per_layer_raw"]; x != nil {
		for t := range T {
			be.ple.RowHalf(x.f16[t*g.perLayer:(t+1)*g.perLayer], tok(t))
		}
	}
	for name, tab := range be.ropes {
		if x := f.host[name]; x != nil {
			for t := range T {
				tab.row(x.f16[t*tab.width:(t+1)*tab.width], start+t)
			}
		}
	}
	one := coreml.ToHalf(1)
	if x := f.host["causal_mask_full"]; x != nil {
		// Slot i holds position i: row t sees 0..start+t.
		coreml.Mask(T, g.context, func(t int) (int, int) { return 0, min(start+t+1, g.context) }, x.fill)
	}
	if x := f.host["causal_mask_sliding"]; x != nil {
		// Both functions shift the W-slot buffer left by T inside the
		// graph and append the call's T rows (PUBLISHED.md, "The sliding
		// window"), so slot i holds position start+T-W+i; row t sees the
		// slots holding positions 0..start+t. For decode_q1 (T = 1) these
		// are the last min(start+1, W) slots.
		W := g.window
		coreml.Mask(T, W, func(t int) (int, int) {
			first := max(0, W-T-start) // position 0's slot, when in the buffer
			return first, max(0, W-T+t-first+1)
		}, x.fill)
	}
	if x := f.host["causal_mask"]; x != nil {
		// A prefill from position 0: row t sees rows 0..t.
		coreml.Mask(T, T, func(t int) (int, int) { return 0, t + 1 }, x.fill)
	}
	if x := f.host["last_position_mask"]; x != nil {
		clear(x.f16)
		x.f16[n-1] = one
	}
	if x := f.host["update_mask"]; x != nil {
		clear(x.f16)
		x.f16[min(start, g.context-1)] = one
	}
	if x := f.host["update_indicator"]; x != nil {
		clear(x.f16)
		for t := range T {
			if p := start + t; p < g.context {
				x.f16[p*T+t] = one
			}
		}
	}
	for j, tens := range f.cache {
		if tens != nil {
			be.syncCache(tens, &f.sync[j], j, start, cache)
		}
	}
	for j := range be.p.Decode {
		if err := be.run.Run(ctx, j, f.infos[j], f.ins[j], f.outs[j]); err != nil {
			return nil, fmt.Errorf("coreml: %s (%s): %w", be.chunkNames[j], f.name, err)
		}
	}
	be.writeBack(f, start, n, cache)
	outs := f.out[len(f.out)-1]
	am := outs["token_id"]
	if f.name == FuncVerify {
		am = outs["token_ids"]
	}
	rows := n
	if f.name == FuncPrefill {
		rows = 1 // the last real row's id (last_position_mask)
	}
	ids := make([]int32, rows)
	for t := range rows {
		id := am.i32[t]
		if id < 0 || int(id) >= be.cfg.VocabSize {
			id = -1 // reported by the decode loops as model.ErrDamaged
		}
		ids[t] = id
	}
	return ids, nil
}

// writeBack writes the call's n real new K/V rows into the cache's pending
// rows at start..: after a decode, row W-1 of the shifted sliding outputs
// and row start of the full ones; after a verify, rows t < n of new_*.
func (be *Model) writeBack(f *function, start, n int, cache *kv.Cache) {
	g := &be.geo
	if f.name == FuncPrefill {
		// Each owned layer's K/V rows (1, heads, N, hd) from position 0.
		for j, rows := range be.prefillRows {
			for _, r := range rows {
				kt, vt := f.out[j][r.k], f.out[j][r.v]
				for t := range n {
					k, v := cache.K(r.layer, start+t), cache.V(r.layer, start+t)
					for h := range g.kvHeads {
						kt.getRow(k[h*r.hd:(h+1)*r.hd], (h*f.width+t)*r.hd)
						vt.getRow(v[h*r.hd:(h+1)*r.hd], (h*f.width+t)*r.hd)
					}
				}
			}
		}
		return
	}
	// get reads row r of slot s, head h of src (slots, heads, rows, width)
	// into dst's head h.
	get := func(src *buffer, rows, s, r int, dst []float32, hd int) {
		sh := src.buf.Shape()
		width := sh[len(sh)-1]
		for h := range g.kvHeads {
			src.getRow(dst[h*hd:(h+1)*hd], ((s*g.kvHeads+h)*rows+r)*width)
		}
	}
	for j, sl := range be.kvLayer {
		out := f.out[j]
		for kind, layers := range sl {
			hd := g.headSliding
			if kind == 1 {
				hd = g.headFull
			}
			for s, layer := range layers {
				for t := range n {
					p := start + t
					k, v := cache.K(layer, p), cache.V(layer, p)
					switch {
					case f.name == FuncVerify && kind == 0:
						get(out["new_K_sliding"], f.width, s, t, k, hd)
						get(out["new_V_sliding"], f.width, s, t, v, hd)
					case f.name == FuncVerify:
						get(out["new_K_full"], f.width, s, t, k, hd)
						get(out["new_V_full"], f.width, s, t, v, hd)
					case kind == 0:
						get(out["K_sliding_out"], g.window, s, g.window-1, k, hd)
						get(out["V_sliding_out"], g.window, s, g.window-1, v, hd)
					default:
						get(out["K_full_out"], g.context, s, p, k, hd)
						get(out["V_full_out"], g.context, s, p, v, hd)
					}
				}
			}
		}
	}
}
