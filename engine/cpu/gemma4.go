package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/safetensors"
)

// gemma4Layer holds the weights of one decoder layer. KV-shared layers have
// no wk, wv or kNorm: they read the K/V rows of their Source layer.
type gemma4Layer struct {
	inNorm, postAttnNorm, preFFNorm, postFFNorm []float32
	wq, wk, wv, wo                              *Matrix
	qNorm, kNorm                                []float32
	gate, up, down                              *Matrix
	pleGate, pleProj                            *Matrix // hidden -> PLEDim, PLEDim -> hidden
	plePostNorm                                 []float32
	scalar                                      float32
}

// Gemma4 is the gemma4 text architecture (Gemma 4 E2B and its relatives) on
// the CPU: sliding and full attention layers with their own head dims,
// per-head Q/K norms and a weightless V norm, attention scale 1, KV sharing,
// per-layer embeddings, GELU-tanh MLPs, proportional partial RoPE on full
// layers, a final logit softcap and tied embeddings scaled by sqrt(hidden).
// It is a model.Backend; it is safe for one Forward at a time.
type Gemma4 struct {
	opt    Gemma4Options
	cfg    model.Config
	pool   *Pool
	dir    *safetensors.Dir // nil when the weights are not ours to close
	embed  *Matrix          // vocab x hidden
	out    *Matrix          // vocab x hidden (the embedding when tied)
	norm   []float32
	pleEmb *Matrix // PLEVocab x layers*PLEDim
	pleIn  *Matrix // layers*PLEDim x hidden
	pleNrm []float32
	layers []gemma4Layer
}

// LoadGemma4 opens the Hugging Face model directory dir (config.json,
// *.safetensors; F32, F16 or BF16 weights) and binds a gemma4 text model to
// it. The weights stay memory-mapped until Close. pool may be nil (one
// worker per CPU).
func LoadGemma4(dir string, pool *Pool) (*Gemma4, error) {
	d, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %w", err)
	}
	m, err := bindGemma4(d, pool)
	if err != nil {
		d.Close()
		return nil, err
	}
	m.dir = d
	more, err := generationEOS(dir)
	if err != nil {
		d.Close()
		return nil, err
	}
	for _, id := range more {
		if id >= 0 && int(id) < m.opt.Vocab && !m.cfg.IsEOS(id) {
			m.cfg.EOS = append(m.cfg.EOS, id)
		}
	}
	m.opt.EOS = slices.Clone(m.cfg.EOS)
	return m, nil
}

// Close releases the weights' mappings.
func (m *Gemma4) Close() error {
	if m.dir == nil {
		return nil
	}
	err := m.dir.Close()
	m.dir = nil
	return err
}

// SetFingerprint sets the model's identity in Config: engine/load computes
// it (load.Fingerprint), so every backend reports the same one.
func (m *Gemma4) SetFingerprint(fp string) { m.cfg.Fingerprint = fp }

// Options returns the model's hyper-parameters.
func (m *Gemma4) Options() Gemma4Options { return m.opt }

// Config implements model.Backend.
func (m *Gemma4) Config() model.Config { return m.cfg }

// Widths implements model.Backend: the CPU runs any width.
func (m *Gemma4) Widths() []int { return nil }

// gemma4Weights binds tensors of a safetensors directory by name, checking
// shapes; every error names the directory and the tensor.
type gemma4Weights struct {
	d      *safetensors.Dir
	prefix string
}

func (w gemma4Weights) info(name string) (safetensors.TensorInfo, error) {
	t, ok := w.d.Tensor(w.prefix + name)
	if !ok {
		return t, fmt.Errorf("cpu: gemma4: %s: missing tensor %q", w.d.Path(), w.prefix+name)
	}
	return t, nil
}

func (w gemma4Weights) matrix(name string, rows, cols int) (*Matrix, error) {
	t, err := w.info(name)
	if err != nil {
		return nil, err
	}
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		return nil, fmt.Errorf("cpu: gemma4: %s: tensor %q has shape %v, want [%d %d]", t.File, t.Name, t.Shape, rows, cols)
	}
	var typ gguf.Type
	switch t.DType {
	case safetensors.F32:
		typ = gguf.F32
	case safetensors.F16:
		typ = gguf.F16
	case safetensors.BF16:
		typ = gguf.BF16
	default:
		return nil, fmt.Errorf("cpu: gemma4: %s: tensor %q has dtype %s (want F32, F16 or BF16)", t.File, t.Name, t.DType)
	}
	data, err := w.d.TensorData(t.Name)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %w", err)
	}
	mat, err := NewMatrix(t.Name, typ, rows, cols, data)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %s: %w", t.File, err)
	}
	return mat, nil
}

func (w gemma4Weights) vector(name string, n int) ([]float32, error) {
	t, err := w.info(name)
	if err != nil {
		return nil, err
	}
	if len(t.Shape) != 1 || t.Shape[0] != n {
		return nil, fmt.Errorf("cpu: gemma4: %s: tensor %q has shape %v, want [%d]", t.File, t.Name, t.Shape, n)
	}
	v, _, err := w.d.Float32s(t.Name)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %w", err)
	}
	return v, nil
}

// bindGemma4 reads the config and binds every weight of d.
func bindGemma4(d *safetensors.Dir, pool *Pool) (*Gemma4, error) {
	o, err := ParseGemma4Config(d.Path()+"/config.json", d.Config())
	if err != nil {
		return nil, err
	}
	// Text-only checkpoints (Gemma4ForCausalLM) name tensors "model.…";
	// multimodal ones (Gemma4ForConditionalGeneration) "model.language_model.…".
	w := gemma4Weights{d: d, prefix: "model."}
	if _, ok := d.Tensor("model.language_model.embed_tokens.weight"); ok {
		w.prefix = "model.language_model."
	}
	m := &Gemma4{opt: o, pool: pool}
	if m.pool == nil {
		m.pool = NewPool(0)
	}
	H, L := o.Hidden, len(o.Layers)
	if m.embed, err = w.matrix("embed_tokens.weight", o.Vocab, H); err != nil {
		return nil, err
	}
	m.out = m.embed
	if !o.Tied {
		if m.out, err = (gemma4Weights{d: d}).matrix("lm_head.weight", o.Vocab, H); err != nil {
			return nil, err
		}
	}
	if m.norm, err = w.vector("norm.weight", H); err != nil {
		return nil, err
	}
	if o.PLEDim > 0 {
		if m.pleEmb, err = w.matrix("embed_tokens_per_layer.weight", o.PLEVocab, L*o.PLEDim); err != nil {
			return nil, err
		}
		if m.pleIn, err = w.matrix("per_layer_model_projection.weight", L*o.PLEDim, H); err != nil {
			return nil, err
		}
		if m.pleNrm, err = w.vector("per_layer_projection_norm.weight", o.PLEDim); err != nil {
			return nil, err
		}
	}
	m.layers = make([]gemma4Layer, L)
	for i, lo := range o.Layers {
		l := &m.layers[i]
		p := fmt.Sprintf("layers.%d.", i)
		qd, kvd := o.Heads*lo.HeadDim, lo.KVHeads*lo.HeadDim
		for _, v := range []struct {
			dst  *[]float32
			name string
			n    int
		}{
			{&l.inNorm, "input_layernorm.weight", H}, {&l.postAttnNorm, "post_attention_layernorm.weight", H},
			{&l.preFFNorm, "pre_feedforward_layernorm.weight", H}, {&l.postFFNorm, "post_feedforward_layernorm.weight", H},
			{&l.qNorm, "self_attn.q_norm.weight", lo.HeadDim},
		} {
			if *v.dst, err = w.vector(p+v.name, v.n); err != nil {
				return nil, err
			}
		}
		mats := []struct {
			dst        **Matrix
			name       string
			rows, cols int
		}{
			{&l.wq, "self_attn.q_proj.weight", qd, H}, {&l.wo, "self_attn.o_proj.weight", H, qd},
			{&l.gate, "mlp.gate_proj.weight", lo.FFN, H}, {&l.up, "mlp.up_proj.weight", lo.FFN, H},
			{&l.down, "mlp.down_proj.weight", H, lo.FFN},
		}
		if lo.Source == i {
			mats = append(mats, []struct {
				dst        **Matrix
				name       string
				rows, cols int
			}{{&l.wk, "self_attn.k_proj.weight", kvd, H}, {&l.wv, "self_attn.v_proj.weight", kvd, H}}...)
			if l.kNorm, err = w.vector(p+"self_attn.k_norm.weight", lo.HeadDim); err != nil {
				return nil, err
			}
		}
		if o.PLEDim > 0 {
			mats = append(mats, []struct {
				dst        **Matrix
				name       string
				rows, cols int
			}{{&l.pleGate, "per_layer_input_gate.weight", o.PLEDim, H}, {&l.pleProj, "per_layer_projection.weight", H, o.PLEDim}}...)
			if l.plePostNorm, err = w.vector(p+"post_per_layer_input_norm.weight", H); err != nil {
				return nil, err
			}
		}
		for _, x := range mats {
			if *x.dst, err = w.matrix(p+x.name, x.rows, x.cols); err != nil {
				return nil, err
			}
		}
		// The per-layer scalar is a buffer the library initialises to 1 when
		// a checkpoint lacks it.
		l.scalar = 1
		if _, ok := d.Tensor(w.prefix + p + "layer_scalar"); ok {
			s, err := w.vector(p+"layer_scalar", 1)
			if err != nil {
				return nil, err
			}
			l.scalar = s[0]
		}
	}
	geo, err := o.Geometry()
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %s: %w", d.Path(), err)
	}
	m.cfg = model.Config{Arch: "gemma4", VocabSize: o.Vocab, Hidden: H, ContextLen: o.Context, KV: geo,
		BOS: o.BOS, EOS: slices.Clone(o.EOS)}
	return m, nil
}

// Geometry is the KV cache layout of the model: per layer its KV heads and
// head dim, the window on sliding layers, and the layer whose rows a
// KV-shared layer reads.
func (o Gemma4Options) Geometry() (kv.Geometry, error) {
	geo := kv.Geometry{Context: o.Context, Layers: make([]kv.LayerSpec, len(o.Layers))}
	for i, lo := range o.Layers {
		geo.Layers[i] = kv.LayerSpec{KVHeads: lo.KVHeads, HeadDim: lo.HeadDim, Source: lo.Source}
		if lo.Sliding {
			geo.Layers[i].Window = o.Window
		}
	}
	return geo, geo.Validate()
}

// gemma4Rope holds cos and sin of one token position for one kind of layer:
// pair i (elements i and i+HeadDim/2) turns by pos·inv_freq[i], inv_freq
// being zero (no rotation) beyond RopePairs.
type gemma4Rope struct{ cos, sin []float32 }

// newGemma4Rope computes the table the way the reference does, in float32:
// inv_freq[i] = 1/theta^(2i/headDim) (the exponent divides by the whole head
// dim, also for proportional partial RoPE), angle = float32(pos)·inv_freq.
func newGemma4Rope(l Gemma4Layer, pos int) gemma4Rope {
	half := l.HeadDim / 2
	r := gemma4Rope{cos: make([]float32, half), sin: make([]float32, half)}
	for i := range half {
		if i >= l.RopePairs {
			r.cos[i], r.sin[i] = 1, 0
			continue
		}
		e := float32(2*i) / float32(l.HeadDim)
		inv := 1 / float32(math.Pow(float64(float32(l.RopeTheta)), float64(e)))
		a := float32(pos) * inv
		r.cos[i] = float32(math.Cos(float64(a)))
		r.sin[i] = float32(math.Sin(float64(a)))
	}
	return r
}

// apply rotates one head in place (split-halves layout, as rotate_half).
func (r gemma4Rope) apply(x []float32) {
	half := len(r.cos)
	x = x[: 2*half : 2*half]
	for i := range half {
		a, b := x[i], x[i+half]
		c, s := r.cos[i], r.sin[i]
		x[i] = a*c - b*s
		x[i+half] = b*c + a*s
	}
}

// gemma4Ropes returns the RoPE tables of n tokens from position start: one
// per token for each distinct rope shape (head dim, rotated pairs, base) of
// layers, token-major, and for each layer the index of its shape. Gemma 4
// has two shapes, the sliding and the full layers', but a per_layer_config
// may give layers of one kind different head dims.
func gemma4Ropes(layers []Gemma4Layer, start, n int) (ropes []gemma4Rope, ropeOf []int) {
	ropeOf = make([]int, len(layers))
	var shapes []Gemma4Layer
	for li, lo := range layers {
		j := slices.IndexFunc(shapes, func(s Gemma4Layer) bool {
			return s.HeadDim == lo.HeadDim && s.RopePairs == lo.RopePairs && s.RopeTheta == lo.RopeTheta
		})
		if j < 0 {
			j = len(shapes)
			shapes = append(shapes, lo)
		}
		ropeOf[li] = j
	}
	ropes = make([]gemma4Rope, n*len(shapes))
	for t := range n {
		for j, sh := range shapes {
			ropes[t*len(shapes)+j] = newGemma4Rope(sh, start+t)
		}
	}
	return ropes, ropeOf
}

// ErrGemma4Input is wrapped by Forward's errors for tokens outside the
// vocabulary or a cache of another geometry.
var ErrGemma4Input = errors.New("cpu: gemma4: bad input")

// Forward implements model.Backend. Every per-token step (embedding, norms,
// RoPE, attention, activations) reads only that token's row, and the matrix
// kernels compute each row in a fixed order, so the logits of a token do not
// depend on how many tokens share the call.
func (m *Gemma4) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (model.Result, error) {
	o := m.opt
	n := len(tokens)
	if n == 0 {
		return model.Result{}, fmt.Errorf("%w: forward of no tokens", ErrGemma4Input)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= o.Vocab || (m.pleEmb != nil && int(id) >= o.PLEVocab) {
			return model.Result{}, fmt.Errorf("%w: token id %d outside the vocabulary 0..%d", ErrGemma4Input, id, o.Vocab-1)
		}
	}
	if g := cache.Geometry(); !slices.Equal(g.Layers, m.cfg.KV.Layers) || g.Context > m.cfg.KV.Context {
		return model.Result{}, fmt.Errorf("%w: the cache's geometry is not this model's", ErrGemma4Input)
	}
	if err := cache.Reserve(start, n); err != nil {
		return model.Result{}, err
	}
	H, L, P := o.Hidden, len(o.Layers), o.PLEDim
	x := make([]float32, n*H)
	xb := make([]float32, n*H)

	// Embeddings, scaled by sqrt(hidden) (rounded to float32 as the
	// reference's buffer).
	scale := float32(math.Sqrt(float64(H)))
	for t, id := range tokens {
		row := m.embed.Row(x[t*H:(t+1)*H], int(id))
		for i := range row {
			row[i] *= scale
		}
	}
	// Per-layer inputs: (RMSNorm(W·x / sqrt(hidden)) + E_ple[id]·sqrt(P)) / sqrt(2),
	// one P-wide slice per layer.
	var ple []float32
	if P > 0 {
		ple = make([]float32, n*L*P)
		m.pleIn.MatMul(m.pool, ple, x)
		tok := make([]float32, L*P)
		projScale := float32(1 / math.Sqrt(float64(H)))
		embScale := float32(math.Sqrt(float64(P)))
		mix := float32(1 / math.Sqrt2)
		for t, id := range tokens {
			m.pleEmb.Row(tok, int(id))
			row := ple[t*L*P : (t+1)*L*P]
			for i := range row {
				row[i] *= projScale
			}
			for li := range L {
				RMSNorm(row[li*P:(li+1)*P], row[li*P:(li+1)*P], m.pleNrm, o.Eps)
			}
			for i := range row {
				row[i] = (row[i] + tok[i]*embScale) * mix
			}
		}
	}
	ropes, ropeOf := gemma4Ropes(o.Layers, start, n)
	shapes := len(ropes) / n

	maxQ, maxFFN := 0, 0
	for _, lo := range o.Layers {
		maxQ, maxFFN = max(maxQ, o.Heads*lo.HeadDim), max(maxFFN, lo.FFN)
	}
	q := make([]float32, n*maxQ)
	att := make([]float32, n*maxQ)
	g := make([]float32, n*max(maxFFN, P))
	u := make([]float32, n*maxFFN)
	var scores []float32 // attention scratch, shared by the layers (attendAll)
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		l, lo := &m.layers[li], o.Layers[li]
		hd, qd, kvd := lo.HeadDim, o.Heads*lo.HeadDim, lo.KVHeads*lo.HeadDim
		for t := range n {
			RMSNorm(xb[t*H:(t+1)*H], x[t*H:(t+1)*H], l.inNorm, o.Eps)
		}
		q := q[:n*qd]
		l.wq.MatMul(m.pool, q, xb)
		for t := range n {
			for h := range o.Heads {
				head := q[t*qd+h*hd : t*qd+(h+1)*hd]
				RMSNorm(head, head, l.qNorm, o.Eps)
				ropes[t*shapes+ropeOf[li]].apply(head)
			}
		}
		if lo.Source == li {
			k := att[:n*kvd] // scratch until the attention output is written
			l.wk.MatMul(m.pool, k, xb)
			for t := range n {
				dst := cache.K(li, start+t)
				for h := range lo.KVHeads {
					head := dst[h*hd : (h+1)*hd]
					RMSNorm(head, k[t*kvd+h*hd:t*kvd+(h+1)*hd], l.kNorm, o.Eps)
					ropes[t*shapes+ropeOf[li]].apply(head)
				}
			}
			l.wv.MatMul(m.pool, k, xb)
			for t := range n {
				dst := cache.V(li, start+t)
				for h := range lo.KVHeads {
					RMSNorm(dst[h*hd:(h+1)*hd], k[t*kvd+h*hd:t*kvd+(h+1)*hd], nil, o.Eps)
				}
			}
		}
		group := o.Heads / lo.KVHeads
		att := att[:n*qd]
		attendAll(m.pool, cache, li, start, n, q, o.Heads, group, hd, 1, att, &scores)
		l.wo.MatMul(m.pool, xb, att)
		for t := range n {
			RMSNorm(xb[t*H:(t+1)*H], xb[t*H:(t+1)*H], l.postAttnNorm, o.Eps)
		}
		Add(x, xb)

		for t := range n {
			RMSNorm(xb[t*H:(t+1)*H], x[t*H:(t+1)*H], l.preFFNorm, o.Eps)
		}
		g, u := g[:n*lo.FFN], u[:n*lo.FFN]
		l.gate.MatMul(m.pool, g, xb)
		l.up.MatMul(m.pool, u, xb)
		GELUMul(m.pool, g, u)
		l.down.MatMul(m.pool, xb, g)
		for t := range n {
			RMSNorm(xb[t*H:(t+1)*H], xb[t*H:(t+1)*H], l.postFFNorm, o.Eps)
		}
		Add(x, xb)

		if P > 0 {
			g := g[:n*P]
			l.pleGate.MatMul(m.pool, g, x)
			for t := range n {
				in := ple[t*L*P+li*P : t*L*P+(li+1)*P]
				row := g[t*P : (t+1)*P]
				geluMulRange(row, in)
			}
			l.pleProj.MatMul(m.pool, xb, g)
			for t := range n {
				RMSNorm(xb[t*H:(t+1)*H], xb[t*H:(t+1)*H], l.plePostNorm, o.Eps)
			}
			Add(x, xb)
		}
		if l.scalar != 1 {
			for i := range x {
				x[i] *= l.scalar
			}
		}
	}
	logits, n, err := outputLogits(ctx, m.pool, cache, x, n, H, m.norm, o.Eps, m.out, o.Vocab, want)
	if err != nil {
		return model.Result{}, err
	}
	if c := o.Softcap; c > 0 {
		for i, z := range logits {
			logits[i] = float32(math.Tanh(float64(z/c))) * c
		}
	}
	return Result(logits, n, o.Vocab, want), nil
}
