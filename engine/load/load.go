// Package load says what a model on disk is and opens it on a backend. It owns
// the three questions every caller of the engine used to answer for itself:
//
//   - what format and architecture a path holds (Detect: a .gguf file, a
//     Hugging Face safetensors directory, a Core ML bundle);
//   - the model's one identity (Source.Fingerprint), which KV snapshots, the
//     models table and the speculative decoder's cost tables are all bound to;
//   - whether it will load, and on which backend (Registry.Inspect validates
//     a model exactly as Registry.Open loads it, so `anechat doctor` and the
//     Models page never list as healthy a model that does not open).
//
// Backends register their Loader with a Registry (internal/backends builds
// the one for this binary); this package imports none of them, so a second
// backend reuses the detection, the identity and the tokenizer loading
// instead of copying them.
package load

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
	"anechat/engine/model/safetensors"
)

// Format is how a model is stored on disk.
type Format string

// The formats Detect recognises.
const (
	// GGUF is one .gguf file (the llama.cpp format): weights, metadata and
	// the tokenizer in one file.
	GGUF Format = "gguf"
	// Safetensors is a Hugging Face directory: config.json, *.safetensors
	// and tokenizer.json.
	Safetensors Format = "safetensors"
	// CoreML is a Core ML bundle: a directory with manifest.json beside
	// its .mlpackage/.mlmodelc chunks, or a lone .mlpackage/.mlmodelc.
	CoreML Format = "coreml"
)

// Source is a model on disk as Detect read it: its format, what it declares
// and its identity. No weights are mapped while a Source exists.
type Source struct {
	// Path is the .gguf file or the model directory.
	Path string
	// Format is how the model is stored.
	Format Format
	// Arch is the architecture the model declares (GGUF
	// general.architecture, config.json model_type); "" when it declares
	// none.
	Arch string
	// Name is a readable name: the file name without .gguf, or the
	// directory's name. (A GGUF's general.name is often an internal
	// training label; see DeclaredName.)
	Name string
	// DeclaredName is the name the model gives itself (GGUF general.name),
	// "" when it gives none.
	DeclaredName string
	// Quant names the weights' storage: a GGUF file's declared mix
	// (general.file_type: "Q4_K_M", "Q4_1"), else the type of most of its
	// weight bytes ("F32"), or a safetensors dtype ("BF16"); "" when
	// unknown.
	Quant string
	// Files are the files whose contents make the model, in the order the
	// fingerprint hashes them.
	Files []string
	// SizeBytes is the size of the model on disk (every regular file of a
	// directory).
	SizeBytes int64
	// Params is the number of weights the headers declare (the elements of
	// every tensor); 0 when unknown (a Core ML bundle).
	Params int64
	// Fingerprint is the model's one identity (Fingerprint of Files).
	Fingerprint string
}

// ErrNotModel marks a path that is not a model at all (a README, a folder
// without config.json): a scan skips it instead of reporting a problem.
var ErrNotModel = errors.New("not a model")

// Detect reads what kind of model path is, its declared architecture and its
// fingerprint. It maps no weights; headers are parsed and checked. A path that
// is not a model gives an error wrapping ErrNotModel; a model that is
// damaged gives an error naming the file and what is wrong.
func Detect(path string) (Source, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Source{}, fmt.Errorf("load: %w", err)
	}
	base := filepath.Base(path)
	src := Source{Path: path}
	switch {
	case !st.IsDir() && strings.EqualFold(filepath.Ext(path), ".gguf"):
		src.Format, src.Name = GGUF, strings.TrimSuffix(base, filepath.Ext(base))
		err = detectGGUF(&src)
	case st.IsDir() && isCoreML(path):
		src.Format, src.Name = CoreML, strings.TrimSuffix(base, filepath.Ext(base))
		err = detectCoreML(&src)
	case st.IsDir():
		if _, serr := os.Stat(filepath.Join(path, "config.json")); serr != nil {
			if errors.Is(serr, fs.ErrNotExist) {
				return Source{}, fmt.Errorf("load: %s: %w (a model directory needs config.json)", path, ErrNotModel)
			}
			return Source{}, fmt.Errorf("load: %w", serr)
		}
		src.Format, src.Name = Safetensors, base
		err = detectSafetensors(&src)
	default:
		return Source{}, fmt.Errorf("load: %s: %w (want a .gguf file, a directory with config.json, or a Core ML bundle)", path, ErrNotModel)
	}
	if err != nil {
		return Source{}, err
	}
	root := path
	if src.Format == GGUF {
		root = filepath.Dir(path)
	}
	if src.Fingerprint, err = Fingerprint(root, src.Files...); err != nil {
		return Source{}, fmt.Errorf("load: %s: %w", path, err)
	}
	return src, nil
}

// isCoreML reports whether dir is a Core ML bundle: a compiled or packaged
// model itself, or a directory whose manifest.json describes chunks.
func isCoreML(dir string) bool {
	base := filepath.Base(dir)
	if strings.HasSuffix(base, ".mlmodelc") || strings.HasSuffix(base, ".mlpackage") {
		return true
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return false
	}
	for _, name := range []string{"manifest.json", "model_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

func detectGGUF(src *Source) error {
	f, err := gguf.Open(src.Path)
	if err != nil {
		return fmt.Errorf("load: %s is not a readable GGUF file: %w", src.Path, err)
	}
	defer f.Close()
	arch, err := f.String("general.architecture")
	if err != nil {
		return fmt.Errorf("load: %s: %w (the file does not say which architecture it is)", src.Path, err)
	}
	src.Arch = arch
	if name, err := f.String("general.name"); err == nil {
		src.DeclaredName = strings.TrimSpace(name)
	}
	bytes := map[string]int64{}
	for _, t := range f.Tensors() {
		src.Params += int64(t.Elements())
		if len(t.Dims) >= 2 {
			bytes[t.Type.String()] += t.Size
		}
	}
	src.Quant = largest(bytes)
	// The file's own word for its mix (llama.cpp's general.file_type)
	// wins: a Q4_K_M file keeps its embedding in Q8_0 or Q6_K, often the
	// most bytes of a small model, and Q4_K_M is what its name and every
	// other tool (Ollama, LM Studio) call it.
	if ft, err := f.Uint32("general.file_type"); err == nil {
		if name, ok := fileTypes[ft]; ok {
			src.Quant = name
		}
	}
	src.Files, src.SizeBytes = []string{src.Path}, f.Size()
	return nil
}

func detectSafetensors(src *Source) error {
	raw, err := mmap.ReadFile(filepath.Join(src.Path, "config.json"), safetensors.MaxConfig)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	var c struct {
		ModelType  string `json:"model_type"`
		TextConfig struct {
			ModelType string `json:"model_type"`
		} `json:"text_config"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("load: %s: config.json is not valid JSON: %w", src.Path, err)
	}
	src.Arch = c.ModelType
	if src.Arch == "" {
		src.Arch = c.TextConfig.ModelType
	}
	d, err := safetensors.OpenDir(src.Path)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer d.Close()
	bytes := map[string]int64{}
	for _, t := range d.Tensors() {
		src.Params += int64(t.Elements())
		if len(t.Shape) >= 2 {
			bytes[string(t.DType)] += int64(t.Elements() * t.DType.Size())
		}
	}
	src.Quant = largest(bytes)
	src.Files, src.SizeBytes = d.Files(), dirSize(src.Path)
	return nil
}

func detectCoreML(src *Source) error {
	var files []string
	err := filepath.WalkDir(src.Path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load: %s: %w", src.Path, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("load: %s: the Core ML bundle holds no files", src.Path)
	}
	sort.Strings(files)
	src.Files, src.SizeBytes = files, dirSize(src.Path)
	for _, name := range []string{"manifest.json", "model_config.json"} {
		raw, err := mmap.ReadFile(filepath.Join(src.Path, name), safetensors.MaxConfig)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("load: %s: %w", src.Path, err)
		}
		var m struct {
			Arch      string `json:"architecture"`
			ModelType string `json:"model_type"`
			Config    struct {
				ModelType string `json:"model_type"`
			} `json:"config"`
		}
		if json.Unmarshal(raw, &m) == nil {
			for _, a := range []string{m.Arch, m.ModelType, m.Config.ModelType} {
				if a != "" {
					src.Arch = a
					break
				}
			}
		}
		break
	}
	return nil
}

// largest returns the key with the most bytes ("" for none; ties by name).
// fileTypes names GGUF's general.file_type values (llama.cpp's llama_ftype,
// as gguf-py's LlamaFileType lists them; retired values left out).
var fileTypes = map[uint32]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
	16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
	22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
	28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
	37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0",
}

func largest(bytes map[string]int64) string {
	best, n := "", int64(-1)
	for k, v := range bytes {
		if v > n || (v == n && k < best) {
			best, n = k, v
		}
	}
	return best
}

// dirSize adds up the regular files under dir (best effort: it is shown,
// not relied on).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
