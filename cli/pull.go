package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// bundlesDir is the work folder of bundle downloads inside the models
// folder: the app's (app.BundlesDir), so a bundle pull left waiting is
// listed, resumed or cancelled in the window too, and the other way round.
const bundlesDir = app.BundlesDir

// pullRetryDelay is the wait before retrying a lost connection of a bundle
// file (tests shorten it); a GGUF file retries as the app's downloads do.
var pullRetryDelay = 2 * time.Second

// pullEvery is the least time between two progress lines.
var pullEvery = time.Second

// runPull is `anechat pull ENTRY|OWNER/REPO[@REVISION] [FILE...]`: the
// plan (pull.Make), the download with the app's code (a GGUF file through
// the app's downloads, which check and register it; a bundle as a set,
// then registered by the app's import), progress on stderr.
func runPull(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "pull", "[--hub URL] [--data-dir DIR] [--cancel] ENTRY|OWNER/REPO[@REVISION] [FILE...]")
	hubURL := hubFlag(fs)
	dataDir := fs.String("data-dir", "", "data directory whose models folder receives the model and whose database registers it (default $ANECHAT_HOME or the OS default)")
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
	if err != nil {
		return badFlag(env, "pull", err)
	}
	c, err := hub.New(hub.BaseURL(*hubURL), nil)
	if err != nil {
		return badFlag(env, "pull", err)
	}
	dir, err := storage.DataDir(*dataDir, cliLogger(env))
	if err != nil {
		return err
	}
	models := storage.ModelsPath(dir)
	if *cancel {
		return cancelPull(ctx, env, dir, models, target, pos[1:])
	}
	fmt.Fprintf(env.Stderr, "reading %s at %s on %s\n", target.Repo, target.Revision, c.URL())
	plan, err := pull.Make(ctx, c, target, pos[1:])
	if err != nil {
		return err
	}
	describePlan(env.Stderr, plan)
	if plan.GGUF != nil {
		return pullGGUF(ctx, env, c, dir, plan)
	}
	return pullBundle(ctx, env, c, dir, models, plan)
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

// appFor starts the app's services on data dir dir (no window; its own
// warnings are not the command's), for the downloads and the registry.
func appFor(ctx context.Context, env *Env, dir string, emit app.Emitter) (*app.App, error) {
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	a := app.New(app.Options{Log: log, DataDir: dir, Version: Version, Headless: true})
	a.Startup(ctx, emit)
	if info := a.System.Info(); info.StorageError != "" {
		a.Shutdown()
		return nil, errors.New(info.StorageError)
	}
	return a, nil
}

// watcher keeps the latest state of one download the app reports.
type watcher struct {
	name   string
	mu     sync.Mutex
	last   app.Download
	seen   bool
	notify chan struct{}
}

func (w *watcher) Emit(name string, data any) {
	d, ok := data.(app.Download)
	if name != app.EventDownload || !ok || d.Name != w.name {
		return
	}
	w.mu.Lock()
	w.last, w.seen = d, true
	w.mu.Unlock()
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

// pullGGUF downloads the plan's file with the app's downloads (resumed
// when an earlier pull left it paused), which check its sha256, validate
// it as a model, move it into the models folder and register it (the
// default model when there was none).
func pullGGUF(ctx context.Context, env *Env, c *hub.Client, dir string, p *pull.Plan) error {
	w := &watcher{name: p.Name, notify: make(chan struct{}, 1)}
	a, err := appFor(ctx, env, dir, w)
	if err != nil {
		return err
	}
	defer a.Shutdown()
	list, err := a.Downloads.List()
	if err != nil {
		return err
	}
	resumed := false
	for _, d := range list {
		if d.Name != p.Name || d.State != app.DownloadPaused {
			continue
		}
		if d.URL != p.GGUF.URL {
			return fmt.Errorf("a download of %s from another revision (%s) is paused: `anechat pull --cancel %s` discards it", p.Name, d.URL, p.Target.Repo)
		}
		fmt.Fprintf(env.Stderr, "resuming the paused download (%s of %s here)\n", human.Bytes(d.Received), human.Bytes(p.Size))
		if _, err := a.Downloads.Resume(p.Name); err != nil {
			return err
		}
		resumed = true
	}
	final := filepath.Join(storage.ModelsPath(dir), p.Name)
	if _, err := os.Lstat(final); err == nil && !resumed {
		// Pulled before (or put there by hand): the same bytes are only
		// registered, other bytes are not replaced.
		set := download.Set{Name: "check", Files: []download.SetFile{*p.GGUF}}
		if err := set.VerifyInstalled(ctx, filepath.Dir(final)); err != nil {
			return fmt.Errorf("%s is already in the models folder but is not %s at %s (%v): remove or rename it first", final, p.Name, short(p.Commit), err)
		}
		fmt.Fprintf(env.Stderr, "%s is already in the models folder with the tree's sha256\n", final)
		m, err := a.Models.Register(final)
		if err != nil {
			return err
		}
		return reportRegistered(env, a, &m)
	}
	if !resumed {
		if _, err := a.Downloads.Start(app.DownloadRequest{URL: p.GGUF.URL, SHA256: p.GGUF.SHA256, FileName: p.Name, Size: p.Size}); err != nil {
			return err
		}
	}
	bar := &progressLine{w: env.Stderr}
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
			bar.show(d.Received, d.Total, d.BytesPerSec, "")
		case app.DownloadVerifying:
			bar.done(d.Total, "checking the sha256 and the model")
		case app.DownloadDone:
			fmt.Fprintf(env.Stderr, "checked: sha256 %s\n", p.GGUF.SHA256)
			return reportRegistered(env, a, d.Model)
		case app.DownloadFailed:
			return errors.New(d.Error)
		case app.DownloadCancelled:
			return errors.New("the download was cancelled")
		case app.DownloadPaused:
			if d.Error != "" {
				return fmt.Errorf("%s (run the same command again to resume)", strings.TrimSuffix(d.Error, ": press Resume to continue"))
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

// pullBundle downloads the plan's set into the models folder (resuming the
// set an earlier pull left), then registers the folder with the app's
// import, which validates it as loading it would.
func pullBundle(ctx context.Context, env *Env, c *hub.Client, dir, models string, p *pull.Plan) error {
	work := filepath.Join(models, bundlesDir)
	var job *download.SetJob
	if old, err := download.OpenSet(work, models, p.Name); err == nil {
		if old.Set.Source != p.Bundle.Source {
			return fmt.Errorf("a download of %s from %s is waiting, not from %s: `anechat pull --cancel %s` discards it", p.Name, old.Set.Source, p.Bundle.Source, p.Target.Repo)
		}
		pr := old.Progress()
		fmt.Fprintf(env.Stderr, "resuming the waiting download (%s of %s here)\n", human.Bytes(pr.Received), human.Bytes(pr.Total))
		job = old
	} else {
		if _, err := os.Lstat(filepath.Join(models, p.Name)); err == nil {
			return registerInstalled(ctx, env, dir, filepath.Join(models, p.Name), p)
		}
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		if job, err = download.PrepareSet(work, models, *p.Bundle); err != nil {
			return err
		}
	}
	bar := &progressLine{w: env.Stderr}
	last := -1
	o := download.SetOptions{RetryDelay: pullRetryDelay}
	err := job.Run(ctx, o, func(sp download.SetProgress) {
		if sp.Current >= 0 && sp.Current != last {
			last = sp.Current
			f := sp.Files[sp.Current]
			bar.done(-1, "")
			fmt.Fprintf(env.Stderr, "[%d/%d] %s (%s)\n", sp.Current+1, len(sp.Files), f.Path, human.Bytes(f.Size))
		}
		bar.show(sp.Received, sp.Total, 0, "")
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(env.Stderr, "\npaused: run the same command again to resume (or add --cancel to discard it)\n")
			return context.Cause(ctx)
		}
		var fe *download.FileError
		if errors.As(err, &fe) {
			for _, f := range p.Bundle.Files {
				if f.Path == fe.Path {
					if herr := c.DownloadError(fe.Err, p.Repo, p.Commit, f.Path); herr != fe.Err {
						err = herr
					}
				}
			}
		}
		return fmt.Errorf("%w (the files checked so far are kept: run the same command again to resume, or add --cancel to discard them)", err)
	}
	bar.done(p.Size, "")
	fmt.Fprintf(env.Stderr, "checked %d files against the tree of %s and installed %s\n", len(p.Bundle.Files), p.Source(), job.Dest)
	return registerBundle(ctx, env, dir, job.Dest)
}

// registerInstalled registers a bundle folder already in the models folder
// (pulled before) once every file of the plan is there with the tree's
// checksum; a folder that differs is left alone.
func registerInstalled(ctx context.Context, env *Env, dir, dest string, p *pull.Plan) error {
	if err := p.Bundle.VerifyInstalled(ctx, dest); err != nil {
		return fmt.Errorf("%s is already in the models folder but is not %s (%v): remove or rename it first", dest, p.Source(), err)
	}
	fmt.Fprintf(env.Stderr, "%s is already in the models folder: its %d files match the tree of %s\n", dest, len(p.Bundle.Files), p.Source())
	return registerBundle(ctx, env, dir, dest)
}

// registerBundle registers the bundle folder dest with the app's import.
func registerBundle(ctx context.Context, env *Env, dir, dest string) error {
	a, err := appFor(ctx, env, dir, nil)
	if err != nil {
		return fmt.Errorf("%s was installed but not registered (%w): the app's Scan registers it", dest, err)
	}
	defer a.Shutdown()
	res, err := a.Models.Import(dest)
	if err != nil {
		return fmt.Errorf("%s was installed but not registered: %w", dest, err)
	}
	if res.Note != "" {
		fmt.Fprintf(env.Stderr, "note: %s\n", res.Note)
	}
	return reportRegistered(env, a, &res.Model)
}

// short is a commit's first 12 digits.
func short(commit string) string { return commit[:min(len(commit), 12)] }

// cancelPull discards what an interrupted pull of target left: a paused
// GGUF download or a waiting bundle set.
func cancelPull(ctx context.Context, env *Env, dir, models string, t pull.Target, files []string) error {
	work := filepath.Join(models, bundlesDir)
	names, err := download.ListSets(work)
	if err != nil {
		return err
	}
	_, repoName, _ := strings.Cut(t.Repo, "/")
	for _, n := range names {
		if t.Entry != nil && n == t.Entry.Name || t.Entry == nil && n == repoName {
			if err := download.RemoveSet(work, n); err != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "discarded the waiting download of %s\n", n)
			return nil
		}
	}
	a, err := appFor(ctx, env, dir, nil)
	if err != nil {
		return err
	}
	defer a.Shutdown()
	list, err := a.Downloads.List()
	if err != nil {
		return err
	}
	for _, d := range list {
		if d.State != app.DownloadPaused || !strings.Contains(d.URL, "/"+t.Repo+"/resolve/") {
			continue
		}
		if len(files) > 0 && !strings.Contains(strings.ToLower(d.Name), strings.ToLower(files[0])) {
			continue
		}
		if err := a.Downloads.Cancel(d.Name); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "discarded the paused download of %s\n", d.Name)
		return nil
	}
	return fmt.Errorf("no paused download of %s in %s", t.Repo, models)
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
