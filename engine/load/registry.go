package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"anechat/engine/chat"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/tokenizer"
)

// Options are a caller's choices when opening a model.
type Options struct {
	// Threads is the number of CPU workers a backend may use; 0 means one
	// per CPU.
	Threads int
	// Progress, when set, is called as a long load advances (a Core ML
	// bundle compiles for a while the first time), with done and total in
	// the backend's own units.
	Progress func(done, total int)
	// WeightsOnly opens the weights without a tokenizer (Model.Tokenizer
	// is nil): benchmarks of random-weight models that have none.
	WeightsOnly bool
}

// A Loader opens the models its backend can run. The CPU backend
// (engine/cpu) and the Core ML backend each have one; a Registry lists
// them in order of preference.
type Loader interface {
	// Name names the backend for the user ("cpu", "coreml").
	Name() string
	// Supports returns nil when the backend can open src, else an error
	// that says why not (the format or architecture it does not run).
	Supports(src Source) error
	// Open maps src's weights and validates them (tensors present, shapes
	// and metadata consistent), returning a model.Backend whose
	// Config().Fingerprint is src.Fingerprint. The result implements
	// io.Closer when it holds resources (mappings, workers). ctx cancels a
	// long load.
	Open(ctx context.Context, src Source, opts Options) (model.Backend, error)
}

// Registry is the loaders of the backends a binary was built with, in
// order of preference: a model opens on the first one that supports it.
type Registry struct {
	loaders []Loader
}

// NewRegistry returns a registry of loaders, most preferred first.
func NewRegistry(loaders ...Loader) *Registry {
	return &Registry{loaders: append([]Loader(nil), loaders...)}
}

// Loaders lists the registered loaders, most preferred first.
func (r *Registry) Loaders() []Loader { return append([]Loader(nil), r.loaders...) }

// ErrUnsupported marks a model no registered backend can run.
var ErrUnsupported = errors.New("no backend in this build runs it")

// For returns the loader src opens with: the first that supports it. The
// error, wrapping ErrUnsupported, says why each backend refused.
func (r *Registry) For(src Source) (Loader, error) {
	var why []string
	for _, b := range r.loaders {
		err := b.Supports(src)
		if err == nil {
			return b, nil
		}
		why = append(why, b.Name()+": "+err.Error())
	}
	what := string(src.Format)
	if src.Arch != "" {
		what += " " + src.Arch
	}
	if len(why) == 0 {
		return nil, fmt.Errorf("load: %s (%s): %w (no backends registered)", src.Path, what, ErrUnsupported)
	}
	return nil, fmt.Errorf("load: %s (%s): %w (%s)", src.Path, what, ErrUnsupported, strings.Join(why, "; "))
}

// Model is an open model: the backend that runs it and its tokenizer.
type Model struct {
	// Source is what Detect read of the model.
	Source Source
	// Backend runs the model; Backend.Config().Fingerprint is
	// Source.Fingerprint.
	Backend model.Backend
	// BackendName names the backend that opened it ("cpu").
	BackendName string
	// Tokenizer is the model's own tokenizer (the GGUF file's
	// tokenizer.ggml.* metadata, or tokenizer.json beside config.json).
	Tokenizer *tokenizer.Tokenizer
	// Chat is the model's own chat template, for chat.ForModel (empty
	// when the model ships none).
	Chat chat.Spec
}

// Close releases the backend's resources (mappings, workers).
func (m *Model) Close() error {
	if c, ok := m.Backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Open detects the model at path, opens it on the first backend that
// supports it and loads its tokenizer. Close the Model when done.
func (r *Registry) Open(ctx context.Context, path string, opts Options) (*Model, error) {
	src, err := Detect(path)
	if err != nil {
		return nil, err
	}
	return r.OpenSource(ctx, src, opts)
}

// OpenSource is Open for a model already detected.
func (r *Registry) OpenSource(ctx context.Context, src Source, opts Options) (*Model, error) {
	be, err := r.For(src)
	if err != nil {
		return nil, err
	}
	b, err := be.Open(ctx, src, opts)
	if err != nil {
		return nil, err
	}
	m := &Model{Source: src, Backend: b, BackendName: be.Name()}
	if fp := b.Config().Fingerprint; fp != src.Fingerprint {
		m.Close()
		return nil, fmt.Errorf("load: %s: backend %s reports fingerprint %q, want %q (a backend must keep the loader's identity)", src.Path, be.Name(), fp, src.Fingerprint)
	}
	if opts.WeightsOnly {
		return m, nil
	}
	if m.Tokenizer, err = loadTokenizer(src); err != nil {
		m.Close()
		return nil, err
	}
	if n, v := m.Tokenizer.VocabSize(), b.Config().VocabSize; n > v {
		m.Close()
		return nil, fmt.Errorf("load: %s: the tokenizer has %d tokens, the model only %d logits (the tokenizer belongs to another model)", src.Path, n, v)
	}
	if m.Chat, err = loadChatSpec(src, m.Tokenizer); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// loadTokenizer reads src's tokenizer: a GGUF file's metadata, or the
// tokenizer.json of a model directory or bundle (or a bundle's
// tokenizer.gguf, when it was converted from a GGUF file).
func loadTokenizer(src Source) (*tokenizer.Tokenizer, error) {
	if src.Format == GGUF {
		f, err := gguf.Open(src.Path)
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		defer f.Close() // the vocabulary is copied out of the mapping
		tok, err := tokenizer.FromGGUF(f)
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		return tok, nil
	}
	if src.Format == CoreML {
		// A bundle converted from a GGUF file carries that file's
		// tokenizer as a GGUF holding only the tokenizer metadata.
		p := filepath.Join(src.Path, "tokenizer.gguf")
		if _, err := os.Stat(filepath.Join(src.Path, "tokenizer.json")); err != nil {
			if _, gerr := os.Stat(p); gerr == nil {
				f, err := gguf.Open(p)
				if err != nil {
					return nil, fmt.Errorf("load: %w", err)
				}
				defer f.Close()
				tok, err := tokenizer.FromGGUF(f)
				if err != nil {
					return nil, fmt.Errorf("load: %s: %w", p, err)
				}
				return tok, nil
			}
		}
	}
	tok, err := tokenizer.Load(filepath.Join(src.Path, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("load: %s: %w", src.Path, err)
	}
	return tok, nil
}

// Info is what Inspect found: the model on disk, the backend that runs it
// and the configuration it loads with.
type Info struct {
	Source
	// Backend names the backend that opened it.
	Backend string
	// Config is the loaded model's configuration (context length,
	// vocabulary, KV geometry).
	Config model.Config
	// TokenizerFingerprint identifies its tokenizer.
	TokenizerFingerprint string
}

// Inspect validates the model at path exactly as Open loads it (detection,
// the backend's own checks of tensors and metadata, the tokenizer) and
// releases it again. Doctor and the Models page use it, so a model they list
// as healthy is one that opens. The error names the file and what is wrong.
func (r *Registry) Inspect(ctx context.Context, path string) (Info, error) {
	src, err := Detect(path)
	if err != nil {
		return Info{}, err
	}
	m, err := r.OpenSource(ctx, src, Options{Threads: 1})
	if err != nil {
		return Info{Source: src}, err
	}
	defer m.Close()
	// A chat template that does not parse, or that its limits stop on a
	// short conversation, fails every reply: report it now.
	if _, err := chat.ForModel(ctx, m.Backend.Config().Arch, m.Tokenizer, m.Chat); err != nil {
		return Info{Source: src}, fmt.Errorf("load: %s: %w", src.Path, err)
	}
	return Info{Source: src, Backend: m.BackendName, Config: m.Backend.Config(), TokenizerFingerprint: m.Tokenizer.Fingerprint()}, nil
}
