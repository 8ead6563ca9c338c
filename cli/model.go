package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"anechat/app"
	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/load"
	"anechat/engine/tokenizer"
	"anechat/internal/backends"
	"anechat/storage"
)

// openModel loads the model at path on the build's backends (a Core ML
// bundle on the compute units named, "" for the Neural Engine), with its
// tokenizer and chat template; ctx (the command's: Ctrl-C, SIGTERM) stops
// the load and the template's trial renders.
func openModel(ctx context.Context, path, units string) (*loadedModel, error) {
	lm, err := backends.RegistryWith(backends.Options{ComputeUnits: units}).Open(ctx, path, load.Options{})
	if err != nil {
		return nil, err
	}
	b, tok := lm.Backend, lm.Tokenizer
	m := &loadedModel{backend: b}
	tmpl, err := chat.ForModel(ctx, b.Config().Arch, tok, lm.Chat)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.codec = &tokCodec{tok: tok, tmpl: tmpl}
	return m, nil
}

// tokCodec is a textCodec over the engine's tokenizer and chat template.
type tokCodec struct {
	tok  *tokenizer.Tokenizer
	tmpl chat.Template
}

func (c *tokCodec) raw(text string) []int32 { return engine.RawPrompt(c.tok, text) }

func (c *tokCodec) chatPrompt(ctx context.Context, user string) ([]int32, error) {
	return c.tmpl.Render(ctx, []chat.Message{{Role: chat.RoleUser, Content: user}}, true)
}

func (c *tokCodec) stops() []int32 { return c.tmpl.Stops() }

func (c *tokCodec) stream() engine.TextStream { return c.tok.NewStream() }

// defaultModelPath is the model to run when --model is not given: the data
// directory's default model (the one the app's Models page marks), else the
// model a scan of its models folder would make the default (the bundled
// SmolLM2 if it is there, else the first that loads). The error says what to
// do when there is none.
func defaultModelPath(ctx context.Context, dataDirFlag string, log *slog.Logger) (string, error) {
	dir, err := storage.DataDir(dataDirFlag, log)
	if err != nil {
		return "", fmt.Errorf("no --model given, and the data directory is unusable: %w", err)
	}
	if d, err := storage.Open(ctx, storage.DBPath(dir)); err == nil {
		m, ok, err := d.DefaultModel(ctx)
		d.Close()
		if err == nil && ok {
			if _, serr := os.Stat(m.Path); serr == nil {
				return m.Path, nil
			}
			log.Warn("the default model's file is gone; looking in the models folder", "path", m.Path)
		}
	}
	found, _, err := app.ScanDir(ctx, backends.Registry(), storage.ModelsPath(dir))
	if err != nil {
		return "", fmt.Errorf("no --model given: %w", err)
	}
	for _, f := range found {
		if filepath.Base(f.Path) == app.BundledChatModel {
			return f.Path, nil
		}
	}
	if len(found) > 0 {
		return found[0].Path, nil
	}
	return "", fmt.Errorf("no --model given and the data directory %s has no model: pass --model PATH, or put a .gguf file in %s (`make run` fetches SmolLM2 there) or choose a default on the app's Models page",
		dir, storage.ModelsPath(dir))
}

// useDefaultModel fills in --model from the data directory when it was not
// given (defaultModelPath).
func (g genFlags) useDefaultModel(ctx context.Context, dataDir string, log *slog.Logger) error {
	if *g.model != "" {
		return nil
	}
	p, err := defaultModelPath(ctx, dataDir, log)
	if err != nil {
		return err
	}
	*g.model = p
	return nil
}

// noCacheFlag adds --no-cache, which means the same for every command that
// has it: nothing the data directory keeps between runs is read or written,
// neither KV snapshots nor the speculative decoder's measured call costs.
// (A server still resumes a request from the previous one in memory.)
func noCacheFlag(fs interface {
	Bool(string, bool, string) *bool
}) *bool {
	return fs.Bool("no-cache", false, "use nothing the data directory keeps between runs: no KV snapshots (neither resumed from nor saved) and no measured call costs (measured afresh, not stored)")
}

// computeUnitsFlag adds --compute-units, the Core ML setting of the app's
// Settings page, to a command that loads a model.
func computeUnitsFlag(fs interface {
	String(string, string, string) *string
}) *string {
	return fs.String("compute-units", "", "for a Core ML bundle: where Core ML may run it: neural-engine (default), gpu, cpu or all (GGUF and safetensors models run on the CPU backend and ignore it)")
}

// checkComputeUnits rejects a --compute-units value Core ML has no setting
// for, on every platform: a typo fails on Linux too, not only on a Mac.
func checkComputeUnits(s string) error {
	if _, err := mlcore.ParseComputeUnits(s); err != nil {
		return fmt.Errorf("--compute-units %q: want neural-engine, gpu, cpu or all", s)
	}
	return nil
}
