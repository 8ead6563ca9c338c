package coreml

import (
	"fmt"
	"math"
	"slices"

	"anechat/engine/arch"
	"anechat/engine/arch/gemma4"
	"anechat/engine/arch/llama"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
	"anechat/engine/model"
)

// plan is what the host needs of the architecture, taken from the
// backend-neutral descriptions (engine/arch) rather than from the
// manifest's numbers: the manifest is checked against them, so a bundle
// whose RoPE, scales or KV sharing disagree with what the architecture
// says is refused instead of computing something else.
type plan struct {
	cfg model.Config
	// ropes maps a manifest rope name to the architecture's spec for the
	// layers that use it.
	ropes map[string]rope.Spec
	// headDims maps a rope name to the head width its table rows cover.
	headDims map[string]int
	// embedScale and pleScale are the factors the sidecars' rows carry.
	embedScale, pleScale float32
	// Gemma4 or Llama is the architecture (one of them is set).
	Gemma4 *gemma4.Config
	Llama  *llama.Config
}

// planFor builds the plan of m and checks the manifest against it.
func planFor(m *Manifest) (*plan, error) {
	a := &m.Arch
	eos := make([]int32, len(a.EOS))
	for i, e := range a.EOS {
		eos[i] = int32(e)
	}
	p := &plan{ropes: map[string]rope.Spec{}, headDims: map[string]int{}}
	var geo kv.Geometry
	var err error
	switch m.Architecture {
	case "gemma4":
		o := gemma4.Config{Vocab: a.Vocab, Hidden: a.Hidden, Heads: a.Heads, Eps: float32(a.Eps), Window: a.Window,
			Softcap: float32(a.Softcap), PLEDim: a.PLEDim, PLEVocab: a.PLEVocab, Context: m.Geometry.Context,
			Tied: a.Tied, BOS: int32(a.BOS), EOS: eos}
		for _, l := range a.Layers {
			r := a.Ropes[l.Rope]
			o.Layers = append(o.Layers, gemma4.Layer{Sliding: l.Kind == "sliding", HeadDim: l.HeadDim, KVHeads: l.KVHeads,
				Source: l.Source, FFN: l.FFN, RopeTheta: r.Theta, RopePairs: r.Pairs})
		}
		p.Gemma4 = &o
		if geo, err = o.Geometry(); err != nil {
			return nil, err
		}
		for i, l := range a.Layers {
			if err := p.addRope(l.Rope, a.Ropes[l.Rope], o.Layers[i].Rope(), i); err != nil {
				return nil, err
			}
		}
		if err := sameScale("arch.attn_scale", a.AttnScale, o.AttentionScale()); err != nil {
			return nil, err
		}
		p.embedScale = o.EmbedScale()
		if o.PLEDim > 0 {
			p.pleScale = o.PLEScales().Emb
		}
	case "llama":
		l0 := a.Layers[0]
		r := a.Ropes[l0.Rope]
		o := llama.Config{Decoder: arch.Decoder{Arch: llama.Name, Hidden: a.Hidden, FFN: l0.FFN, Layers: len(a.Layers),
			Heads: a.Heads, KVHeads: l0.KVHeads, HeadDim: l0.HeadDim, RopeDim: r.FreqDim, RopeBase: r.Theta,
			Eps: float32(a.Eps), Vocab: a.Vocab, Context: m.Geometry.Context, Tied: a.Tied, BOS: int32(a.BOS), EOS: eos}}
		p.Llama = &o
		if a.Heads*l0.HeadDim != a.Hidden {
			return nil, fmt.Errorf("llama: %d heads of %d do not make the hidden size %d", a.Heads, l0.HeadDim, a.Hidden)
		}
		if a.Window != 0 || a.PLEDim != 0 || a.Softcap != 0 {
			return nil, fmt.Errorf("llama: window %d, ple_dim %d, softcap %g must be 0", a.Window, a.PLEDim, a.Softcap)
		}
		for i, l := range a.Layers {
			if l.Kind != "full" || l.Source != i || l.HeadDim != l0.HeadDim || l.KVHeads != l0.KVHeads || l.FFN != l0.FFN {
				return nil, fmt.Errorf("llama: arch.layers[%d] differs from layer 0 (every llama layer is alike and owns its K/V)", i)
			}
			if err := p.addRope(l.Rope, a.Ropes[l.Rope], o.Rope(), i); err != nil {
				return nil, err
			}
		}
		geo = o.Geometry()
		if err := geo.Validate(); err != nil {
			return nil, err
		}
		if err := sameScale("arch.attn_scale", a.AttnScale, o.AttentionScale()); err != nil {
			return nil, err
		}
		p.embedScale = 1
	default:
		return nil, fmt.Errorf("architecture %q is not supported", m.Architecture)
	}
	if err := sameScale("arch.embed_scale", a.EmbedScale, p.embedScale); err != nil {
		return nil, err
	}
	if err := sameScale("sidecars.embed.value_scale", m.Sidecars["embed"].ValueScale, p.embedScale); err != nil {
		return nil, err
	}
	if s, ok := m.Sidecars["per_layer"]; ok {
		if err := sameScale("sidecars.per_layer.value_scale", s.ValueScale, p.pleScale); err != nil {
			return nil, err
		}
	}
	p.cfg = model.Config{Arch: m.Architecture, VocabSize: a.Vocab, Hidden: a.Hidden, ContextLen: m.Geometry.Context,
		KV: geo, BOS: int32(a.BOS), EOS: eos}
	return p, nil
}

// addRope records the architecture's spec for the manifest's rope name
// after checking that the manifest describes the same rotation.
func (p *plan) addRope(name string, r RopeInfo, s rope.Spec, layer int) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("arch.layers[%d]: %w", layer, err)
	}
	layout := map[rope.Layout]string{rope.Halves: "halves", rope.Interleaved: "interleaved"}[s.Layout]
	angle := map[rope.Precision]string{rope.Float32: "f32", rope.Float64: "f64"}[s.Precision]
	// The manifest's table covers the whole head; the architecture's spec
	// rotates its first Dim elements, Pairs of the Dim/2 pairs turning.
	pairs := s.Pairs
	if r.Layout != layout || r.Angle != angle || r.Pairs != pairs || r.FreqDim != s.FreqDim || float32(r.Theta) != float32(s.Theta) ||
		s.Dim > r.HeadDim || (s.Layout == rope.Halves && s.Dim != r.HeadDim) {
		return fmt.Errorf("arch.ropes[%q] (layout %s, angle %s, pairs %d, freq_dim %d, theta %g, head_dim %d) is not the rotation the %s architecture gives layer %d (layout %s, angle %s, pairs %d, freq_dim %d, theta %g, dim %d)",
			name, r.Layout, r.Angle, r.Pairs, r.FreqDim, r.Theta, r.HeadDim, p.archName(), layer, layout, angle, pairs, s.FreqDim, s.Theta, s.Dim)
	}
	if old, ok := p.ropes[name]; ok && old != s {
		return fmt.Errorf("arch.ropes[%q] serves layers with different rotations", name)
	}
	p.ropes[name] = s
	p.headDims[name] = r.HeadDim
	return nil
}

func (p *plan) archName() string {
	if p.Llama != nil {
		return "llama"
	}
	return "gemma4"
}

// sameScale checks a scale the manifest records against the
// architecture's (both as float32, the precision they are applied in).
func sameScale(field string, got float64, want float32) error {
	if float32(got) != want || math.IsNaN(got) {
		return fmt.Errorf("%s = %g, the architecture says %g", field, got, want)
	}
	return nil
}

// ropeNames returns the rope names in order.
func (p *plan) ropeNames() []string {
	var names []string
	for n := range p.ropes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
