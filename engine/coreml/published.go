package coreml

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"anechat/engine/model/mmap"
)

// IsPublished reports whether dir looks like a bundle of the CoreML-LLM
// project (model_config.json beside chunk models) rather than one of the
// anechat converter.
func IsPublished(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "model_config.json"))
	return err == nil
}

// Published is a bundle in the layout the CoreML-LLM project publishes for
// Gemma 4 E2B (../shared/docs/gemma4-on-ane.md): model_config.json, INT8
// embedding sidecars with fp16 per-row scales, RoPE cos/sin tables as .npy
// files, decode chunks (chunkN.mlmodelc or .mlpackage, each a multifunction
// model with a one-token decode function and a verify_qK function) and,
// optionally, prefill chunks.
//
// This package reads and checks that layout (ReadPublished); package
// engine/coreml/published runs it on an Apple silicon Mac (published.Model,
// through published.NewCoreMLExecutor; the function contract, learned from
// the project's sources, is PUBLISHED.md):
// one token through the decode function (decode_q1), speculation through
// the verify function (verify_qK), a prompt from position 0 through the
// prefill chunks when present (later prompt pieces token by token through
// decode_q1), the KV kept on the host in the caller's kv.Cache. Its last chunk ends in an argmax,
// so it decodes greedily. Its decode and verify functions are different
// functions, so speculation on and off may give different text: identity
// there is a measurement (`anechat doctor --bundle` and `anechat bench
// coreml` report it), not a property of the bundle (the shared doc reports
// 12-100% agreement over 20 tokens). A bundle of the anechat converter
// makes it hold by construction: one generation function for every call.
type Published struct {
	Dir string
	// Config is model_config.json.
	Config PublishedConfig
	// Decode and Prefill list the chunk models found, in order.
	Decode, Prefill []string
	// Sidecars maps each sidecar file to its size.
	Sidecars map[string]int64
	// Ropes maps each RoPE table to its shape and dtype.
	Ropes map[string]NPYHeader
	// Tokenizer is tokenizer.json's path, "" when absent.
	Tokenizer string
}

// PublishedConfig is the part of model_config.json the layout defines.
type PublishedConfig struct {
	ModelName     string  `json:"model_name"`
	Architecture  string  `json:"architecture"`
	HiddenSize    int     `json:"hidden_size"`
	ContextLength int     `json:"context_length"`
	VocabSize     int     `json:"vocab_size"`
	BOS           int     `json:"bos_token_id"`
	EOS           int     `json:"eos_token_id"`
	PerLayerDim   int     `json:"per_layer_dim"`
	NumLayers     int     `json:"num_layers"`
	SlidingWindow int     `json:"sliding_window"`
	EmbedScale    float64 `json:"embed_scale"`
	// PerLayerEmbedScale multiplies the per-layer table's rows; absent, it
	// is sqrt(per_layer_dim), what the project's converter writes.
	PerLayerEmbedScale float64 `json:"per_layer_embed_scale"`
	// LayerTypes ("sliding_attention", "full_attention" per layer) and
	// NumKVShared (the last layers that reuse earlier KV) say which
	// layer's rows each prefill chunk returns; without them the prompt
	// runs token by token.
	LayerTypes  []string `json:"layer_types"`
	NumKVShared int      `json:"num_kv_shared_layers"`
}

// NPYHeader is the header of a .npy file.
type NPYHeader struct {
	DType string
	Shape []int
}

var chunkName = regexp.MustCompile(`^(prefill_)?chunk(\d+)\.(mlmodelc|mlpackage)$`)

// ReadPublished reads a CoreML-LLM bundle's model_config.json and checks
// the bundle as far as that can be done without Core ML: the config's
// fields and the sizes they imply (multiplied without overflow), every
// chunk a directory, every sidecar and RoPE table a regular file of exactly
// the size the config and its .npy header imply, tokenizer.json (when
// present) a regular file. Errors wrap ErrBundle and name the file and the
// field.
func ReadPublished(dir string) (*Published, error) {
	p := &Published{Dir: dir, Sidecars: map[string]int64{}, Ropes: map[string]NPYHeader{}}
	cfgPath := filepath.Join(dir, "model_config.json")
	raw, err := mmap.ReadFile(cfgPath, maxManifest)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	if err := json.Unmarshal(raw, &p.Config); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON: %w", ErrBundle, cfgPath, err)
	}
	c := &p.Config
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{{"hidden_size", c.HiddenSize, 1 << 24}, {"context_length", c.ContextLength, 1 << 24}, {"vocab_size", c.VocabSize, 1 << 24},
		{"num_layers", c.NumLayers, 1024}, {"per_layer_dim", c.PerLayerDim, 1 << 24}} {
		if f.v <= 0 || f.v > f.max {
			return nil, fmt.Errorf("%w: %s: %s = %d is missing or out of range (1..%d)", ErrBundle, cfgPath, f.name, f.v, f.max)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	type numbered struct {
		n    int
		name string
	}
	var dec, pre []numbered
	for _, e := range entries {
		m := chunkName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if !statDir(filepath.Join(dir, e.Name())) {
			return nil, fmt.Errorf("%w: %s is not a directory (a chunk is a compiled .mlmodelc or an .mlpackage directory)", ErrBundle, filepath.Join(dir, e.Name()))
		}
		n, _ := strconv.Atoi(m[2])
		if m[1] == "" {
			dec = append(dec, numbered{n, e.Name()})
		} else {
			pre = append(pre, numbered{n, e.Name()})
		}
	}
	for _, l := range []struct {
		in  []numbered
		out *[]string
	}{{dec, &p.Decode}, {pre, &p.Prefill}} {
		slices.SortFunc(l.in, func(a, b numbered) int { return a.n - b.n })
		for i, x := range l.in {
			if x.n != i+1 {
				return nil, fmt.Errorf("%w: %s: chunk %d is missing (found %s)", ErrBundle, dir, i+1, x.name)
			}
			*l.out = append(*l.out, x.name)
		}
	}
	if len(p.Decode) == 0 {
		return nil, fmt.Errorf("%w: %s: no decode chunks (chunk1.mlmodelc ...)", ErrBundle, dir)
	}
	V, H, L, P := c.VocabSize, c.HiddenSize, c.NumLayers, c.PerLayerDim
	sidecars := []struct {
		name   string
		dims   []int
		fields string
		size   int64
	}{
		{"embed_tokens_q8.bin", []int{V, H}, "vocab_size x hidden_size", 0},
		{"embed_tokens_scales.bin", []int{V, 2}, "vocab_size x 2 bytes", 0},
		{"embed_tokens_per_layer_q8.bin", []int{V, L, P}, "vocab_size x num_layers x per_layer_dim", 0},
		{"embed_tokens_per_layer_scales.bin", []int{V, 2}, "vocab_size x 2 bytes", 0},
		{"per_layer_projection.bin", []int{L, P, H, 2}, "num_layers x per_layer_dim x hidden_size x 2 bytes", 0},
	}
	// The config first: every size it implies, multiplied without
	// overflow, then each file against its size.
	for i, s := range sidecars {
		size, ok := tableBytes(s.dims...)
		if !ok {
			return nil, fmt.Errorf("%w: %s: %s (%s) is more bytes than any file of %s can hold: the config is damaged", ErrBundle, cfgPath, s.fields, strings.Trim(fmt.Sprint(s.dims), "[]"), s.name)
		}
		sidecars[i].size = size
	}
	for _, s := range sidecars {
		size := s.size
		path := filepath.Join(dir, s.name)
		st, err := mmap.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBundle, err)
		}
		if st.Size() != size {
			return nil, fmt.Errorf("%w: %s is %d bytes, model_config.json implies %d (%s)", ErrBundle, path, st.Size(), size, s.fields)
		}
		p.Sidecars[s.name] = size
	}
	for _, name := range []string{"cos_sliding.npy", "sin_sliding.npy", "cos_full.npy", "sin_full.npy"} {
		path := filepath.Join(dir, name)
		h, err := readNPYHeader(path)
		if err != nil {
			return nil, err
		}
		if len(h.Shape) != 2 || h.Shape[0] < c.ContextLength {
			return nil, fmt.Errorf("%w: %s has shape %v: want (positions, width) with at least context_length %d positions", ErrBundle, path, h.Shape, c.ContextLength)
		}
		p.Ropes[name] = h
	}
	switch _, err := mmap.Stat(filepath.Join(dir, "tokenizer.json")); {
	case err == nil:
		p.Tokenizer = filepath.Join(dir, "tokenizer.json")
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	return p, nil
}

// readNPYHeader reads a .npy file's header (format versions 1-3) and
// checks that the file holds exactly the data the header declares (a 2-D
// table of '<f2' or '<f4' values, what openNPYTable maps).
func readNPYHeader(path string) (NPYHeader, error) {
	f, err := mmap.Open(path)
	if err != nil {
		return NPYHeader{}, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	defer f.Close()
	var pre [10]byte
	if _, err := io.ReadFull(f, pre[:8]); err != nil || string(pre[:6]) != "\x93NUMPY" {
		return NPYHeader{}, fmt.Errorf("%w: %s is not a .npy file", ErrBundle, path)
	}
	var n, at int
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(f, pre[8:10]); err != nil {
			return NPYHeader{}, fmt.Errorf("%w: %s: %w", ErrBundle, path, err)
		}
		n, at = int(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(f, b[:]); err != nil {
			return NPYHeader{}, fmt.Errorf("%w: %s: %w", ErrBundle, path, err)
		}
		n, at = int(binary.LittleEndian.Uint32(b[:])), 12
	default:
		return NPYHeader{}, fmt.Errorf("%w: %s: .npy version %d is unknown", ErrBundle, path, pre[6])
	}
	if n > 1<<16 {
		return NPYHeader{}, fmt.Errorf("%w: %s: a %d-byte .npy header", ErrBundle, path, n)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return NPYHeader{}, fmt.Errorf("%w: %s: %w", ErrBundle, path, err)
	}
	h, err := parseNPYDict(path, string(hdr))
	if err != nil {
		return NPYHeader{}, err
	}
	st, err := f.Stat()
	if err != nil {
		return NPYHeader{}, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	if err := npyDataSize(path, h, st.Size()-int64(at+n)); err != nil {
		return NPYHeader{}, err
	}
	return h, nil
}

// ParseNPY parses the header of the .npy file whose bytes are b (path
// names it in errors), as readNPYHeader does a file's: a 2-D C-order table
// of '<f2' or '<f4' values holding exactly the data its header declares.
// off is where the data starts. engine/coreml/published maps its RoPE
// tables with it.
func ParseNPY(path string, b []byte) (h NPYHeader, off int, err error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return NPYHeader{}, 0, fmt.Errorf("%w: %s is not a .npy file", ErrBundle, path)
	}
	var n, at int
	switch b[6] {
	case 1:
		n, at = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return NPYHeader{}, 0, fmt.Errorf("%w: %s: a truncated .npy header", ErrBundle, path)
		}
		n, at = int(binary.LittleEndian.Uint32(b[8:12])), 12
	default:
		return NPYHeader{}, 0, fmt.Errorf("%w: %s: .npy version %d is unknown", ErrBundle, path, b[6])
	}
	if n > len(b)-at {
		return NPYHeader{}, 0, fmt.Errorf("%w: %s: the .npy header runs past the end of the file", ErrBundle, path)
	}
	if h, err = parseNPYDict(path, string(b[at:at+n])); err != nil {
		return NPYHeader{}, 0, err
	}
	if err := npyDataSize(path, h, int64(len(b)-at-n)); err != nil {
		return NPYHeader{}, 0, err
	}
	return h, at + n, nil
}

// npyDataSize checks that a .npy table of header h has exactly data bytes
// after its header: a 2-D array of '<f2' or '<f4' values.
func npyDataSize(path string, h NPYHeader, data int64) error {
	elem := map[string]int{"<f2": 2, "<f4": 4}[h.DType]
	if elem == 0 {
		return fmt.Errorf("%w: %s holds %s values; want little-endian float16 or float32 ('<f2', '<f4')", ErrBundle, path, h.DType)
	}
	if len(h.Shape) != 2 {
		return fmt.Errorf("%w: %s has shape %v; a RoPE table is (positions, width)", ErrBundle, path, h.Shape)
	}
	want, ok := tableBytes(h.Shape[0], h.Shape[1], elem)
	if !ok || want != data {
		return fmt.Errorf("%w: %s: %d data bytes for shape %v of %s", ErrBundle, path, data, h.Shape, h.DType)
	}
	return nil
}

var (
	npyDescr = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	npyShape = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

func parseNPYDict(path, h string) (NPYHeader, error) {
	d, s := npyDescr.FindStringSubmatch(h), npyShape.FindStringSubmatch(h)
	if d == nil || s == nil || strings.Contains(h, "'fortran_order': True") {
		return NPYHeader{}, fmt.Errorf("%w: %s: .npy header %q is not a C-order array", ErrBundle, path, h)
	}
	out := NPYHeader{DType: d[1]}
	for _, f := range strings.Split(s[1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 {
			return NPYHeader{}, fmt.Errorf("%w: %s: .npy shape (%s)", ErrBundle, path, s[1])
		}
		out.Shape = append(out.Shape, v)
	}
	return out, nil
}

// Describe says what the bundle holds, how the Core ML backend runs it
// and plainly that speculation identity there is measured, not built in.
func (p *Published) Describe() string {
	c := p.Config
	var ropes []string
	for _, name := range []string{"cos_sliding.npy", "cos_full.npy"} {
		if h, ok := p.Ropes[name]; ok {
			ropes = append(ropes, fmt.Sprintf("%s %s%v", name, h.DType, h.Shape))
		}
	}
	prefill := "none"
	if len(p.Prefill) > 0 {
		prefill = strings.Join(p.Prefill, ", ")
	}
	return fmt.Sprintf("a CoreML-LLM bundle (%s, %s: %d layers, hidden %d, context %d, vocab %d, window %d); decode chunks %s; prefill chunks %s (for a prompt from position 0; later prompt tokens run the decode function one by one); INT8 sidecars and %s present. "+
		"The Core ML backend runs it on an Apple silicon Mac, greedily (it returns token ids, no logits): one token through its decode (decode_q1) function, speculation through its verify (verify_qK) function. Its decode and verify (verify_qK) functions are different functions, so identity with speculation on and off is not built in there: it is measured (doctor --bundle on a Mac). "+
		"Convert the checkpoint with `make bundle` for a bundle whose one generation function makes it hold by construction",
		c.ModelName, c.Architecture, c.NumLayers, c.HiddenSize, c.ContextLength, c.VocabSize, c.SlidingWindow,
		strings.Join(p.Decode, ", "), prefill, strings.Join(ropes, ", "))
}
