package coreml

import (
	"context"
	"fmt"
	"path/filepath"

	"anechat/engine/arch/gemma4"
	"anechat/engine/arch/llama"
	"anechat/engine/model"
	"anechat/engine/model/mmap"
)

// Bundle is an open bundle: its validated manifest, the architecture plan
// the host builds inputs by, and the mapped sidecars. The chunk packages
// are loaded by an Executor.
type Bundle struct {
	// Dir is the bundle directory.
	Dir string
	// Manifest is its manifest.json, validated.
	Manifest *Manifest
	plan     *plan
	embed    *Sidecar
	ple      *Sidecar // nil without per-layer embeddings
}

// OpenBundle reads the bundle in dir: the manifest (format, version,
// architecture, every function's shapes), the architecture it describes
// checked against engine/arch, every file it names present, and the sha256
// of the sidecars and the tokenizer. progress, when set, receives the bytes
// checksummed so far and the total; ctx cancels the checks. Every error
// wraps ErrBundle (or is ctx's) and names the file and what is wrong.
func OpenBundle(ctx context.Context, dir string, progress func(done, total int64)) (_ *Bundle, err error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	p, err := planFor(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBundle, filepath.Join(dir, ManifestName), err)
	}
	// Every entry the manifest names must lie inside the bundle, symbolic
	// links followed, before anything is opened.
	for j, c := range m.Chunks {
		field := fmt.Sprintf("chunks[%d].package", j)
		pkg, err := insideBundle(dir, field, c.Package)
		if err != nil {
			return nil, err
		}
		if !statDir(pkg) {
			return nil, fmt.Errorf("%w: %s (%s) is missing or not a directory: the bundle is incomplete", ErrBundle, pkg, field)
		}
		if _, err := mmap.Stat(filepath.Join(pkg, "Manifest.json")); err != nil {
			if _, err2 := mmap.Stat(filepath.Join(pkg, "coremldata.bin")); err2 != nil {
				return nil, fmt.Errorf("%w: %s (%s) is not a Core ML package (no Manifest.json): the bundle is incomplete", ErrBundle, pkg, field)
			}
		}
	}
	if f := m.ChatTemplate.File; f != "" {
		p, err := insideBundle(dir, "chat_template.file", f)
		if err != nil {
			return nil, err
		}
		if _, err := mmap.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: chat_template.file: %w", ErrBundle, err)
		}
	}
	tok, err := insideBundle(dir, "tokenizer.file", m.Tokenizer.File)
	if err != nil {
		return nil, err
	}
	files := []checksum{{tok, m.Tokenizer.SHA256, "tokenizer.sha256"}}
	for _, name := range []string{"embed", "per_layer"} {
		s, ok := m.Sidecars[name]
		if !ok {
			continue
		}
		p, err := insideBundle(dir, "sidecars."+name+".data.file", s.Data.File)
		if err != nil {
			return nil, err
		}
		files = append(files, checksum{p, s.Data.SHA256, "sidecars." + name + ".data.sha256"})
		if s.Scales != nil {
			if p, err = insideBundle(dir, "sidecars."+name+".scales.file", s.Scales.File); err != nil {
				return nil, err
			}
			files = append(files, checksum{p, s.Scales.SHA256, "sidecars." + name + ".scales.sha256"})
		}
	}
	b := &Bundle{Dir: dir, Manifest: m, plan: p}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	// Sizes first (cheap, and a truncated file gets the clearer message),
	// then the checksums.
	if b.embed, err = openSidecar(dir, "embed", m.Sidecars["embed"]); err != nil {
		return nil, err
	}
	if s, ok := m.Sidecars["per_layer"]; ok {
		if b.ple, err = openSidecar(dir, "per_layer", s); err != nil {
			return nil, err
		}
	}
	if err := verifyFiles(ctx, files, progress); err != nil {
		return nil, err
	}
	return b, nil
}

// CheckBundle checks the bundle in dir as fully as a machine without Core
// ML can (everything but running its functions): for a bundle of the
// anechat converter, what OpenBundle checks (the manifest and the
// architecture it describes, every chunk package, sidecar, tokenizer and
// chat template present, a regular file or package inside the bundle, of
// the size the manifest implies and with its sha256); for a CoreML-LLM
// bundle, what ReadPublished checks. It returns what it found, for a
// report (`anechat doctor --bundle` where there is no Neural Engine).
// Errors wrap ErrBundle (or are ctx's) and name the file and the field.
func CheckBundle(ctx context.Context, dir string) (string, error) {
	if IsPublished(dir) {
		p, err := ReadPublished(dir)
		if err != nil {
			return "", err
		}
		return p.Describe(), nil
	}
	b, err := OpenBundle(ctx, dir, nil)
	if err != nil {
		return "", err
	}
	defer b.Close()
	m := b.Manifest
	return fmt.Sprintf("a bundle of the anechat converter (%s, %d layers, context %d, generate width %d, prefill width %d, %s weights): its manifest, %d chunk packages, sidecars and tokenizer check out (shapes, sizes, sha256)",
		m.Architecture, len(m.Arch.Layers), m.Geometry.Context, m.Geometry.GenerateWidth, m.Geometry.PrefillWidth, m.Converter.Weights, len(m.Chunks)), nil
}

// Config is the model the bundle runs (without a fingerprint: engine/load
// sets it).
func (b *Bundle) Config() model.Config {
	c := b.plan.cfg
	c.EOS = append([]int32(nil), c.EOS...)
	return c
}

// PackagePath is the path of chunk j's package.
func (b *Bundle) PackagePath(j int) string { return filepath.Join(b.Dir, b.Manifest.Chunks[j].Package) }

// Embed and PerLayer are the embedding tables (PerLayer is nil without
// per-layer embeddings).
func (b *Bundle) Embed() *Sidecar    { return b.embed }
func (b *Bundle) PerLayer() *Sidecar { return b.ple }

// checkFiles reports a sidecar that changed on disk since it was mapped.
func (b *Bundle) checkFiles() error {
	for _, s := range []*Sidecar{b.embed, b.ple} {
		if s != nil {
			if err := s.Check(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *Bundle) mappings() []*mmap.Mapping {
	var out []*mmap.Mapping
	for _, s := range []*Sidecar{b.embed, b.ple} {
		if s != nil {
			out = append(out, s.Mappings()...)
		}
	}
	return out
}

// Close unmaps the sidecars.
func (b *Bundle) Close() error {
	var first error
	for _, s := range []*Sidecar{b.embed, b.ple} {
		if s != nil {
			if err := s.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	b.embed, b.ple = nil, nil
	return first
}

// Arch returns the architecture the bundle runs, as engine/arch describes
// it: exactly one of the two is not nil.
func (b *Bundle) Arch() (g *gemma4.Config, l *llama.Config) { return b.plan.Gemma4, b.plan.Llama }
