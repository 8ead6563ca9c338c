package published

import (
	"fmt"
	"path/filepath"
	"slices"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
)

// geometry is what the loaded functions declare, checked against
// model_config.json.
type geometry struct {
	hidden, perLayer, window, context int
	kvHeads, slotWidth                int // the cache tensors' head count and row width (512)
	headSliding, headFull             int // the RoPE widths: the rows of sliding and full layers
	verifyWidth                       int // 0 without a verify function
	prefillWidth                      int // 0 without usable prefill chunks
}

// prefillRow is where a prefill chunk's K/V output goes: the kv.Cache
// layer of the decode slot of that model layer.
type prefillRow struct {
	k, v      string
	layer, hd int
}

// cacheSlot is one layer of the host kv.Cache: slot s of the sliding or full
// cache tensors of chunk j.
type cacheSlot struct {
	chunk, slot int
	full        bool
}

// feature finds name among fs.
func feature(fs []mlcore.FeatureSpec, name string) (mlcore.FeatureSpec, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return mlcore.FeatureSpec{}, false
}

// deriveGeometry reads the geometry from the decode and verify functions'
// features and checks it against model_config.json: the hidden size, the
// per-layer width, the window, the context, the cache tensors of every
// chunk that owns KV, the RoPE widths and the last chunk's argmax.
func (be *Model) deriveGeometry() error {
	c := be.p.Config
	g := &be.geo
	g.hidden, g.perLayer = c.HiddenSize, c.NumLayers*c.PerLayerDim
	last := len(be.p.Decode) - 1
	bad := func(j int, fn, format string, args ...any) error {
		return fmt.Errorf("%w: %s: function %s: %s", coreml.ErrBundle, be.chunkNames[j], fn, fmt.Sprintf(format, args...))
	}
	ins, _, _ := be.run.Features(0, FuncDecode)
	for _, name := range []string{"causal_mask_full", "causal_mask_sliding", "cos_s", "cos_f"} {
		f, ok := feature(ins, name)
		if !ok || !f.MultiArray || len(f.Shape) != 4 {
			return bad(0, FuncDecode, "input %q is missing or not a 4-dimensional array (the 4-chunk layout of PUBLISHED.md)", name)
		}
		v := f.Shape[3]
		switch name {
		case "causal_mask_full":
			g.context = v
		case "causal_mask_sliding":
			g.window = v
		case "cos_s":
			g.headSliding = v
		case "cos_f":
			g.headFull = v
		}
	}
	if g.context != c.ContextLength {
		return bad(0, FuncDecode, "causal_mask_full is %d wide, model_config.json says context_length %d", g.context, c.ContextLength)
	}
	if c.SlidingWindow != 0 && g.window != c.SlidingWindow {
		return bad(0, FuncDecode, "causal_mask_sliding is %d wide, model_config.json says sliding_window %d", g.window, c.SlidingWindow)
	}
	if g.window < 1 || g.headSliding < 1 || g.headFull < 1 {
		return bad(0, FuncDecode, "window %d, RoPE widths %d and %d must be positive", g.window, g.headSliding, g.headFull)
	}
	for j := range be.p.Decode {
		ins, outs, _ := be.run.Features(j, FuncDecode)
		ks, hasKV := feature(ins, "K_sliding_in")
		if j == last {
			id, ok := feature(outs, "token_id")
			if !ok || !id.MultiArray || id.DType != mlcore.Int32 || product(id.Shape) != 1 {
				return bad(j, FuncDecode, "the last chunk has no int32 output \"token_id\" of one element (the in-graph argmax)")
			}
		}
		if !hasKV {
			continue
		}
		kf, ok := feature(ins, "K_full_in")
		if !ok || len(ks.Shape) != 4 || len(kf.Shape) != 4 {
			return bad(j, FuncDecode, "K_sliding_in and K_full_in must both be 4-dimensional (slots, kv heads, rows, 512)")
		}
		if g.kvHeads == 0 {
			g.kvHeads, g.slotWidth = ks.Shape[1], ks.Shape[3]
		}
		if ks.Shape[1] != g.kvHeads || kf.Shape[1] != g.kvHeads || ks.Shape[3] != g.slotWidth || kf.Shape[3] != g.slotWidth {
			return bad(j, FuncDecode, "cache tensors %v and %v disagree on kv heads and row width with the other chunks (%d, %d)", ks.Shape, kf.Shape, g.kvHeads, g.slotWidth)
		}
		if ks.Shape[2] != g.window || kf.Shape[2] != g.context {
			return bad(j, FuncDecode, "K_sliding_in %v and K_full_in %v: want %d rows (sliding_window) and %d (context_length)", ks.Shape, kf.Shape, g.window, g.context)
		}
		if g.headSliding > g.slotWidth || g.headFull > g.slotWidth {
			return bad(j, FuncDecode, "RoPE widths %d and %d exceed the cache rows' %d", g.headSliding, g.headFull, g.slotWidth)
		}
		sl := [2][]int{}
		for s := range ks.Shape[0] {
			sl[0] = append(sl[0], len(be.slots))
			be.slots = append(be.slots, cacheSlot{chunk: j, slot: s})
		}
		for s := range kf.Shape[0] {
			sl[1] = append(sl[1], len(be.slots))
			be.slots = append(be.slots, cacheSlot{chunk: j, slot: s, full: true})
		}
		be.kvLayer[j] = sl
	}
	if len(be.slots) == 0 {
		return fmt.Errorf("%w: %s: no chunk takes K_sliding_in (the host-side KV of PUBLISHED.md); stateful bundles that keep KV inside the model are not supported", coreml.ErrBundle, be.p.Dir)
	}
	// Verify: every chunk must have it for speculation; its width is
	// hidden_states' second dimension.
	for j := range be.p.Decode {
		ins, outs, ok := be.run.Features(j, FuncVerify)
		if !ok {
			g.verifyWidth = 0
			return nil
		}
		h, ok := feature(ins, "hidden_states")
		if !ok || len(h.Shape) != 3 || h.Shape[1] < 2 {
			return bad(j, FuncVerify, "hidden_states must be (1, K, hidden) with K >= 2")
		}
		if j == 0 {
			g.verifyWidth = h.Shape[1]
		} else if h.Shape[1] != g.verifyWidth {
			return bad(j, FuncVerify, "width %d, chunk 1's is %d", h.Shape[1], g.verifyWidth)
		}
		if j == last {
			id, ok := feature(outs, "token_ids")
			if !ok || id.DType != mlcore.Int32 || product(id.Shape) != g.verifyWidth {
				return bad(j, FuncVerify, "the last chunk has no int32 output \"token_ids\" of %d elements", g.verifyWidth)
			}
		}
	}
	return nil
}

func product(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// hostShape is the shape the host builds input name in at width T, or nil
// for a name it does not build.
func (g *geometry) hostShape(name string, T int) []int {
	switch name {
	case "hidden_states":
		return []int{1, T, g.hidden}
	case "per_layer_raw":
		return []int{1, T, g.perLayer}
	case "causal_mask_full":
		return []int{1, 1, T, g.context}
	case "causal_mask_sliding":
		return []int{1, 1, T, g.window}
	case "update_mask":
		return []int{1, 1, g.context, 1}
	case "update_indicator":
		return []int{1, 1, g.context, T}
	case "cos_s", "sin_s":
		return []int{1, 1, T, g.headSliding}
	case "cos_f", "sin_f":
		return []int{1, 1, T, g.headFull}
	case "causal_mask":
		return []int{1, 1, T, T}
	case "last_position_mask":
		return []int{1, T, 1}
	}
	return nil
}

// file is the chunk file function fn of chunk j is in.
func (be *Model) file(j int, fn string) string {
	if fn == FuncPrefill {
		return filepath.Join(be.p.Dir, be.p.Prefill[j])
	}
	return be.chunkNames[j]
}

// derivePrefill works out where each prefill chunk's K/V outputs go and
// checks them against the features, returning why the prefill chunks
// cannot be used ("" when they can). Prefill chunk j returns a K{i}/V{i}
// pair per layer it owns in layer order, numbered without the KV
// producers (the last sliding and full layers before the KV-shared ones),
// which return kv13_* and kv14_* instead; a layer's decode slot is its
// rank among the chunk's sliding (or full) layers (PUBLISHED.md; the
// project's gemma4_prefill_chunks.py and ChunkedEngine.buildKVSlotMap).
func (be *Model) derivePrefill() string {
	c, g := be.p.Config, &be.geo
	if len(be.p.Prefill) == 0 {
		return "the bundle has no prefill chunks: the prompt runs token by token"
	}
	ins, _, ok := be.run.Features(0, FuncPrefill)
	if !ok {
		if cr, isCR := be.run.(*coreml.CoreMLExecutor); isCR && cr.NoPrefill != "" {
			return cr.NoPrefill
		}
		return "no prefill function loaded: the prompt runs token by token"
	}
	name0 := be.file(0, FuncPrefill)
	h, ok := feature(ins, "hidden_states")
	if !ok || len(h.Shape) != 3 || h.Shape[1] < 2 {
		return name0 + ": hidden_states is not (1, N, hidden): the prompt runs token by token"
	}
	N := h.Shape[1]
	if len(c.LayerTypes) != c.NumLayers || c.NumKVShared < 0 || c.NumKVShared >= c.NumLayers {
		return fmt.Sprintf("model_config.json has %d layer_types for %d layers (num_kv_shared_layers %d): which layer a prefill chunk's K/V rows are is unknown, so the prompt runs token by token", len(c.LayerTypes), c.NumLayers, c.NumKVShared)
	}
	owned := c.NumLayers - c.NumKVShared
	producer := map[string]int{"sliding_attention": -1, "full_attention": -1}
	for i := range owned {
		if _, ok := producer[c.LayerTypes[i]]; !ok {
			return fmt.Sprintf("model_config.json: layer_types[%d] is %q: the prompt runs token by token", i, c.LayerTypes[i])
		}
		producer[c.LayerTypes[i]] = i
	}
	layer := 0
	for j := range be.p.Decode {
		sl, ok := be.kvLayer[j]
		if !ok {
			continue
		}
		var rows []prefillRow
		ns, nf, local := 0, 0, 0
		for ns < len(sl[0]) || nf < len(sl[1]) {
			if layer >= owned {
				return "the decode chunks' cache slots outnumber the layers that own KV in layer_types: the prompt runs token by token"
			}
			k, v := fmt.Sprint("K", local), fmt.Sprint("V", local)
			switch layer {
			case producer["sliding_attention"]:
				k, v = "kv13_k", "kv13_v"
			case producer["full_attention"]:
				k, v = "kv14_k", "kv14_v"
			default:
				local++
			}
			if c.LayerTypes[layer] == "full_attention" {
				if nf == len(sl[1]) {
					return fmt.Sprintf("layer %d (full) falls in %s, which has %d full slots: the prompt runs token by token", layer, be.chunkNames[j], len(sl[1]))
				}
				rows = append(rows, prefillRow{k: k, v: v, layer: sl[1][nf], hd: g.headFull})
				nf++
			} else {
				if ns == len(sl[0]) {
					return fmt.Sprintf("layer %d (sliding) falls in %s, which has %d sliding slots: the prompt runs token by token", layer, be.chunkNames[j], len(sl[0]))
				}
				rows = append(rows, prefillRow{k: k, v: v, layer: sl[0][ns], hd: g.headSliding})
				ns++
			}
			layer++
		}
		be.prefillRows[j] = rows
	}
	for j := range be.p.Decode {
		_, outs, ok := be.run.Features(j, FuncPrefill)
		if !ok {
			return be.file(j, FuncPrefill) + ": no prefill function loaded: the prompt runs token by token"
		}
		for _, r := range be.prefillRows[j] {
			for _, n := range []string{r.k, r.v} {
				want := []int{1, g.kvHeads, N, r.hd}
				if f, ok := feature(outs, n); !ok || f.DType != mlcore.Float16 || !slices.Equal(f.Shape, want) {
					return fmt.Sprintf("%s: output %q is not fp16 %v (the rows of the layer layer_types places there): the prompt runs token by token", be.file(j, FuncPrefill), n, want)
				}
			}
		}
		if j == len(be.p.Decode)-1 {
			if id, ok := feature(outs, "token_id"); !ok || id.DType != mlcore.Int32 || product(id.Shape) != 1 {
				return be.file(j, FuncPrefill) + ": no int32 output \"token_id\" of one element: the prompt runs token by token"
			}
		}
	}
	g.prefillWidth = N
	return ""
}
