package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"anechat/app"
	"anechat/internal/catalog"
	"anechat/internal/download"
	"anechat/internal/hub"
	"anechat/internal/human"
	"anechat/internal/pull"
	"anechat/storage"
)

// pullEvery is the least time between two progress lines.
var pullEvery = time.Second

// runPull is `anechat pull ENTRY|OWNER/REPO[@REVISION] [FILE...]`, run by
// the window's own code with the app's services started headless: the plan
// (App.PlanPull), the download (App.StartPull: started, or the one left
// paused of the same commit resumed) with its checks and registration,
// progress on stderr from its events. Ctrl-C pauses it (the app's
// Shutdown); --cancel discards it (Downloads.Cancel).
func runPull(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "pull", "[--hub URL] [--data-dir DIR] [--cancel] ENTRY|OWNER/REPO[@REVISION] [FILE...]")
	hubURL := hubFlag(fs)
	dataDir := fs.String("data-dir", "", "data directory whose models folder receives the model, whose database registers it and whose Hugging Face token (stored in Settings) is sent for a gated repository when $"+hub.EnvToken+" is unset (default $ANECHAT_HOME or the OS default)")
	cancel := fs.Bool("cancel", false, "discard the paused download of this model (what an interrupted pull left) instead of resuming it")
	var pos []string
	for rest := args; ; {
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) == 0 {
		fmt.Fprintln(env.Stderr, "anechat pull: missing ENTRY or OWNER/REPO (`anechat search TEXT` finds one)")
		fs.Usage()
		return errUsage
	}
	cat, err := catalog.Load()
	if err != nil {
		return err
	}
	target, err := pull.ParseTarget(cat, pos[0])
	if err == nil {
		err = target.CheckFiles(pos[1:])
	}
	if err != nil {
		return badFlag(env, "pull", err)
	}
	c, err := hub.New(hub.BaseURL(*hubURL), nil)
	if err != nil {
		return badFlag(env, "pull", err)
	}
	tok, err := envHubToken()
	if err != nil {
		return err
	}
	dir, err := storage.DataDir(*dataDir, cliLogger(env))
	if err != nil {
		return err
	}
	w := &watcher{notify: make(chan struct{}, 1)}
	a, err := appFor(ctx, env, dir, *hubURL, tok, w)
	if err != nil {
		return err
	}
	defer a.Shutdown()
	if *cancel {
		return cancelPull(env, a, target, pos[1:])
	}
	fmt.Fprintf(env.Stderr, "reading %s at %s on %s\n", target.Repo, target.Revision, c.URL())
	plan, err := a.PlanPull(ctx, target, pos[1:])
	if err != nil {
		return err
	}
	describePlan(env.Stderr, plan)
	w.follow(plan.Name)
	if err := startPull(env, a, plan); err != nil {
		return err
	}
	return followPull(ctx, env, a, w, plan)
}

// describePlan says what is about to be downloaded and whether it fits.
func describePlan(w io.Writer, p *pull.Plan) {
	what := p.Name
	if p.Bundle != nil {
		what = fmt.Sprintf("%s/ (%d files)", p.Name, len(p.Bundle.Files))
	}
	fmt.Fprintf(w, "%s at commit %s: %s, %s\n", p.Repo, p.Commit, what, human.Bytes(p.Size))
	e := p.Entry
	if e == nil && p.Bundle != nil {
		e = p.Layout
	}
	if e != nil {
		f := catalog.Assess(e, p.Size, catalog.ThisMachine())
		fmt.Fprintf(w, "licence: %s (%s); this machine: %s: %s\n", e.Licence, e.LicenceURL, f.Verdict, f.Note)
		return
	}
	// A repository outside the catalog: a GGUF runs on the CPU backend, a
	// folder the Hub files under Core ML on the Neural Engine.
	guess := &catalog.Entry{Backend: catalog.BackendCPU}
	if p.Bundle != nil && (p.Info.Library == string(hub.CoreML) || slices.Contains(p.Info.Tags, string(hub.CoreML))) {
		guess.Backend = catalog.BackendCoreML
	}
	f := catalog.Assess(guess, p.Size, catalog.ThisMachine())
	fmt.Fprintf(w, "this machine: %s: %s\n", f.Verdict, f.Note)
}

// appFor starts the app's services headless on data dir dir, talking to
// the Hub hubURL names with token ($HF_TOKEN; "" for the one stored in
// Settings, if any); its own warnings are not the command's.
func appFor(ctx context.Context, env *Env, dir, hubURL, token string, emit app.Emitter) (*app.App, error) {
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	a := app.New(app.Options{Log: log, DataDir: dir, Version: Version, Headless: true, HubURL: hubURL, HubToken: token})
	a.Startup(ctx, emit)
	if info := a.System.Info(); info.StorageError != "" {
		a.Shutdown()
		return nil, errors.New(info.StorageError)
	}
	return a, nil
}

// watcher keeps the latest state of the download it follows, from the
// app's events.
type watcher struct {
	mu     sync.Mutex
	name   string
	last   app.Download
	seen   bool
	notify chan struct{}
}

// follow makes w keep the download called name.
func (w *watcher) follow(name string) {
	w.mu.Lock()
	w.name = name
	w.mu.Unlock()
}

func (w *watcher) Emit(name string, data any) {
	d, ok := data.(app.Download)
	if name != app.EventDownload || !ok {
		return
	}
	w.mu.Lock()
	mine := d.Name == w.name
	if mine {
		w.last, w.seen = d, true
	}
	w.mu.Unlock()
	if !mine {
		return
	}
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *watcher) state() (app.Download, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.seen
}

// startPull starts the plan's download as the window's Pull does (App.StartPull:
// the one an earlier pull or the window left paused, of the same commit,
// is resumed; a model already in the models folder is checked against the
// tree and registered instead of fetched, with other bytes left alone).
func startPull(env *Env, a *app.App, p *pull.Plan) error {
	d, err := a.StartPull(p)
	if err != nil {
		return err
	}
	if d.State == app.DownloadRunning && d.Received > 0 {
		fmt.Fprintf(env.Stderr, "resuming the paused download (%s of %s here)\n", human.Bytes(d.Received), human.Bytes(p.Size))
	}
	return nil
}

// followPull prints the download's progress from the app's events (each
// bundle file as it starts) until it is done, failed or paused; Ctrl-C
// pauses it, its bytes kept for the next pull.
func followPull(ctx context.Context, env *Env, a *app.App, w *watcher, p *pull.Plan) error {
	bar := &progressLine{w: env.Stderr}
	current := -1
	for {
		select {
		case <-w.notify:
		case <-ctx.Done():
			a.Shutdown() // pauses the download: its bytes stay for the next pull
			fmt.Fprintf(env.Stderr, "paused: run the same command again to resume (or add --cancel to discard it)\n")
			return context.Cause(ctx)
		}
		d, _ := w.state()
		switch d.State {
		case app.DownloadRunning:
			for i, f := range d.Files {
				if f.State == download.FileRunning && i != current {
					current = i
					bar.done(-1, "")
					fmt.Fprintf(env.Stderr, "[%d/%d] %s (%s)\n", i+1, len(d.Files), f.Path, human.Bytes(f.Size))
				}
			}
			bar.show(d.Received, d.Total, d.BytesPerSec, "")
		case app.DownloadVerifying:
			if p.Bundle != nil {
				bar.done(d.Total, "every file checked: registering the bundle")
			} else {
				bar.done(d.Total, "checking the sha256 and the model")
			}
		case app.DownloadDone:
			if p.Bundle != nil {
				fmt.Fprintf(env.Stderr, "checked %d files against the tree of %s and installed %s\n", len(p.Bundle.Files), p.Source(),
					filepath.Join(storage.ModelsPath(a.System.Info().DataDir), p.Name))
			} else {
				fmt.Fprintf(env.Stderr, "checked: sha256 %s\n", p.GGUF.SHA256)
			}
			if d.Error != "" {
				fmt.Fprintf(env.Stderr, "note: %s\n", d.Error)
			}
			return reportRegistered(env, a, d.Model)
		case app.DownloadFailed:
			return errors.New(d.Error)
		case app.DownloadCancelled:
			return errors.New("the download was cancelled")
		case app.DownloadPaused:
			if d.Error != "" {
				return errors.New(d.Advice(app.Command))
			}
		}
	}
}

// reportRegistered says which model the download registered and whether it
// became the default.
func reportRegistered(env *Env, a *app.App, m *storage.Model) error {
	if m == nil {
		return errors.New("the download finished but registered no model")
	}
	list, err := a.Models.List()
	if err != nil {
		return err
	}
	def := ""
	if list.DefaultID == m.ID {
		def = " (the default model)"
	}
	fmt.Fprintf(env.Stderr, "registered %s as model %d%s\n", m.Name, m.ID, def)
	fmt.Fprintln(env.Stdout, m.Path)
	return nil
}

// short is a commit's first 12 digits.
func short(commit string) string { return commit[:min(len(commit), 12)] }

// cancelPull discards, with the window's Cancel, the paused download of
// target an interrupted pull (or the window) left, found by the name the
// window lists it under (App.PausedPull).
func cancelPull(env *Env, a *app.App, t pull.Target, files []string) error {
	d, err := a.PausedPull(t, files)
	if err != nil {
		return err
	}
	if err := a.Downloads.Cancel(d.Name); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "discarded the paused download of %s\n", d.Name)
	return nil
}

// progressLine prints a download's progress at most every pullEvery.
type progressLine struct {
	w    io.Writer
	last time.Time
}

func (b *progressLine) show(received, total int64, perSec float64, note string) {
	now := time.Now()
	if now.Sub(b.last) < pullEvery {
		return
	}
	b.last = now
	line := human.Bytes(received)
	if total > 0 {
		line = fmt.Sprintf("%3d%%  %s of %s", received*100/total, human.Bytes(received), human.Bytes(total))
	}
	if perSec > 0 {
		line += fmt.Sprintf(", %s/s", human.Bytes(int64(perSec)))
	}
	if note != "" {
		line += ", " + note
	}
	fmt.Fprintln(b.w, "  "+line)
}

// done prints the final line of a file (total < 0: nothing, only resets
// the clock so the next file's first line shows).
func (b *progressLine) done(total int64, note string) {
	b.last = time.Time{}
	if total < 0 {
		return
	}
	b.show(total, total, 0, note)
	b.last = time.Now()
}
