package coreml

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"anechat/engine/load"
	"anechat/engine/model"
)

// OpenExecutor opens the executor of an open bundle; progress, when set,
// receives the steps done and the total (a chunk function compiled and
// loaded is a step). ctx cancels it between steps.
type OpenExecutor func(ctx context.Context, b *Bundle, progress func(done, total int)) (Executor, error)

// Loader is the Core ML backend's engine/load Loader: it opens Core ML
// bundles of the anechat converter (load.CoreML sources with a
// manifest.json) and runs them through the executor Open makes.
type Loader struct {
	// Executor makes the executor: Core ML on darwin/arm64
	// (CoreMLExecutorOpener), the reference executor in tests and `anechat
	// doctor --reference`.
	Executor OpenExecutor
	// Why, when Executor is nil, says why this build cannot run bundles (the
	// platform has no Core ML): Supports reports it.
	Why string
	// Published, when set, opens a published CoreML-LLM bundle as a model
	// (engine/coreml/published: published.Opener on darwin/arm64); nil
	// refuses such bundles.
	Published OpenPublished
}

// OpenPublished opens a read published bundle as a model whose identity
// is fingerprint; progress receives its executor's steps (the functions
// loaded) and their total.
type OpenPublished func(ctx context.Context, p *Published, fingerprint string, progress func(done, total int)) (model.Backend, error)

// Name implements load.Loader.
func (Loader) Name() string { return "coreml" }

// Supports implements load.Loader: a directory holding a manifest.json of
// the anechat bundle format, on a build that can run it.
func (l Loader) Supports(src load.Source) error {
	if src.Format != load.CoreML {
		return fmt.Errorf("%s is not a Core ML bundle", src.Format)
	}
	if _, err := os.Stat(filepath.Join(src.Path, ManifestName)); err != nil {
		if IsPublished(src.Path) {
			if l.Published != nil {
				return nil
			}
			return errors.New("a CoreML-LLM bundle (model_config.json layout): this build reads it (anechat doctor describes it) but runs it only on an Apple silicon Mac with Core ML; convert the checkpoint with `make bundle` for a bundle whose one generation function makes speculation lossless by construction")
		}
		return fmt.Errorf("%s has no %s (a bundle of the anechat converter has one)", src.Path, ManifestName)
	}
	if l.Executor == nil {
		if l.Why != "" {
			return errors.New(l.Why)
		}
		return errors.New("this build cannot run Core ML bundles")
	}
	return nil
}

// loadSteps is how Open's progress divides its units: the checksums of
// the sidecars take the first tenth, the executor's steps the rest.
const loadSteps = 1000

// executorProgress maps an executor's steps (done of total) onto the
// last nine tenths of Open's units, for report.
func executorProgress(report func(done int)) func(done, total int) {
	return func(done, total int) {
		if total > 0 {
			report(loadSteps/10 + done*(loadSteps-loadSteps/10)/total)
		}
	}
}

// Open implements load.Loader: it reads and checks the bundle
// (OpenBundle), opens the executor and allocates the backend's buffers.
// opts.Progress receives done/total in thousandths; ctx cancels between
// files and between chunks.
func (l Loader) Open(ctx context.Context, src load.Source, opts load.Options) (model.Backend, error) {
	if err := l.Supports(src); err != nil {
		return nil, fmt.Errorf("coreml: %s: %w", src.Path, err)
	}
	report := func(done int) {
		if opts.Progress != nil {
			opts.Progress(min(done, loadSteps), loadSteps)
		}
	}
	if IsPublished(src.Path) {
		return l.openPublished(ctx, src, report)
	}
	b, err := OpenBundle(ctx, src.Path, func(done, total int64) {
		if total > 0 {
			report(int(done * loadSteps / 10 / total))
		}
	})
	if err != nil {
		return nil, err
	}
	report(loadSteps / 10)
	r, err := l.Executor(ctx, b, executorProgress(report))
	if err != nil {
		b.Close()
		return nil, err
	}
	be, err := NewModel(b, r, src.Fingerprint)
	if err != nil {
		r.Close()
		b.Close()
		return nil, err
	}
	report(loadSteps)
	return be, nil
}

// openPublished reads a published CoreML-LLM bundle and opens it with
// l.Published.
func (l Loader) openPublished(ctx context.Context, src load.Source, report func(int)) (model.Backend, error) {
	p, err := ReadPublished(src.Path)
	if err != nil {
		return nil, err
	}
	report(loadSteps / 10)
	be, err := l.Published(ctx, p, src.Fingerprint, executorProgress(report))
	if err != nil {
		return nil, err
	}
	report(loadSteps)
	return be, nil
}
