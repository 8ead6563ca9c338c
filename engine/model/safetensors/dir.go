package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"anechat/engine/model/mmap"
)

// Open memory-maps the .safetensors file at path and parses its header. On
// systems without mmap the file is read into memory instead.
// A file truncated while it is parsed gives an error wrapping
// mmap.ErrChanged.
func Open(path string) (*File, error) {
	m, err := mmap.Map(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: open %s: %w", path, err)
	}
	f, err := parseMapped(m)
	if err != nil {
		m.Close()
		return nil, err
	}
	f.mapping = m
	return f, nil
}

func parseMapped(m *mmap.Mapping) (f *File, err error) {
	defer mmap.Guard(&err, m)()
	return Parse(m.Path(), m.Data())
}

// MaxConfig bounds config.json and the shard index, which are read whole:
// real ones are KiBs (an index of a model of thousands of tensors, a few
// MiB).
const MaxConfig = 64 << 20

// IndexName is the file that lists which shard holds each tensor of a
// sharded checkpoint.
const IndexName = "model.safetensors.index.json"

// Dir is an open Hugging Face model directory: its config.json and the
// tensors of all its weight files.
type Dir struct {
	path   string
	config []byte
	files  []*File
	where  map[string]*File // tensor name -> file
}

// OpenDir opens the model directory dir: config.json (required) and the
// weight files, which are those named by model.safetensors.index.json when
// it exists, else every *.safetensors file in dir. A tensor name may appear
// in only one file. Weights stay mapped until Close.
func OpenDir(dir string) (*Dir, error) {
	cfgPath := filepath.Join(dir, "config.json")
	cfg, err := mmap.ReadFile(cfgPath, MaxConfig)
	if err != nil {
		return nil, fmt.Errorf("safetensors: model directory %s: %w", dir, err)
	}
	if !json.Valid(cfg) {
		return nil, fmt.Errorf("safetensors: %s is not valid JSON", cfgPath)
	}
	names, err := weightFiles(dir)
	if err != nil {
		return nil, err
	}
	d := &Dir{path: dir, config: cfg, where: map[string]*File{}}
	for _, name := range names {
		f, err := Open(filepath.Join(dir, name))
		if err != nil {
			d.Close()
			return nil, err
		}
		d.files = append(d.files, f)
		for _, t := range f.tensors {
			if g, dup := d.where[t.Name]; dup {
				d.Close()
				return nil, fmt.Errorf("safetensors: tensor %q is in both %s and %s", t.Name, g.path, f.path)
			}
			d.where[t.Name] = f
		}
	}
	return d, nil
}

// weightFiles lists the weight files of dir (base names, sorted).
func weightFiles(dir string) ([]string, error) {
	idxPath := filepath.Join(dir, IndexName)
	if idx, err := mmap.ReadFile(idxPath, MaxConfig); err == nil {
		var ix struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(idx, &ix); err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", idxPath, err)
		}
		seen := map[string]bool{}
		var names []string
		for tensor, file := range ix.WeightMap {
			if file == "" || filepath.Base(file) != file {
				return nil, fmt.Errorf("safetensors: %s: tensor %q maps to %q, which is not a file name in the directory", idxPath, tensor, file)
			}
			if !seen[file] {
				seen[file] = true
				names = append(names, file)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("safetensors: %s lists no weight files", idxPath)
		}
		sort.Strings(names)
		return names, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("safetensors: model directory %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".safetensors" && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("safetensors: model directory %s has no .safetensors files", dir)
	}
	sort.Strings(names)
	return names, nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// Config returns the raw bytes of config.json.
func (d *Dir) Config() []byte { return d.config }

// Files lists the paths of config.json and the weight files (what the
// model's fingerprint covers).
func (d *Dir) Files() []string {
	out := []string{filepath.Join(d.path, "config.json")}
	for _, f := range d.files {
		out = append(out, f.path)
	}
	return out
}

// Tensors lists every tensor of every weight file, in name order.
func (d *Dir) Tensors() []TensorInfo {
	var out []TensorInfo
	for _, f := range d.files {
		out = append(out, f.tensors...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Tensor returns the description of the named tensor.
func (d *Dir) Tensor(name string) (TensorInfo, bool) {
	f, ok := d.where[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensor(name)
}

// TensorData returns the raw bytes of the named tensor, aliasing the
// mapping (valid until Close). The error for an absent tensor wraps
// ErrMissing.
func (d *Dir) TensorData(name string) ([]byte, error) {
	f, ok := d.where[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: %w: %q", d.path, ErrMissing, name)
	}
	return f.TensorData(name)
}

// Float32s returns the named tensor converted to float32 (a copy), with its
// description. It fails for an absent tensor (wrapping ErrMissing) and for
// types other than F32, F16 and BF16.
func (d *Dir) Float32s(name string) ([]float32, TensorInfo, error) {
	t, ok := d.Tensor(name)
	if !ok {
		return nil, TensorInfo{}, fmt.Errorf("safetensors: %s: %w: %q", d.path, ErrMissing, name)
	}
	data, err := d.TensorData(name)
	if err != nil {
		return nil, t, err
	}
	v, err := Float32s(t, data)
	return v, t, err
}

// Unread lists, in name order, the tensors of every weight file whose data
// no caller has asked for (TensorData, Float32s) since the directory was
// opened. A loader that binds every weight it uses calls it last and
// rejects the checkpoint when a tensor of its model is left: one nobody
// binds is one the model would silently ignore (layers past
// num_hidden_layers, weights of another variant), and it would compute
// garbage.
func (d *Dir) Unread() []TensorInfo {
	var out []TensorInfo
	for _, f := range d.files {
		out = append(out, f.Unread()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Mappings lists the memory mappings of the weight files, for callers that
// guard their reads of tensor data against a file changed on disk
// (mmap.Guard) or check the files before use (Mapping.Check).
func (d *Dir) Mappings() []*mmap.Mapping {
	var out []*mmap.Mapping
	for _, f := range d.files {
		if f.mapping != nil {
			out = append(out, f.mapping)
		}
	}
	return out
}

// Close unmaps every weight file.
func (d *Dir) Close() error {
	var first error
	for _, f := range d.files {
		if err := f.Close(); err != nil && first == nil {
			first = fmt.Errorf("safetensors: close %s: %w", f.path, err)
		}
	}
	d.files, d.where = nil, nil
	return first
}
