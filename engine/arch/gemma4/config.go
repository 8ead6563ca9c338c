package gemma4

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"

	"anechat/engine/model/mmap"
)

// Layer is the plan of one gemma4 decoder layer.
type Layer struct {
	// Sliding is true for a sliding-window layer, false for full attention.
	Sliding bool
	// HeadDim and KVHeads shape its attention (Gemma 4 uses a wider head on
	// full layers).
	HeadDim, KVHeads int
	// Source is the layer whose K/V this layer reads: itself, or for a
	// KV-shared layer the last non-shared layer of the same kind.
	Source int
	// FFN is the MLP width (doubled on KV-shared layers when the model
	// says so).
	FFN int
	// RopeTheta is the RoPE base; RopePairs is how many of the HeadDim/2
	// frequency pairs rotate (all for plain RoPE, fewer for "proportional"
	// partial RoPE, whose exponents still divide by HeadDim).
	RopeTheta float64
	RopePairs int
}

// Config holds the hyper-parameters of a gemma4 text model, read from a
// Hugging Face config.json (Gemma4TextConfig).
type Config struct {
	// Vocab is the number of logits; Hidden the residual width; Heads the
	// query heads of every layer.
	Vocab, Hidden, Heads int
	// Eps is the RMSNorm epsilon.
	Eps float32
	// Window is the sliding window W (a query at p sees p-W+1..p).
	Window int
	// Softcap is the final logit softcap (0: none).
	Softcap float32
	// PLEDim is the per-layer embedding width (0: no PLE); PLEVocab the
	// rows of its table.
	PLEDim, PLEVocab int
	// Context is the longest sequence (max_position_embeddings).
	Context int
	// Tied is true when the output projection is the embedding table.
	Tied bool
	// Layers describes each decoder layer.
	Layers []Layer
	// BOS is the beginning-of-sequence id (-1: none); EOS the ids that end
	// generation.
	BOS int32
	EOS []int32
}

// gemma4JSON is the part of config.json this package reads.
type gemma4JSON struct {
	ModelType     string                    `json:"model_type"`
	TextConfig    *gemma4JSON               `json:"text_config"`
	Vocab         int                       `json:"vocab_size"`
	Hidden        int                       `json:"hidden_size"`
	FFN           int                       `json:"intermediate_size"`
	Layers        int                       `json:"num_hidden_layers"`
	Heads         int                       `json:"num_attention_heads"`
	KVHeads       int                       `json:"num_key_value_heads"`
	HeadDim       int                       `json:"head_dim"`
	GlobalHeadDim *int                      `json:"global_head_dim"`
	GlobalKVHeads *int                      `json:"num_global_key_value_heads"`
	PerLayer      map[string]map[string]int `json:"per_layer_config"`
	Activation    string                    `json:"hidden_activation"`
	Context       int                       `json:"max_position_embeddings"`
	Eps           float64                   `json:"rms_norm_eps"`
	EOS           json.RawMessage           `json:"eos_token_id"`
	BOS           *int                      `json:"bos_token_id"`
	Tied          *bool                     `json:"tie_word_embeddings"`
	Rope          map[string]ropeJSON       `json:"rope_parameters"`
	Bias          bool                      `json:"attention_bias"`
	Window        int                       `json:"sliding_window"`
	LayerTypes    []string                  `json:"layer_types"`
	Softcap       *float64                  `json:"final_logit_softcapping"`
	AttnSoftcap   *float64                  `json:"attn_logit_softcapping"`
	Bidirectional *string                   `json:"use_bidirectional_attention"`
	PLEVocab      int                       `json:"vocab_size_per_layer_input"`
	PLEDim        *int                      `json:"hidden_size_per_layer_input"`
	KEqV          bool                      `json:"attention_k_eq_v"`
	KVShared      int                       `json:"num_kv_shared_layers"`
	MoE           bool                      `json:"enable_moe_block"`
	DoubleWideMLP bool                      `json:"use_double_wide_mlp"`
}

type ropeJSON struct {
	Type    string   `json:"rope_type"`
	Theta   float64  `json:"rope_theta"`
	Partial *float64 `json:"partial_rotary_factor"`
	Factor  *float64 `json:"factor"`
}

// ParseConfig reads the hyper-parameters of a gemma4 text model from the
// bytes of config.json (a gemma4_text config, or a gemma4 one whose
// text_config is used). path names the file in errors. Features this
// package does not describe (MoE, k=v attention, bidirectional attention,
// other activations, RoPE scaling) are errors, never silently ignored.
func ParseConfig(path string, data []byte) (Config, error) {
	var c gemma4JSON
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("gemma4: %s: %w", path, err)
	}
	if c.TextConfig != nil {
		if c.ModelType != "gemma4" {
			return Config{}, fmt.Errorf("gemma4: %s: model_type %q with a text_config is not gemma4", path, c.ModelType)
		}
		eos, bos := c.EOS, c.BOS
		c = *c.TextConfig
		if len(c.EOS) == 0 {
			c.EOS = eos
		}
		if c.BOS == nil {
			c.BOS = bos
		}
	} else if c.ModelType != "gemma4_text" {
		return Config{}, fmt.Errorf("gemma4: %s: model_type %q is not gemma4_text", path, c.ModelType)
	}
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("gemma4: %s: %s", path, fmt.Sprintf(format, args...))
	}
	for _, p := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.Vocab}, {"hidden_size", c.Hidden}, {"intermediate_size", c.FFN},
		{"num_hidden_layers", c.Layers}, {"num_attention_heads", c.Heads}, {"num_key_value_heads", c.KVHeads},
		{"head_dim", c.HeadDim}, {"max_position_embeddings", c.Context}, {"sliding_window", c.Window},
	} {
		if p.v <= 0 || p.v > 1<<24 {
			return bad("%s = %d is missing or out of range", p.name, p.v)
		}
	}
	switch {
	case c.Activation != "gelu_pytorch_tanh":
		return bad("hidden_activation %q is not supported (want gelu_pytorch_tanh)", c.Activation)
	case c.MoE:
		return bad("enable_moe_block (mixture of experts) is not supported")
	case c.KEqV:
		return bad("attention_k_eq_v is not supported")
	case c.Bidirectional != nil:
		return bad("use_bidirectional_attention %q is not supported", *c.Bidirectional)
	case c.Bias:
		return bad("attention_bias is not supported")
	case c.AttnSoftcap != nil:
		return bad("attn_logit_softcapping is not supported")
	case len(c.LayerTypes) != c.Layers:
		return bad("layer_types has %d entries for %d layers", len(c.LayerTypes), c.Layers)
	case c.KVShared < 0 || c.KVShared >= c.Layers:
		return bad("num_kv_shared_layers = %d must be in 0..%d", c.KVShared, c.Layers-1)
	case c.Eps <= 0 || c.Eps > 1:
		return bad("rms_norm_eps = %g is missing or out of range", c.Eps)
	case c.Heads%c.KVHeads != 0:
		return bad("%d attention heads are not a multiple of %d KV heads", c.Heads, c.KVHeads)
	}
	o := Config{Vocab: c.Vocab, Hidden: c.Hidden, Heads: c.Heads, Eps: float32(c.Eps), Window: c.Window,
		Context: c.Context, Tied: true, BOS: -1}
	if c.Tied != nil {
		o.Tied = *c.Tied
	}
	if c.Softcap != nil {
		if *c.Softcap < 0 {
			return bad("final_logit_softcapping = %g is negative", *c.Softcap)
		}
		o.Softcap = float32(*c.Softcap)
	}
	if c.PLEDim == nil || *c.PLEDim > 0 {
		o.PLEDim = 256 // the library default
		if c.PLEDim != nil {
			o.PLEDim = *c.PLEDim
		}
		o.PLEVocab = c.PLEVocab
		if o.PLEVocab == 0 {
			o.PLEVocab = 262144 // the library default
		}
		if o.PLEVocab <= 0 || o.PLEVocab > 1<<24 || o.PLEDim > 1<<16 {
			return bad("per-layer embeddings of %d x %d are out of range", o.PLEVocab, o.PLEDim)
		}
	}
	// Token ids the vocabulary does not have are damage, not "none" (that
	// is null): dropping them would start without BOS or never stop.
	if c.BOS != nil {
		if *c.BOS < 0 || *c.BOS >= c.Vocab {
			return bad("bos_token_id = %d is not a token id of the %d-token vocabulary", *c.BOS, c.Vocab)
		}
		o.BOS = int32(*c.BOS)
	}
	eos, err := parseIDs(c.EOS)
	if err != nil {
		return bad("eos_token_id: %v", err)
	}
	for _, id := range eos {
		if id < 0 || int(id) >= c.Vocab {
			return bad("eos_token_id %d is not a token id of the %d-token vocabulary", id, c.Vocab)
		}
		if !slices.Contains(o.EOS, id) {
			o.EOS = append(o.EOS, id)
		}
	}

	// Per-layer geometry. Overrides come from per_layer_config (what this
	// transformers version writes) or else global_head_dim (older configs;
	// the library's default is 512) for the full-attention layers.
	first := c.Layers - c.KVShared
	lastOfKind := map[bool]int{}
	o.Layers = make([]Layer, c.Layers)
	for i, typ := range c.LayerTypes {
		l := &o.Layers[i]
		switch typ {
		case "sliding_attention":
			l.Sliding = true
		case "full_attention":
		default:
			return bad("layer %d: layer type %q is not supported", i, typ)
		}
		l.HeadDim, l.KVHeads = c.HeadDim, c.KVHeads
		if c.PerLayer != nil {
			for k, v := range c.PerLayer[strconv.Itoa(i)] {
				switch k {
				case "head_dim":
					l.HeadDim = v
				case "num_key_value_heads":
					l.KVHeads = v
				default:
					return bad("layer %d: per_layer_config field %q is not supported", i, k)
				}
			}
		} else if !l.Sliding {
			l.HeadDim = 512
			if c.GlobalHeadDim != nil {
				l.HeadDim = *c.GlobalHeadDim
			}
		}
		if l.HeadDim <= 0 || l.HeadDim%2 != 0 || l.HeadDim > 1<<14 || l.KVHeads <= 0 || c.Heads%l.KVHeads != 0 {
			return bad("layer %d: head dim %d, %d KV heads for %d heads are invalid", i, l.HeadDim, l.KVHeads, c.Heads)
		}
		kind := "full_attention"
		if l.Sliding {
			kind = "sliding_attention"
		}
		r, ok := c.Rope[kind]
		if !ok {
			return bad("rope_parameters has no entry for %s", kind)
		}
		if r.Factor != nil && *r.Factor != 1 {
			return bad("rope_parameters.%s.factor %g is not supported", kind, *r.Factor)
		}
		if r.Theta <= 0 {
			return bad("rope_parameters.%s.rope_theta %g is missing or invalid", kind, r.Theta)
		}
		l.RopeTheta = r.Theta
		switch r.Type {
		case "default", "":
			l.RopePairs = l.HeadDim / 2
			if r.Partial != nil && *r.Partial != 1 {
				return bad("rope_parameters.%s: partial_rotary_factor with rope_type default is not supported", kind)
			}
		case "proportional":
			p := 1.0
			if r.Partial != nil {
				p = *r.Partial
			}
			if p < 0 || p > 1 {
				return bad("rope_parameters.%s.partial_rotary_factor %g is out of range", kind, p)
			}
			l.RopePairs = int(p * float64(l.HeadDim) / 2) // int(factor*head_dim//2), as the library
		default:
			return bad("rope_parameters.%s: rope_type %q is not supported", kind, r.Type)
		}
		l.Source, l.FFN = i, c.FFN
		if i < first {
			lastOfKind[l.Sliding] = i
			continue
		}
		src, ok := lastOfKind[l.Sliding]
		if !ok {
			return bad("layer %d is KV-shared but no earlier non-shared layer is of its kind", i)
		}
		if s := o.Layers[src]; s.HeadDim != l.HeadDim || s.KVHeads != l.KVHeads {
			return bad("layer %d shares the KV of layer %d, whose heads differ", i, src)
		}
		l.Source = src
		if c.DoubleWideMLP {
			l.FFN = 2 * c.FFN
		}
	}
	return o, nil
}

// parseIDs reads an id or a list of ids (null: none).
func parseIDs(raw json.RawMessage) ([]int32, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int32
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int32{one}, nil
	}
	var many []int32
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, err
	}
	return many, nil
}

// maxGenerationConfig bounds generation_config.json (a few hundred bytes in
// real checkpoints).
const maxGenerationConfig = 1 << 20

// GenerationEOS returns the eos ids of dir/generation_config.json, which
// real checkpoints use to add end-of-turn ids; none if the file is absent.
func GenerationEOS(dir string) ([]int32, error) {
	p := filepath.Join(dir, "generation_config.json")
	data, err := mmap.ReadFile(p, maxGenerationConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gemma4: %w", err)
	}
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("gemma4: %s: %w", p, err)
	}
	ids, err := parseIDs(g.EOS)
	if err != nil {
		return nil, fmt.Errorf("gemma4: %s: eos_token_id: %w", p, err)
	}
	return ids, nil
}
