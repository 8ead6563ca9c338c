package cpu

import (
	"context"
	"fmt"
	"math"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
)

// LlamaOptions are the hyper-parameters of a llama-architecture model.
type LlamaOptions struct {
	Hidden, FFN, Layers int
	Heads, KVHeads      int
	HeadDim, RopeDim    int
	RopeBase            float64
	Eps                 float32
	Vocab, Context      int
}

type llamaLayer struct {
	attnNorm, ffnNorm []float32
	wq, wk, wv, wo    *Matrix
	gate, up, down    *Matrix
}

// Llama is the llama architecture (stories260K, SmolLM2) on the CPU. It is a
// model.Backend. Forward keeps no state outside the cache it is given, so
// concurrent calls on distinct caches are safe.
type Llama struct {
	opt     LlamaOptions
	cfg     model.Config
	pool    *Pool
	embd    *Matrix
	out     *Matrix
	outNorm []float32
	layers  []llamaLayer
	file    *gguf.File // owned when opened by OpenLlama
	invFreq []float64  // RoPE base^(-2i/RopeDim) per pair
}

// tensorSource is where weights come from (a GGUF file).
type tensorSource interface {
	Path() string
	Tensor(name string) (gguf.TensorInfo, bool)
	TensorData(name string) ([]byte, error)
}

// loadMatrix binds tensor name as a rows×cols matrix (GGUF dims [cols, rows]).
func loadMatrix(src tensorSource, name string, rows, cols int) (*Matrix, error) {
	ti, ok := src.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("cpu: %s: missing tensor %q", src.Path(), name)
	}
	if !Supported(ti.Type) {
		return nil, fmt.Errorf("cpu: %s: tensor %q: type %s is not supported by the CPU backend (want F32, F16, BF16, Q8_0, Q4_0 or Q4_1)", src.Path(), name, ti.Type)
	}
	if len(ti.Dims) != 2 || ti.Dims[0] != cols || ti.Dims[1] != rows {
		return nil, fmt.Errorf("cpu: %s: tensor %q has shape %v, want [%d %d]", src.Path(), name, ti.Dims, cols, rows)
	}
	data, err := src.TensorData(name)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	m, err := NewMatrix(name, ti.Type, rows, cols, data)
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", src.Path(), err)
	}
	return m, nil
}

// loadVector reads a 1-D tensor of n elements as float32.
func loadVector(src tensorSource, name string, n int) ([]float32, error) {
	ti, ok := src.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("cpu: %s: missing tensor %q", src.Path(), name)
	}
	if len(ti.Dims) != 1 || ti.Dims[0] != n {
		return nil, fmt.Errorf("cpu: %s: tensor %q has shape %v, want [%d]", src.Path(), name, ti.Dims, n)
	}
	data, err := src.TensorData(name)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	m, err := NewMatrix(name, ti.Type, 1, n, data)
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", src.Path(), err)
	}
	return m.Row(make([]float32, n), 0), nil
}

// LoadLlama binds the llama weights of f. The weights stay in f's mapping:
// f must stay open while the model is used. pool may be nil (one per CPU).
func LoadLlama(f *gguf.File, pool *Pool) (*Llama, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if arch != "llama" {
		return nil, fmt.Errorf("cpu: %s: architecture %q is not llama", f.Path(), arch)
	}
	var o LlamaOptions
	for _, p := range []struct {
		key string
		dst *int
	}{
		{"llama.embedding_length", &o.Hidden}, {"llama.feed_forward_length", &o.FFN},
		{"llama.block_count", &o.Layers}, {"llama.attention.head_count", &o.Heads},
		{"llama.context_length", &o.Context},
	} {
		if *p.dst, err = f.Int(p.key); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
		if *p.dst <= 0 || *p.dst > 1<<24 {
			return nil, fmt.Errorf("cpu: %s: %s = %d is out of range", f.Path(), p.key, *p.dst)
		}
	}
	o.KVHeads = o.Heads
	if _, ok := f.Value("llama.attention.head_count_kv"); ok {
		if o.KVHeads, err = f.Int("llama.attention.head_count_kv"); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
	}
	if o.KVHeads <= 0 || o.Heads%o.KVHeads != 0 || o.Hidden%o.Heads != 0 {
		return nil, fmt.Errorf("cpu: %s: %d heads, %d kv heads, hidden %d are inconsistent", f.Path(), o.Heads, o.KVHeads, o.Hidden)
	}
	o.HeadDim = o.Hidden / o.Heads
	o.RopeDim = o.HeadDim
	if _, ok := f.Value("llama.rope.dimension_count"); ok {
		if o.RopeDim, err = f.Int("llama.rope.dimension_count"); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
		if o.RopeDim <= 0 || o.RopeDim > o.HeadDim || o.RopeDim%2 != 0 {
			return nil, fmt.Errorf("cpu: %s: rope dimension %d must be even and at most the head dim %d", f.Path(), o.RopeDim, o.HeadDim)
		}
	}
	o.RopeBase = 10000
	if _, ok := f.Value("llama.rope.freq_base"); ok {
		b, err := f.Float32("llama.rope.freq_base")
		if err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
		o.RopeBase = float64(b)
	}
	if _, ok := f.Value("llama.rope.scaling.type"); ok {
		return nil, fmt.Errorf("cpu: %s: llama.rope.scaling.type is not supported", f.Path())
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		return nil, fmt.Errorf("cpu: %s: tensor \"rope_freqs.weight\" (rope frequency factors) is not supported", f.Path())
	}
	o.Eps = 1e-5
	if _, ok := f.Value("llama.attention.layer_norm_rms_epsilon"); ok {
		if o.Eps, err = f.Float32("llama.attention.layer_norm_rms_epsilon"); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
	}
	ti, ok := f.Tensor("token_embd.weight")
	if !ok || len(ti.Dims) != 2 {
		return nil, fmt.Errorf("cpu: %s: missing or malformed tensor \"token_embd.weight\"", f.Path())
	}
	o.Vocab = ti.Dims[1]
	m := &Llama{opt: o, pool: pool}
	if m.pool == nil {
		m.pool = NewPool(0)
	}
	if m.embd, err = loadMatrix(f, "token_embd.weight", o.Vocab, o.Hidden); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("output.weight"); ok {
		if m.out, err = loadMatrix(f, "output.weight", o.Vocab, o.Hidden); err != nil {
			return nil, err
		}
	} else {
		m.out = m.embd // tied embeddings (SmolLM2)
	}
	if m.outNorm, err = loadVector(f, "output_norm.weight", o.Hidden); err != nil {
		return nil, err
	}
	qd, kvd := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	m.layers = make([]llamaLayer, o.Layers)
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		if l.attnNorm, err = loadVector(f, p+"attn_norm.weight", o.Hidden); err != nil {
			return nil, err
		}
		if l.ffnNorm, err = loadVector(f, p+"ffn_norm.weight", o.Hidden); err != nil {
			return nil, err
		}
		for _, w := range []struct {
			dst        **Matrix
			name       string
			rows, cols int
		}{
			{&l.wq, "attn_q.weight", qd, o.Hidden}, {&l.wk, "attn_k.weight", kvd, o.Hidden},
			{&l.wv, "attn_v.weight", kvd, o.Hidden}, {&l.wo, "attn_output.weight", o.Hidden, qd},
			{&l.gate, "ffn_gate.weight", o.FFN, o.Hidden}, {&l.up, "ffn_up.weight", o.FFN, o.Hidden},
			{&l.down, "ffn_down.weight", o.Hidden, o.FFN},
		} {
			if *w.dst, err = loadMatrix(f, p+w.name, w.rows, w.cols); err != nil {
				return nil, err
			}
		}
	}
	m.invFreq = make([]float64, o.RopeDim/2)
	for i := range m.invFreq {
		m.invFreq[i] = math.Pow(o.RopeBase, -float64(2*i)/float64(o.RopeDim))
	}
	geo := kv.Geometry{Context: o.Context, Layers: make([]kv.LayerSpec, o.Layers)}
	for i := range geo.Layers {
		geo.Layers[i] = kv.LayerSpec{KVHeads: o.KVHeads, HeadDim: o.HeadDim, Source: i}
	}
	m.cfg = model.Config{Arch: "llama", VocabSize: o.Vocab, Hidden: o.Hidden, ContextLen: o.Context, KV: geo,
		BOS: -1}
	if id, err := f.Int("tokenizer.ggml.bos_token_id"); err == nil && id >= 0 && id < o.Vocab {
		m.cfg.BOS = int32(id)
	}
	if id, err := f.Int("tokenizer.ggml.eos_token_id"); err == nil && id >= 0 && id < o.Vocab {
		m.cfg.EOS = append(m.cfg.EOS, int32(id))
	}
	if id, err := f.Int("tokenizer.ggml.eot_token_id"); err == nil && id >= 0 && id < o.Vocab && !m.cfg.IsEOS(int32(id)) {
		m.cfg.EOS = append(m.cfg.EOS, int32(id))
	}
	return m, nil
}

// Options returns the model's hyper-parameters.
func (m *Llama) Options() LlamaOptions { return m.opt }

// Config implements model.Backend.
func (m *Llama) Config() model.Config { return m.cfg }

// Widths implements model.Backend: the CPU runs any width.
func (m *Llama) Widths() []int { return nil }

// Forward implements model.Backend.
func (m *Llama) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (model.Result, error) {
	o := m.opt
	n := len(tokens)
	if n == 0 {
		return model.Result{}, fmt.Errorf("cpu: llama: forward of no tokens")
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= o.Vocab {
			return model.Result{}, fmt.Errorf("cpu: llama: token id %d outside the vocabulary 0..%d", id, o.Vocab-1)
		}
	}
	if g := cache.Geometry(); len(g.Layers) != o.Layers {
		return model.Result{}, fmt.Errorf("cpu: llama: cache has %d layers, model %d", len(g.Layers), o.Layers)
	}
	if err := cache.Reserve(start, n); err != nil {
		return model.Result{}, err
	}
	H, qd, kvd, hd := o.Hidden, o.Heads*o.HeadDim, o.KVHeads*o.HeadDim, o.HeadDim
	x := make([]float32, n*H)
	xb := make([]float32, n*H)
	q := make([]float32, n*qd)
	k := make([]float32, n*kvd)
	v := make([]float32, n*kvd)
	att := make([]float32, n*qd)
	g := make([]float32, n*o.FFN)
	u := make([]float32, n*o.FFN)
	for t, id := range tokens {
		m.embd.Row(x[t*H:(t+1)*H], int(id))
	}
	// RoPE angles per token, shared by every head and layer: the same
	// float64 expressions as RoPE, so the same bits.
	pairs := o.RopeDim / 2
	rope := make([]float64, 2*n*pairs)
	for t := range n {
		for i := range pairs {
			rope[t*pairs+i], rope[(n+t)*pairs+i] = ropeCosSin(start+t, m.invFreq[i])
		}
	}
	group := o.Heads / o.KVHeads
	scale := float32(1 / sqrt64(float64(hd)))
	var scores []float32 // attention scratch, shared by the layers (attendAll)
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		l := &m.layers[li]
		for t := range n {
			RMSNorm(xb[t*H:(t+1)*H], x[t*H:(t+1)*H], l.attnNorm, o.Eps)
		}
		in := NewInput(xb, H)
		l.wq.MatMulInput(m.pool, q, in)
		l.wk.MatMulInput(m.pool, k, in)
		l.wv.MatMulInput(m.pool, v, in)
		for t := range n {
			pos := start + t
			rc, rs := rope[t*pairs:(t+1)*pairs], rope[(n+t)*pairs:(n+t+1)*pairs]
			for h := range o.Heads {
				rotatePairs(q[t*qd+h*hd:t*qd+(h+1)*hd], rc, rs)
			}
			for h := range o.KVHeads {
				rotatePairs(k[t*kvd+h*hd:t*kvd+(h+1)*hd], rc, rs)
			}
			copy(cache.K(li, pos), k[t*kvd:(t+1)*kvd])
			copy(cache.V(li, pos), v[t*kvd:(t+1)*kvd])
		}
		attendAll(m.pool, cache, li, start, n, q, o.Heads, group, hd, scale, att, &scores)
		l.wo.MatMul(m.pool, xb, att)
		Add(x, xb)
		for t := range n {
			RMSNorm(xb[t*H:(t+1)*H], x[t*H:(t+1)*H], l.ffnNorm, o.Eps)
		}
		in = NewInput(xb, H)
		l.gate.MatMulInput(m.pool, g, in)
		l.up.MatMulInput(m.pool, u, in)
		SiLUMul(m.pool, g, u)
		l.down.MatMul(m.pool, xb, g)
		Add(x, xb)
	}
	logits, n, err := outputLogits(ctx, m.pool, cache, x, n, H, m.outNorm, o.Eps, m.out, o.Vocab, want)
	if err != nil {
		return model.Result{}, err
	}
	return Result(logits, n, o.Vocab, want), nil
}

// outputLogits is the end of a Forward: the final RMSNorm of the n hidden
// rows x (H floats each, normed in place) and the output projection, of the
// last row only when want has model.Last; it returns the flat logits and
// their row count. A cancelled ctx rolls the cache's pending rows back.
func outputLogits(ctx context.Context, p *Pool, cache *kv.Cache, x []float32, n, H int, norm []float32, eps float32, out *Matrix, vocab int, want model.Output) ([]float32, int, error) {
	for t := range n {
		RMSNorm(x[t*H:(t+1)*H], x[t*H:(t+1)*H], norm, eps)
	}
	if err := ctx.Err(); err != nil {
		cache.Rollback()
		return nil, 0, err
	}
	if want&model.Last != 0 {
		x, n = x[(n-1)*H:], 1
	}
	logits := make([]float32, n*vocab)
	out.MatMul(p, logits, x)
	return logits, n, nil
}

// Result packages the flat logits of n positions as what want asks for
// (model.Logits rows and/or model.Argmax ids).
func Result(logits []float32, n, vocab int, want model.Output) model.Result {
	var r model.Result
	if want&model.Logits != 0 {
		r.Logits = make([][]float32, n)
		for t := range n {
			r.Logits[t] = logits[t*vocab : (t+1)*vocab : (t+1)*vocab]
		}
	}
	if want&model.Argmax != 0 {
		r.Argmax = make([]int32, n)
		for t := range n {
			r.Argmax[t] = Argmax(logits[t*vocab : (t+1)*vocab])
		}
	}
	return r
}

// OpenLlama opens the GGUF file at path and binds its llama weights. The
// returned model keeps the file mapped until Close.
func OpenLlama(path string, pool *Pool) (*Llama, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := LoadLlama(f, pool)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.file = f
	return m, nil
}

// File is the GGUF file the weights come from (nil when loaded from a file
// the caller owns).
func (m *Llama) File() *gguf.File { return m.file }

// SetFingerprint sets the model's identity in Config: engine/load computes
// it (load.Fingerprint), so every backend reports the same one.
func (m *Llama) SetFingerprint(fp string) { m.cfg.Fingerprint = fp }

// Close unmaps the file opened by OpenLlama; the model must not be used
// afterwards.
func (m *Llama) Close() error {
	if m.file == nil {
		return nil
	}
	f := m.file
	m.file = nil
	return f.Close()
}
