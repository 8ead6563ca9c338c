package coreml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"anechat/engine/model/mmap"
)

// The bundle format this package reads (engine/coreml/convert/README.md).
const (
	// Format is the manifest's "format".
	Format = "anechat-coreml-bundle"
	// FormatVersion is the one "format_version" this package reads. Version
	// 2: the generation function returns a blockwise argmax and no logits,
	// and the last chunk has a sample function that returns them.
	FormatVersion = 2
	// ManifestName is the manifest's file name in a bundle directory.
	ManifestName = "manifest.json"
)

// ErrBundle is wrapped by every error about a bundle that is incomplete,
// damaged, of another format or inconsistent with itself. The message names
// the file and what is wrong.
var ErrBundle = errors.New("coreml: bad bundle")

// Manifest is a bundle's manifest.json: what the converter wrote, with the
// shapes of every function and the checksums of every sidecar.
type Manifest struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	// Architecture is "llama" or "gemma4" (what engine/load.Detect reads).
	Architecture string        `json:"architecture"`
	Converter    ConverterInfo `json:"converter"`
	Source       SourceInfo    `json:"source"`
	Arch         ArchInfo      `json:"arch"`
	Geometry     GeometryInfo  `json:"geometry"`
	Tokenizer    TokenizerInfo `json:"tokenizer"`
	ChatTemplate struct {
		Format string `json:"format"`
		File   string `json:"file,omitempty"`
	} `json:"chat_template"`
	// Sidecars are the embedding tables: "embed" and, for gemma4,
	// "per_layer".
	Sidecars          map[string]SidecarInfo `json:"sidecars"`
	Chunks            []ChunkInfo            `json:"chunks"`
	ConversionSeconds float64                `json:"conversion_seconds"`
}

// ConverterInfo says what made the bundle and how its weights are stored.
type ConverterInfo struct {
	Coremltools string `json:"coremltools"`
	Numpy       string `json:"numpy"`
	Python      string `json:"python"`
	// Weights is the linear layers' storage: lut4 or lut6 (palettes per
	// 16 rows), int8 (per channel) or fp16; older bundles may say int4.
	Weights string `json:"weights"`
	// Sidecars is int8 or fp16 (the embedding tables' storage).
	Sidecars string `json:"sidecars"`
}

// SourceInfo identifies the checkpoint the bundle was converted from.
type SourceInfo struct {
	// Path is the checkpoint's base name (a .gguf file or a directory).
	Path  string `json:"path"`
	Files []struct {
		File   string `json:"file"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
}

// ArchInfo is the architecture as the converter describes it.
type ArchInfo struct {
	Arch       string              `json:"arch"`
	Family     string              `json:"family"`
	Vocab      int                 `json:"vocab"`
	Hidden     int                 `json:"hidden"`
	Heads      int                 `json:"heads"`
	Eps        float64             `json:"eps"`
	Context    int                 `json:"context"`
	Window     int                 `json:"window"`
	Softcap    float64             `json:"softcap"`
	PLEDim     int                 `json:"ple_dim"`
	PLEVocab   int                 `json:"ple_vocab"`
	Tied       bool                `json:"tied"`
	BOS        int                 `json:"bos"`
	EOS        []int               `json:"eos"`
	AttnScale  float64             `json:"attn_scale"`
	EmbedScale float64             `json:"embed_scale"`
	Layers     []LayerInfo         `json:"layers"`
	Ropes      map[string]RopeInfo `json:"ropes"`
}

// LayerInfo is one decoder layer.
type LayerInfo struct {
	// Kind is "full" or "sliding".
	Kind    string `json:"kind"`
	HeadDim int    `json:"head_dim"`
	KVHeads int    `json:"kv_heads"`
	// Source is the layer whose K/V rows this one reads (itself, or an
	// earlier owning layer of the same kind).
	Source int `json:"source"`
	FFN    int `json:"ffn"`
	// Rope names the layer's entry of ArchInfo.Ropes.
	Rope string `json:"rope"`
}

// RopeInfo is one RoPE table shape.
type RopeInfo struct {
	HeadDim int     `json:"head_dim"`
	Theta   float64 `json:"theta"`
	Pairs   int     `json:"pairs"`
	FreqDim int     `json:"freq_dim"`
	// Layout is "halves" or "interleaved"; Angle "f32" or "f64".
	Layout string `json:"layout"`
	Angle  string `json:"angle"`
}

// GeometryInfo is the bundle's fixed shapes.
type GeometryInfo struct {
	// Context is C, the full layers' slots (positions 0..C-1).
	Context int `json:"context"`
	// SlidingSlots is S, the sliding layers' ring of slots (0 without
	// sliding layers).
	SlidingSlots int `json:"sliding_slots"`
	// GenerateWidth is K, PrefillWidth N.
	GenerateWidth int `json:"generate_width"`
	PrefillWidth  int `json:"prefill_width"`
	// ArgmaxBlock is B, the ids per block of the in-graph argmax: a divisor
	// of the vocabulary, at most MaxArgmaxBlock (README "Outputs").
	ArgmaxBlock int    `json:"argmax_block"`
	RopeLayout  string `json:"rope_layout"`
}

// MaxArgmaxBlock bounds the argmax's block of ids: no reduction of a
// bundle's functions runs over more elements on one axis. The figure is
// lore, not an Apple document: ANEMLL's "ANE tensors dimension size is
// limited to 16384" and its in-model argmax over 16384-wide pieces of a
// 262144-token head, whose local winners the host compares (ANEMLL 0.3.5
// --argmax); CoreML-LLM's residency audit found the flat 262144-wide argmax
// tail on the CPU (docs/EXPERIMENTS.md).
const MaxArgmaxBlock = 16384

// TokenizerInfo names the bundle's tokenizer file.
type TokenizerInfo struct {
	// Kind is "tokenizer.json" or "gguf".
	Kind   string `json:"kind"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// FileInfo is a file of the bundle with its element type and checksum.
type FileInfo struct {
	File   string `json:"file"`
	DType  string `json:"dtype"`
	SHA256 string `json:"sha256"`
}

// SidecarInfo is an embedding table: int8 rows with per-row fp16 scales, or
// fp16 rows.
type SidecarInfo struct {
	Rows   int       `json:"rows"`
	Cols   int       `json:"cols"`
	Data   FileInfo  `json:"data"`
	Scales *FileInfo `json:"scales,omitempty"`
	// ValueScale is already applied to the stored rows (recorded so the
	// reader can check it against the architecture's embedding scale).
	ValueScale float64 `json:"value_scale"`
}

// ChunkInfo is one package of layers [Layers[0], Layers[1]).
type ChunkInfo struct {
	Index       int            `json:"index"`
	Package     string         `json:"package"`
	Layers      [2]int         `json:"layers"`
	WeightBytes int64          `json:"weight_bytes"`
	Functions   []FunctionInfo `json:"functions"`
}

// FunctionInfo is one function of a chunk package.
type FunctionInfo struct {
	Name string `json:"name"`
	// Kind is "generate" or "prefill".
	Kind    string       `json:"kind"`
	Width   int          `json:"width"`
	Inputs  []TensorInfo `json:"inputs"`
	Outputs []TensorInfo `json:"outputs"`
}

// TensorInfo is one input or output of a function.
type TensorInfo struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
	// DType is "fp16" or "int32".
	DType string `json:"dtype"`
}

// The function kinds.
const (
	KindGenerate = "generate"
	KindSample   = "sample"
	KindPrefill  = "prefill"
)

// Function returns the chunk's function of kind (generate, sample or
// prefill), nil when it has none.
func (c *ChunkInfo) Function(kind string) *FunctionInfo {
	for i := range c.Functions {
		if c.Functions[i].Kind == kind {
			return &c.Functions[i]
		}
	}
	return nil
}

// Function returns the function a call of kind runs on chunk j: a sample
// call runs the sample function on the last chunk and the generate
// function on the others (which compute the same rows whatever the caller
// does with the output projection).
func (m *Manifest) Function(j int, kind string) *FunctionInfo {
	if kind == KindSample && j < len(m.Chunks)-1 {
		kind = KindGenerate
	}
	return m.Chunks[j].Function(kind)
}

// kinds lists the function kinds of chunk j, the default first.
func (m *Manifest) kinds(j int) []string {
	if j == len(m.Chunks)-1 {
		return []string{KindGenerate, KindSample, KindPrefill}
	}
	return []string{KindGenerate, KindPrefill}
}

// ReadManifest reads and validates dir/manifest.json: the format and
// version, the architecture, the geometry and every chunk's functions,
// whose inputs and outputs must be exactly those the format derives from
// the architecture and geometry (README "Driving a bundle"). It reads no
// other file.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestName)
	raw, err := mmap.ReadFile(path, maxManifest)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	var probe struct {
		Format        *string `json:"format"`
		FormatVersion *int    `json:"format_version"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON: %w", ErrBundle, path, err)
	}
	if probe.Format == nil || *probe.Format != Format {
		got := "none"
		if probe.Format != nil {
			got = fmt.Sprintf("%q", *probe.Format)
		}
		return nil, fmt.Errorf("%w: %s: format %s is not %q (not a bundle of the anechat converter)", ErrBundle, path, got, Format)
	}
	if probe.FormatVersion != nil && *probe.FormatVersion == 1 {
		return nil, fmt.Errorf("%w: %s: format_version 1 is the older bundle format, whose generation function returns every logit; this build reads version %d: rebuild the bundle with `make bundle` (the converter of this version)", ErrBundle, path, FormatVersion)
	}
	if probe.FormatVersion == nil || *probe.FormatVersion != FormatVersion {
		got := "none"
		if probe.FormatVersion != nil {
			got = fmt.Sprint(*probe.FormatVersion)
		}
		return nil, fmt.Errorf("%w: %s: format_version %s is unknown (this build reads version %d; convert the model again with this version's converter)", ErrBundle, path, got, FormatVersion)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBundle, path, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBundle, path, err)
	}
	return &m, nil
}

// validate checks the manifest against itself: the architecture, the
// geometry, the chunk plan and every function's declared tensors.
func (m *Manifest) validate() error {
	a := &m.Arch
	if m.Architecture != "llama" && m.Architecture != "gemma4" {
		return fmt.Errorf("architecture %q is not llama or gemma4", m.Architecture)
	}
	if a.Arch != m.Architecture {
		return fmt.Errorf("arch.arch %q disagrees with architecture %q", a.Arch, m.Architecture)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"arch.vocab", a.Vocab}, {"arch.hidden", a.Hidden}, {"arch.heads", a.Heads}, {"arch.context", a.Context}} {
		if f.v <= 0 || f.v > 1<<24 {
			return fmt.Errorf("%s = %d is out of range", f.name, f.v)
		}
	}
	if !(a.Eps > 0 && a.Eps <= 1) {
		return fmt.Errorf("arch.eps = %g is out of range", a.Eps)
	}
	if len(a.Layers) == 0 || len(a.Layers) > 1024 {
		return fmt.Errorf("arch.layers has %d entries", len(a.Layers))
	}
	if a.Window < 0 || a.PLEDim < 0 || a.PLEVocab < 0 || a.Softcap < 0 || math.IsNaN(a.Softcap) {
		return fmt.Errorf("arch: negative window %d, ple_dim %d, ple_vocab %d or softcap %g", a.Window, a.PLEDim, a.PLEVocab, a.Softcap)
	}
	if a.PLEDim > 1<<16 {
		return fmt.Errorf("arch.ple_dim = %d is out of range (at most %d)", a.PLEDim, 1<<16)
	}
	for i, f := range m.Source.Files {
		// The reference executor joins these to the checkpoint directory.
		if f.File == "" || !filepath.IsLocal(filepath.FromSlash(f.File)) {
			return fmt.Errorf("source.files[%d].file %q is not a file inside the checkpoint directory", i, f.File)
		}
	}
	if a.PLEDim > 0 && a.PLEVocab != a.Vocab {
		return fmt.Errorf("arch.ple_vocab %d differs from arch.vocab %d (not supported)", a.PLEVocab, a.Vocab)
	}
	if a.BOS < -1 || a.BOS >= a.Vocab {
		return fmt.Errorf("arch.bos = %d is not a token id", a.BOS)
	}
	for _, e := range a.EOS {
		if e < 0 || e >= a.Vocab {
			return fmt.Errorf("arch.eos id %d is not a token id of the %d-token vocabulary", e, a.Vocab)
		}
	}
	sliding := false
	for i, l := range a.Layers {
		where := fmt.Sprintf("arch.layers[%d]", i)
		switch l.Kind {
		case "full":
		case "sliding":
			sliding = true
		default:
			return fmt.Errorf("%s.kind %q is not full or sliding", where, l.Kind)
		}
		if l.HeadDim <= 0 || l.HeadDim%2 != 0 || l.KVHeads <= 0 || a.Heads%l.KVHeads != 0 || l.FFN <= 0 {
			return fmt.Errorf("%s: head_dim %d, kv_heads %d (of %d heads), ffn %d are inconsistent", where, l.HeadDim, l.KVHeads, a.Heads, l.FFN)
		}
		if l.Source < 0 || l.Source > i {
			return fmt.Errorf("%s.source %d is not a layer at or before %d", where, l.Source, i)
		}
		if s := a.Layers[l.Source]; l.Source != i && (s.Source != l.Source || s.Kind != l.Kind || s.HeadDim != l.HeadDim || s.KVHeads != l.KVHeads) {
			return fmt.Errorf("%s.source %d is not an owning layer of the same kind and shape", where, l.Source)
		}
		r, ok := a.Ropes[l.Rope]
		if !ok {
			return fmt.Errorf("%s.rope %q is not in arch.ropes", where, l.Rope)
		}
		if r.HeadDim != l.HeadDim {
			return fmt.Errorf("%s: rope %q has head_dim %d, the layer %d", where, l.Rope, r.HeadDim, l.HeadDim)
		}
	}
	if sliding && a.Window <= 0 {
		return fmt.Errorf("arch.window %d: sliding layers need a window", a.Window)
	}
	for name, r := range a.Ropes {
		if r.Layout != "halves" && r.Layout != "interleaved" || r.Angle != "f32" && r.Angle != "f64" {
			return fmt.Errorf("arch.ropes[%q]: layout %q angle %q (want halves|interleaved, f32|f64)", name, r.Layout, r.Angle)
		}
		if r.Pairs < 0 || r.Pairs > r.HeadDim/2 || r.FreqDim <= 0 || !(r.Theta > 0) || math.IsInf(r.Theta, 0) {
			return fmt.Errorf("arch.ropes[%q]: pairs %d, freq_dim %d, theta %g are out of range", name, r.Pairs, r.FreqDim, r.Theta)
		}
	}

	g := &m.Geometry
	if g.Context <= 0 || g.Context > a.Context {
		return fmt.Errorf("geometry.context %d must be in 1..%d (arch.context)", g.Context, a.Context)
	}
	if g.GenerateWidth <= 0 || g.PrefillWidth <= 0 || max(g.GenerateWidth, g.PrefillWidth) > g.Context {
		return fmt.Errorf("geometry: widths %d and %d must be in 1..%d", g.GenerateWidth, g.PrefillWidth, g.Context)
	}
	want := 0
	if sliding {
		want = min(g.Context, a.Window+max(g.GenerateWidth, g.PrefillWidth))
	}
	if g.SlidingSlots != want {
		return fmt.Errorf("geometry.sliding_slots %d, want %d (min(context, window + widest function))", g.SlidingSlots, want)
	}
	if g.ArgmaxBlock < 1 || g.ArgmaxBlock > MaxArgmaxBlock || a.Vocab%g.ArgmaxBlock != 0 {
		return fmt.Errorf("geometry.argmax_block %d must divide arch.vocab %d and be in 1..%d", g.ArgmaxBlock, a.Vocab, MaxArgmaxBlock)
	}

	if err := m.validateSidecars(); err != nil {
		return err
	}
	if m.Tokenizer.File == "" || !localName(m.Tokenizer.File) || m.Tokenizer.Kind != "tokenizer.json" && m.Tokenizer.Kind != "gguf" {
		return fmt.Errorf("tokenizer: kind %q file %q (want tokenizer.json or gguf, a file in the bundle)", m.Tokenizer.Kind, m.Tokenizer.File)
	}
	return m.validateChunks()
}

func (m *Manifest) validateSidecars() error {
	a := &m.Arch
	want := map[string][2]int{"embed": {a.Vocab, a.Hidden}}
	if a.PLEDim > 0 {
		want["per_layer"] = [2]int{a.PLEVocab, len(a.Layers) * a.PLEDim}
	}
	for name := range m.Sidecars {
		if _, ok := want[name]; !ok {
			return fmt.Errorf("sidecars.%s is not a table of this architecture", name)
		}
	}
	for name, shape := range want {
		s, ok := m.Sidecars[name]
		if !ok {
			return fmt.Errorf("sidecars.%s is missing", name)
		}
		if s.Rows != shape[0] || s.Cols != shape[1] {
			return fmt.Errorf("sidecars.%s is %d x %d, want %d x %d", name, s.Rows, s.Cols, shape[0], shape[1])
		}
		if _, ok := tableBytes(s.Rows, s.Cols, 2); !ok {
			return fmt.Errorf("sidecars.%s: %d x %d values are more than a table can hold", name, s.Rows, s.Cols)
		}
		if !localName(s.Data.File) {
			return fmt.Errorf("sidecars.%s.data.file %q is not a file of the bundle", name, s.Data.File)
		}
		switch s.Data.DType {
		case "int8":
			if s.Scales == nil || s.Scales.DType != "float16" {
				return fmt.Errorf("sidecars.%s: int8 rows need scales {file, dtype: float16}", name)
			}
			if !localName(s.Scales.File) {
				return fmt.Errorf("sidecars.%s.scales.file %q is not a file of the bundle", name, s.Scales.File)
			}
		case "float16":
			if s.Scales != nil {
				return fmt.Errorf("sidecars.%s: float16 rows have no scales", name)
			}
		default:
			return fmt.Errorf("sidecars.%s.data.dtype %q is not int8 or float16", name, s.Data.DType)
		}
		if !(s.ValueScale > 0) || math.IsInf(s.ValueScale, 0) {
			return fmt.Errorf("sidecars.%s.value_scale %g is not positive", name, s.ValueScale)
		}
	}
	return nil
}

func (m *Manifest) validateChunks() error {
	L := len(m.Arch.Layers)
	if len(m.Chunks) == 0 {
		return errors.New("chunks is empty")
	}
	next := 0
	for j := range m.Chunks {
		c := &m.Chunks[j]
		if c.Index != j {
			return fmt.Errorf("chunks[%d].index is %d", j, c.Index)
		}
		if !localName(c.Package) {
			return fmt.Errorf("chunks[%d].package %q is not a package of the bundle", j, c.Package)
		}
		if c.Layers[0] != next || c.Layers[1] <= c.Layers[0] || c.Layers[1] > L {
			return fmt.Errorf("chunks[%d].layers %v: the chunks must cover layers 0..%d in order", j, c.Layers, L-1)
		}
		next = c.Layers[1]
		kinds := m.kinds(j)
		if len(c.Functions) != len(kinds) {
			return fmt.Errorf("chunks[%d] has %d functions, want %s", j, len(c.Functions), strings.Join(kinds, ", "))
		}
		for _, kind := range kinds {
			f := c.Function(kind)
			if f == nil {
				return fmt.Errorf("chunks[%d] has no %s function", j, kind)
			}
			width := m.Geometry.GenerateWidth
			if kind == KindPrefill {
				width = m.Geometry.PrefillWidth
			}
			if f.Width != width || f.Name == "" {
				return fmt.Errorf("chunks[%d] function %q: width %d, the geometry says %d", j, f.Name, f.Width, width)
			}
			ins, outs := m.ExpectedIO(j, kind)
			if err := sameTensors(ins, f.Inputs); err != nil {
				return fmt.Errorf("chunks[%d] (%s) function %s: inputs: %w", j, c.Package, f.Name, err)
			}
			if err := sameTensors(outs, f.Outputs); err != nil {
				return fmt.Errorf("chunks[%d] (%s) function %s: outputs: %w", j, c.Package, f.Name, err)
			}
		}
	}
	if next != L {
		return fmt.Errorf("chunks cover layers 0..%d of %d", next-1, L)
	}
	return nil
}

// sameTensors compares declared tensors with the expected ones, in any
// order.
func sameTensors(want, got []TensorInfo) error {
	byName := map[string]TensorInfo{}
	for _, t := range got {
		if _, dup := byName[t.Name]; dup {
			return fmt.Errorf("%q is declared twice", t.Name)
		}
		byName[t.Name] = t
	}
	for _, w := range want {
		g, ok := byName[w.Name]
		if !ok {
			return fmt.Errorf("%q is missing", w.Name)
		}
		if g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) {
			return fmt.Errorf("%q is %s%v, want %s%v", w.Name, g.DType, g.Shape, w.DType, w.Shape)
		}
		delete(byName, w.Name)
	}
	for name := range byName {
		return fmt.Errorf("%q is not part of the format", name)
	}
	return nil
}

// ExpectedIO returns the inputs and outputs the format gives function kind
// of chunk j (README "Driving a bundle"), derived from the architecture and
// geometry alone. On the last chunk: generate returns block_argmax and
// block_max [1,nb,T], sample the logits [1,nb,T,B] (before the softcap; id
// b*B+j of row t at [0,b,t,j]), prefill all three for its one row.
func (m *Manifest) ExpectedIO(j int, kind string) (ins, outs []TensorInfo) {
	a, g, c := &m.Arch, &m.Geometry, &m.Chunks[j]
	T := g.GenerateWidth
	if kind == KindPrefill {
		T = g.PrefillWidth
	}
	first, end := c.Layers[0], c.Layers[1]
	last := j == len(m.Chunks)-1
	f16 := func(name string, shape ...int) TensorInfo { return TensorInfo{Name: name, Shape: shape, DType: "fp16"} }
	ins = append(ins, f16("hidden_in", 1, T, a.Hidden))
	L, P := len(a.Layers), a.PLEDim
	if P > 0 {
		if j == 0 {
			ins = append(ins, f16("ple_rows", 1, T, L*P))
		} else {
			ins = append(ins, f16("per_layer", 1, T, L*P))
		}
	}
	var ropes, kinds []string
	var sources []int
	for i := first; i < end; i++ {
		l := a.Layers[i]
		ropes = append(ropes, l.Rope)
		kinds = append(kinds, l.Kind)
		sources = append(sources, l.Source)
	}
	slices.Sort(ropes)
	slices.Sort(kinds)
	slices.Sort(sources)
	for _, r := range slices.Compact(ropes) {
		hd := a.Ropes[r].HeadDim
		ins = append(ins, f16("rope_cos_"+r, 1, 1, T, hd), f16("rope_sin_"+r, 1, 1, T, hd))
	}
	for _, k := range slices.Compact(kinds) {
		S := m.slots(k)
		ins = append(ins, f16("mask_"+k, 1, 1, T, S), f16("place_"+k, 1, 1, S, T))
	}
	for _, s := range slices.Compact(sources) {
		ls := a.Layers[s]
		S := m.slots(ls.Kind)
		ins = append(ins, f16(fmt.Sprint("k_cache_", s), 1, ls.KVHeads, S, ls.HeadDim), f16(fmt.Sprint("v_cache_", s), 1, ls.KVHeads, S, ls.HeadDim))
		if s < first {
			ins = append(ins, f16(fmt.Sprint("k_new_", s), 1, ls.KVHeads, T, ls.HeadDim), f16(fmt.Sprint("v_new_", s), 1, ls.KVHeads, T, ls.HeadDim))
		}
	}
	if last && kind == KindPrefill {
		ins = append(ins, f16("last", 1, 1, T))
	}

	if P > 0 && j == 0 && !last {
		outs = append(outs, f16("per_layer", 1, T, L*P))
	}
	for i := first; i < end; i++ {
		if l := a.Layers[i]; l.Source == i {
			outs = append(outs, f16(fmt.Sprint("k_new_", i), 1, l.KVHeads, T, l.HeadDim), f16(fmt.Sprint("v_new_", i), 1, l.KVHeads, T, l.HeadDim))
		}
	}
	if last {
		rows := T
		if kind == KindPrefill {
			rows = 1
		}
		B := max(g.ArgmaxBlock, 1)
		nb := a.Vocab / B
		if kind != KindSample {
			outs = append(outs, TensorInfo{Name: "block_argmax", Shape: []int{1, nb, rows}, DType: "int32"}, f16("block_max", 1, nb, rows))
		}
		if kind != KindGenerate {
			outs = append(outs, f16("logits", 1, nb, rows, B))
		}
	} else {
		outs = append(outs, f16("hidden_out", 1, T, a.Hidden))
	}
	return ins, outs
}

// slots is the number of cache slots of a layer kind: C for full layers,
// S for sliding ones.
func (m *Manifest) slots(kind string) int {
	if kind == "sliding" {
		return m.Geometry.SlidingSlots
	}
	return m.Geometry.Context
}

// owners lists the layers that compute their own K/V rows.
func (m *Manifest) owners() []int {
	var o []int
	for i, l := range m.Arch.Layers {
		if l.Source == i {
			o = append(o, i)
		}
	}
	return o
}
