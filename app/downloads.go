package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"anechat/internal/atomicfile"
	"anechat/internal/download"
	"anechat/internal/hub"
	"anechat/storage"
)

// EventDownload carries a Download: its state or progress changed.
const EventDownload = "download:update"

// Download states.
const (
	DownloadRunning   = "running"
	DownloadPaused    = "paused"    // kept on disk; Resume continues it (also after a restart)
	DownloadVerifying = "verifying" // complete: checking the checksum and the model
	DownloadDone      = "done"      // the model is registered (Download.Model)
	DownloadFailed    = "failed"    // nothing is left on disk; Error says why
	DownloadCancelled = "cancelled" // stopped by the user; nothing is left on disk
)

// Download is one model download as the Models page shows it.
type Download struct {
	// Name is the file name the model gets in the models folder; it
	// identifies the download.
	Name string `json:"name"`
	URL  string `json:"url"`
	// SHA256 is the checksum the file must have, "" when none was given.
	SHA256 string `json:"sha256"`
	State  string `json:"state"`
	// Received and Total are bytes (Total -1 while unknown).
	Received int64 `json:"received"`
	Total    int64 `json:"total"`
	// BytesPerSec is the recent speed, ETASeconds the time left at it (-1
	// while unknown); both 0 when not running.
	BytesPerSec float64 `json:"bytesPerSec"`
	ETASeconds  float64 `json:"etaSeconds"`
	// StalledSeconds is how long nothing has arrived while running, once
	// that is at least a few seconds (0 while bytes flow), so that the
	// window says the server went quiet instead of showing the last speed.
	StalledSeconds float64 `json:"stalledSeconds"`
	// Error says why it failed, or why it paused by itself (the connection
	// was lost: Resume continues).
	Error string `json:"error"`
	// Model is the registered model once done.
	Model *storage.Model `json:"model"`
	// Files is each file's progress when the download is a bundle (a
	// folder of files fetched as one set, each checked against its
	// checksum, installed into the models folder at once when all are
	// there); none for a one-file download.
	Files []download.FileProgress `json:"files,omitempty"`
	// Source says where a bundle comes from (OWNER/NAME@COMMIT); "" for a
	// one-file download (URL says it).
	Source string `json:"source"`
	// Cause is why a download paused by itself, without what to do, and
	// Remedy what continues it; Error is the two in the window's words
	// (Advice(Window)), `anechat pull` says them in its own
	// (Advice(Command)). Both "" otherwise.
	Cause  string `json:"-"`
	Remedy Remedy `json:"-"`
}

// Remedy is what continues a download that paused by itself; each place
// that shows it says it in its own words (Words).
type Remedy string

// Remedies.
const (
	// RemedyResume: the connection was lost; resuming goes on from the
	// bytes kept.
	RemedyResume Remedy = "resume"
	// RemedyFreeSpace: the disk is (nearly) full; free space, then resume.
	RemedyFreeSpace Remedy = "free-space"
	// RemedyRetry: a bundle's file failed (its check, or the Hub refused
	// it); resuming fetches it again, the files checked so far kept.
	RemedyRetry Remedy = "retry"
)

// Surface is where a message is read.
type Surface int

// Surfaces.
const (
	Window  Surface = iota // the Models page: its Resume and Cancel buttons
	Command                // `anechat pull`: the same command again, --cancel
)

// Words says what to do in the surface's words.
func (r Remedy) Words(s Surface) string {
	cmd := s == Command
	switch r {
	case RemedyResume:
		if cmd {
			return "run the same command again to resume (or add --cancel to discard it)"
		}
		return "press Resume to continue"
	case RemedyFreeSpace:
		if cmd {
			return "free some space, then run the same command again to resume (or add --cancel to discard it)"
		}
		return "free some space, then press Resume"
	case RemedyRetry:
		if cmd {
			return "the files checked so far are kept: run the same command again to try again, or add --cancel to discard them"
		}
		return "the files checked so far are kept; press Resume to try again, or Cancel"
	}
	return ""
}

// Advice is why d paused by itself and what to do, in the surface's
// words; Error as it is when d did not pause by itself.
func (d Download) Advice(s Surface) string {
	if d.Remedy == "" {
		return d.Error
	}
	return d.Cause + ": " + d.Remedy.Words(s)
}

// DownloadRequest is what Downloads.Start takes.
type DownloadRequest struct {
	// URL is an https URL of a .gguf file, e.g. a Hugging Face
	// https://huggingface.co/OWNER/REPO/resolve/main/FILE.gguf link
	// (redirects are followed, each held to the same rule).
	URL string `json:"url"`
	// SHA256 is the file's checksum (64 hex digits), "" to skip the check.
	SHA256 string `json:"sha256"`
	// FileName overrides the name taken from the URL's last path segment.
	FileName string `json:"fileName"`
	// Size is the file's size in bytes when the caller knows it (a
	// catalog's), 0 when not: a server announcing another size or sending
	// more is refused.
	Size int64 `json:"size"`
}

// Downloads is the model download service: files come into the models
// folder through a partial file in its hidden .downloads folder (with a
// small sidecar holding the URL and the server's validators), resume with
// HTTP range requests after a pause, a lost connection or a restart, are
// checked against the given SHA-256, renamed into place atomically and
// validated by the loader before they are registered. A partial download is
// never a model: the scan skips the hidden folder and .part files.
type Downloads struct {
	c      *core
	models *Models

	mu   sync.Mutex
	jobs map[string]*dlJob // by name
	wg   sync.WaitGroup

	// Knobs tests turn: retries after a lost connection before pausing,
	// the wait before each, the least time between progress events, how
	// long a response may send nothing before it is dropped and retried
	// (0: download.DefaultStall), and how often a running download's speed
	// is brought up to date when no bytes arrive and how long a quiet spell
	// lasts before the window is told.
	retries       int
	retryDelay    time.Duration
	progressEvery time.Duration
	stall         time.Duration
	tickEvery     time.Duration
	stallShown    time.Duration
	// The bounds on what a download writes (download.Options): the most
	// bytes of a file of unknown size, the free space kept on the models
	// folder's volume (0: the download package's defaults) and what reports
	// that space (nil: the disk's).
	maxSize int64
	reserve int64
	space   func(dir string) (free, size int64, err error)
}

// dlJob is one download's state; mu guards it (Downloads.mu guards the map).
type dlJob struct {
	mu   sync.Mutex
	d    Download
	meta download.Meta
	// set is a bundle's set on disk (its work folder under BundlesDir);
	// nil for a one-file download.
	set    *download.SetJob
	cancel context.CancelCauseFunc // nil while not running
	done   chan struct{}           // closed when the running transfer ends
	// samples are recent (time, bytes) points for the speed.
	samples  []sample
	lastSent time.Time
	lastByte time.Time // when bytes last arrived (or the transfer started)
}

type sample struct {
	at    time.Time
	bytes int64
}

// Why a transfer's context ended.
var (
	errPaused    = errors.New("paused")
	errCancelled = errors.New("cancelled")
	errShutdown  = errors.New("the app is closing")
)

// Default knobs.
const (
	defaultRetries       = 3
	defaultRetryDelay    = 2 * time.Second
	defaultProgressEvery = 250 * time.Millisecond
	defaultTickEvery     = time.Second
	speedWindow          = 5 * time.Second
	// defaultStallShown is how long nothing must arrive before the window
	// is told (Download.StalledSeconds): a pause of a second is normal.
	defaultStallShown = 3 * time.Second
	downloadsDir      = ".downloads"
	// BundlesDir is the work folder of bundle downloads inside the models
	// folder (download.PrepareSet's), hidden so that a scan never takes a
	// partial bundle for a model; `anechat pull` uses the same one, so a
	// bundle it left is resumed by the window and the other way round.
	BundlesDir = ".bundles"
	partSuffix = ".part"
	metaSuffix = ".json"
)

func (s *Downloads) dir() string { return filepath.Join(storage.ModelsPath(s.c.dataDir), downloadsDir) }

func (s *Downloads) setsDir() string {
	return filepath.Join(storage.ModelsPath(s.c.dataDir), BundlesDir)
}

func (s *Downloads) partPath(name string) string {
	return filepath.Join(s.dir(), name+partSuffix)
}

func (s *Downloads) metaPath(name string) string {
	return filepath.Join(s.dir(), name+metaSuffix)
}

// client is the HTTP client of a download: the access token the user gave
// goes to the Hub the app talks to, and only there (hub.Authorize: not to
// the CDN its files redirect to, nor to any other host a link names).
func (s *Downloads) client() *http.Client {
	hc := s.c.opts.HTTP
	if hc == nil {
		// No overall timeout (a model takes minutes); a response that sends
		// nothing for s.stall is dropped and retried (download.Options.Stall).
		hc = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   30 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			IdleConnTimeout:       90 * time.Second}}
	}
	tok, err := s.c.hubToken()
	if err != nil {
		// The download goes on without it: a gated file then says so.
		s.c.log.Warn("Hugging Face token not read: downloading without it", "err", err)
		return hc
	}
	authed, err := hub.Authorize(hc, hub.BaseURL(s.c.opts.HubURL), tok)
	if err != nil {
		return hc
	}
	return authed
}

// List returns the downloads: running, paused (also those left by an
// earlier run) and the finished or failed ones of this run, by name.
func (s *Downloads) List() ([]Download, error) {
	if _, err := s.c.db(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]Download, 0, len(s.jobs))
	for _, j := range s.jobs {
		j.mu.Lock()
		out = append(out, j.d)
		j.mu.Unlock()
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Start downloads req.URL into the models folder; progress arrives as
// EventDownload events. It fails at once for a URL that is not an https
// link to a .gguf file, a bad checksum, or a name already taken.
func (s *Downloads) Start(req DownloadRequest) (Download, error) {
	if _, err := s.c.db(); err != nil {
		return Download{}, err
	}
	u, err := checkURL(req.URL)
	if err != nil {
		return Download{}, err
	}
	name := strings.TrimSpace(req.FileName)
	if name == "" {
		name, _ = url.PathUnescape(path.Base(u.Path))
	}
	if err := checkName(name); err != nil {
		return Download{}, err
	}
	sum := strings.ToLower(strings.TrimSpace(req.SHA256))
	if sum != "" && !isHex64(sum) {
		return Download{}, fmt.Errorf("downloads: sha256 %q: want 64 hexadecimal digits (or leave it empty)", req.SHA256)
	}
	if req.Size < 0 {
		return Download{}, fmt.Errorf("downloads: size %d: want the file's size in bytes, or 0 when it is not known", req.Size)
	}
	final := filepath.Join(storage.ModelsPath(s.c.dataDir), name)
	if _, err := os.Lstat(final); err == nil {
		return Download{}, fmt.Errorf("downloads: %s is already in the models folder (%s): remove or rename it first", name, final)
	}
	if err := os.MkdirAll(s.dir(), 0o755); err != nil {
		return Download{}, fmt.Errorf("downloads: %w", err)
	}
	s.mu.Lock()
	if j := s.jobs[name]; j != nil {
		j.mu.Lock()
		state := j.d.State
		j.mu.Unlock()
		if state == DownloadRunning || state == DownloadPaused || state == DownloadVerifying {
			s.mu.Unlock()
			return Download{}, fmt.Errorf("downloads: %s is already being downloaded (%s)", name, state)
		}
	}
	j := &dlJob{d: Download{Name: name, URL: u.String(), SHA256: sum, State: DownloadPaused, Total: -1},
		meta: download.Meta{URL: u.String(), Name: name, SHA256: sum, Total: -1, Expected: req.Size, StartedAt: s.c.now().UTC()}}
	s.jobs[name] = j
	s.mu.Unlock()
	// A stale partial file of an earlier, forgotten attempt must not be
	// spliced onto this one.
	os.Remove(s.partPath(name))
	if err := download.SaveMeta(s.metaPath(name), &j.meta); err != nil {
		s.forget(name)
		return Download{}, err
	}
	return s.run(j), nil
}

// checkURL parses a pasted link and holds it to the download URL rule
// (download.CheckURL: https, or http to this machine), the same rule every
// redirect is held to.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("downloads: %q is not a URL: paste an https link to a .gguf file", raw)
	}
	if err := download.CheckURL(u); err != nil {
		return nil, fmt.Errorf("downloads: %w", err)
	}
	return u, nil
}

// checkName accepts a plain .gguf file name.
func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "/":
		return errors.New("downloads: the URL names no file: give a file name ending in .gguf")
	case strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") || strings.ContainsRune(name, 0) || len(name) > 200:
		return fmt.Errorf("downloads: %q is not a plain file name (no slashes, not hidden, under 200 bytes)", name)
	case !strings.EqualFold(filepath.Ext(name), ".gguf"):
		return fmt.Errorf("downloads: %q is not a .gguf file: downloads fetch one GGUF model file (give a file name ending in .gguf if the URL has none)", name)
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// Pause stops a running download, keeping what arrived; Resume continues.
func (s *Downloads) Pause(name string) (Download, error) {
	j, err := s.job(name)
	if err != nil {
		return Download{}, err
	}
	j.mu.Lock()
	cancel, done := j.cancel, j.done
	j.mu.Unlock()
	if cancel == nil {
		return s.get(j), nil // not running: nothing to pause
	}
	cancel(errPaused)
	<-done
	return s.get(j), nil
}

// Resume continues a paused download (also one left by an earlier run)
// from the bytes it holds.
func (s *Downloads) Resume(name string) (Download, error) {
	j, err := s.job(name)
	if err != nil {
		return Download{}, err
	}
	j.mu.Lock()
	state := j.d.State
	j.mu.Unlock()
	if state != DownloadPaused {
		return Download{}, fmt.Errorf("downloads: %s is %s, not paused", name, state)
	}
	return s.run(j), nil
}

// resumePaused resumes the paused download called name when it fetches
// from source (a bundle's OWNER/NAME@COMMIT, a file's URL); ok is false
// when none is paused. One paused from another source is refused (ok,
// with the error): its bytes are not the ones asked for.
func (s *Downloads) resumePaused(name, source string) (d Download, ok bool, err error) {
	s.mu.Lock()
	j := s.jobs[name]
	s.mu.Unlock()
	if j == nil {
		return Download{}, false, nil
	}
	d = s.get(j)
	if d.State != DownloadPaused {
		return Download{}, false, nil
	}
	from := d.Source
	if from == "" {
		from = d.URL
	}
	if from != source {
		return Download{}, true, fmt.Errorf("downloads: a download of %s from %s is paused, not from %s: cancel it first (Cancel on the Models page, or `anechat pull --cancel`)", name, from, source)
	}
	d, err = s.Resume(name)
	return d, true, err
}

// Cancel stops a download and removes its partial file; it is gone from the
// list.
func (s *Downloads) Cancel(name string) error {
	j, err := s.job(name)
	if err != nil {
		return err
	}
	j.mu.Lock()
	cancel, done := j.cancel, j.done
	j.mu.Unlock()
	if cancel != nil {
		cancel(errCancelled)
		<-done // the transfer removed its files
		return nil
	}
	j.mu.Lock()
	state := j.d.State
	j.mu.Unlock()
	if state != DownloadPaused {
		return fmt.Errorf("downloads: %s is %s: there is nothing to cancel (Dismiss removes it from the list)", name, state)
	}
	s.discard(j)
	s.finish(j, DownloadCancelled, "")
	s.forget(name)
	return nil
}

// Dismiss removes a finished, failed or cancelled download from the list.
func (s *Downloads) Dismiss(name string) error {
	j, err := s.job(name)
	if err != nil {
		return err
	}
	j.mu.Lock()
	state := j.d.State
	j.mu.Unlock()
	if state == DownloadRunning || state == DownloadPaused || state == DownloadVerifying {
		return fmt.Errorf("downloads: %s is %s: cancel it instead", name, state)
	}
	s.forget(name)
	return nil
}

func (s *Downloads) job(name string) (*dlJob, error) {
	if _, err := s.c.db(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[name]
	if j == nil {
		return nil, fmt.Errorf("downloads: no download named %q", name)
	}
	return j, nil
}

func (s *Downloads) forget(name string) {
	s.mu.Lock()
	delete(s.jobs, name)
	s.mu.Unlock()
}

func (s *Downloads) get(j *dlJob) Download {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.d
}

// discard removes what j left on disk: a bundle's work folder, or a
// file's partial file and sidecar.
func (s *Downloads) discard(j *dlJob) {
	if j.set != nil {
		if err := download.RemoveSet(s.setsDir(), j.set.Set.Name); err != nil {
			s.c.log.Warn("bundle download leftover not removed", "name", j.set.Set.Name, "err", err)
		}
		return
	}
	s.removeFiles(j.d.Name)
}

// removeFiles deletes a download's partial file and sidecar.
func (s *Downloads) removeFiles(name string) {
	for _, p := range []string{s.partPath(name), s.metaPath(name), filepath.Join(s.dir(), name)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.c.log.Warn("download leftover not removed", "path", p, "err", err)
		}
	}
}

// run starts the transfer of j in the background and returns its state.
func (s *Downloads) run(j *dlJob) Download {
	ctx, cancel := context.WithCancelCause(s.c.context())
	j.mu.Lock()
	if j.cancel != nil { // already running
		j.mu.Unlock()
		cancel(nil)
		return s.get(j)
	}
	j.cancel, j.done = cancel, make(chan struct{})
	j.d.State, j.d.Error, j.d.BytesPerSec, j.d.ETASeconds, j.d.StalledSeconds = DownloadRunning, "", 0, -1, 0
	j.d.Cause, j.d.Remedy = "", ""
	j.samples, j.lastByte = nil, s.c.now()
	done := j.done
	j.mu.Unlock()
	s.wg.Add(1)
	s.send(j)
	go func() {
		defer s.wg.Done()
		defer close(done)
		defer cancel(nil)
		s.transfer(ctx, j)
	}()
	return s.get(j)
}

// transfer fetches, verifies and registers j, retrying lost connections.
func (s *Downloads) transfer(ctx context.Context, j *dlJob) {
	if j.set != nil {
		s.transferSet(ctx, j)
		return
	}
	name := j.d.Name
	part := s.partPath(name)
	save := func(m *download.Meta) error { return download.SaveMeta(s.metaPath(name), m) }
	progress := func(received, total int64) { s.progress(j, received, total) }
	stopTicking := s.ticker(j)
	var err error
	for attempt := 0; ; attempt++ {
		j.mu.Lock()
		m := j.meta
		j.mu.Unlock()
		o := download.Options{Client: s.client(), Stall: s.stall, MaxSize: s.maxSize, Reserve: s.reserve, Space: s.space}
		err = download.Fetch(ctx, o, part, &m, save, progress)
		j.mu.Lock()
		j.meta = m
		j.mu.Unlock()
		var ie *download.InterruptedError
		if !errors.As(err, &ie) || attempt >= s.retries {
			break
		}
		s.c.log.Warn("download interrupted: retrying", "name", name, "attempt", attempt+1, "err", err)
		select {
		case <-time.After(s.retryDelay << attempt):
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		if ctx.Err() != nil {
			break
		}
	}
	stopTicking()
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		s.complete(ctx, j)
	case errors.Is(err, errCancelled) || errors.Is(cause, errCancelled):
		s.removeFiles(name)
		s.finish(j, DownloadCancelled, "")
		s.forget(name)
	case errors.Is(err, errPaused), errors.Is(err, errShutdown), ctx.Err() != nil:
		s.finish(j, DownloadPaused, "") // the app closing pauses it too
	default:
		var ie *download.InterruptedError
		var se *download.SpaceError
		var ze *download.SizeError
		switch {
		case errors.As(err, &ie):
			s.pausedBy(j, err.Error(), RemedyResume)
			return
		case errors.As(err, &se):
			// What arrived is kept: the user frees space and resumes.
			s.pausedBy(j, err.Error(), RemedyFreeSpace)
			return
		case errors.As(err, &ze):
			err = fmt.Errorf("%w: the download was removed (check the link)", err)
		}
		// A refused URL or redirect, a file larger than it may be, a
		// response that is not the file: nothing of it is kept.
		s.removeFiles(name)
		s.finish(j, DownloadFailed, s.hubWords(j.d.URL, err).Error())
	}
}

// ticker keeps j's speed current while its transfer runs (and waits to
// retry) when no bytes come: it falls to 0 over speedWindow and
// StalledSeconds counts, instead of the last speed standing still. The
// function returned stops it.
func (s *Downloads) ticker(j *dlJob) (stop func()) {
	tick := s.tickInterval()
	ticking, ticked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.tick(j)
			case <-ticking:
				return
			}
		}
	}()
	return func() { close(ticking); <-ticked }
}

// complete checks the finished file and moves it into the models folder:
// the checksum over the partial file, a rename to the real name inside the
// hidden folder (the fingerprint hashes the name), the loader's validation
// there, then the atomic rename into the models folder and registration.
func (s *Downloads) complete(ctx context.Context, j *dlJob) {
	name := j.d.Name
	j.mu.Lock()
	j.d.State, j.d.BytesPerSec, j.d.ETASeconds, j.d.StalledSeconds = DownloadVerifying, 0, 0, 0
	want := j.meta.SHA256
	j.mu.Unlock()
	s.send(j)
	fail := func(msg string) {
		s.removeFiles(name)
		s.finish(j, DownloadFailed, msg)
	}
	part := s.partPath(name)
	if _, err := download.Verify(ctx, part, want); err != nil {
		if errors.Is(context.Cause(ctx), errCancelled) {
			s.removeFiles(name)
			s.finish(j, DownloadCancelled, "")
			s.forget(name)
			return
		}
		if ctx.Err() != nil {
			s.finish(j, DownloadPaused, "")
			return
		}
		var ce *download.ChecksumError
		if errors.As(err, &ce) {
			fail(fmt.Sprintf("%v: the file is not the one expected, so it was removed (check the checksum and the link)", err))
			return
		}
		fail(err.Error())
		return
	}
	staged := filepath.Join(s.dir(), name)
	if err := os.Rename(part, staged); err != nil {
		fail(fmt.Sprintf("downloads: %v", err))
		return
	}
	info, err := s.models.registry().Inspect(ctx, staged)
	if err != nil {
		fail(fmt.Sprintf("the downloaded file is not a model anechat can run, so it was removed: %v", err))
		return
	}
	final := filepath.Join(storage.ModelsPath(s.c.dataDir), name)
	if _, err := os.Lstat(final); err == nil {
		fail(fmt.Sprintf("downloads: %s appeared in the models folder meanwhile: the download was removed", final))
		return
	}
	// The partial file was synced when its last byte came (download.Fetch).
	var placed *atomicfile.SyncDirError
	switch err := atomicfile.Rename(staged, final); {
	case errors.As(err, &placed):
		// The model is in the folder; a scan would find it anyway.
		s.c.log.Warn("downloaded model moved into the models folder, the folder not synced", "path", final, "err", err)
	case err != nil:
		fail(fmt.Sprintf("downloads: %v", err))
		return
	}
	info.Path = final // same name, same fingerprint
	sm, err := s.models.register(info)
	var dup *DuplicateError
	if errors.As(err, &dup) {
		// The same bytes are registered already: the new copy is removed.
		os.Remove(final)
		os.Remove(s.metaPath(name))
		j.mu.Lock()
		j.d.Model = &dup.Of
		j.mu.Unlock()
		s.finish(j, DownloadDone, fmt.Sprintf("%s is the same file (same sha256) as %s, already registered: the copy was removed", name, dup.Of.Path))
		return
	}
	if err == nil {
		err = s.models.defaultIfNone(sm.ID)
	}
	os.Remove(s.metaPath(name))
	if err != nil {
		// The file is a good model in the folder: a scan registers it.
		s.finish(j, DownloadFailed, fmt.Sprintf("%s was downloaded but not registered (%v): press Scan on the Models page", final, err))
		return
	}
	j.mu.Lock()
	j.d.Model = &sm
	j.mu.Unlock()
	s.finish(j, DownloadDone, "")
}

// progress records bytes received and sends an event when enough time has
// passed since the last.
func (s *Downloads) progress(j *dlJob, received, total int64) {
	now := s.c.now()
	j.mu.Lock()
	if received != j.d.Received {
		j.lastByte = now
	}
	j.d.Received, j.d.Total = received, total
	j.measure(now, s.stallShown)
	due := now.Sub(j.lastSent) >= s.progressEvery || (total >= 0 && received == total)
	j.mu.Unlock()
	if due {
		s.send(j)
	}
}

// tick brings a running download's speed and stall time up to date when
// no bytes have come (progress does it when they do), and tells the
// window if that changed what it shows.
func (s *Downloads) tick(j *dlJob) {
	now := s.c.now()
	j.mu.Lock()
	if j.d.State != DownloadRunning || now.Sub(j.lastByte) < s.tickInterval() {
		j.mu.Unlock()
		return
	}
	before := [3]float64{j.d.BytesPerSec, j.d.ETASeconds, j.d.StalledSeconds}
	j.measure(now, s.stallShown)
	changed := before != [3]float64{j.d.BytesPerSec, j.d.ETASeconds, j.d.StalledSeconds}
	j.mu.Unlock()
	if changed {
		s.send(j)
	}
}

func (s *Downloads) tickInterval() time.Duration {
	if s.tickEvery > 0 {
		return s.tickEvery
	}
	return defaultTickEvery
}

// measure sets the speed over the last speedWindow, the time left at it
// and the stall time (from shown on), as of now. j.mu is held.
func (j *dlJob) measure(now time.Time, shown time.Duration) {
	received, total := j.d.Received, j.d.Total
	j.samples = append(j.samples, sample{now, received})
	for len(j.samples) > 2 && now.Sub(j.samples[0].at) > speedWindow {
		j.samples = j.samples[1:]
	}
	first := j.samples[0]
	if dt := now.Sub(first.at).Seconds(); dt > 0 && received >= first.bytes {
		j.d.BytesPerSec = float64(received-first.bytes) / dt
	}
	j.d.ETASeconds = -1
	if total >= 0 && j.d.BytesPerSec > 0 {
		j.d.ETASeconds = float64(total-received) / j.d.BytesPerSec
	}
	j.d.StalledSeconds = 0
	if shown <= 0 {
		shown = defaultStallShown
	}
	if quiet := now.Sub(j.lastByte); quiet >= shown {
		j.d.StalledSeconds = quiet.Seconds()
	}
}

// pausedBy pauses j by itself for cause, with what continues it: Error is
// both in the window's words (Download.Advice).
func (s *Downloads) pausedBy(j *dlJob, cause string, r Remedy) {
	j.mu.Lock()
	j.d.Cause, j.d.Remedy = cause, r
	j.mu.Unlock()
	s.finish(j, DownloadPaused, Download{Cause: cause, Remedy: r}.Advice(Window))
}

// finish sets j's final (or paused) state and tells the window.
func (s *Downloads) finish(j *dlJob, state, msg string) {
	j.mu.Lock()
	if msg == "" || state != DownloadPaused {
		j.d.Cause, j.d.Remedy = "", "" // no longer paused by itself
	}
	j.d.State, j.d.Error, j.d.BytesPerSec, j.d.StalledSeconds = state, msg, 0, 0
	j.d.ETASeconds = 0
	j.cancel = nil
	j.mu.Unlock()
	if state == DownloadFailed {
		s.c.log.Warn("download failed", "name", j.d.Name, "err", msg)
	}
	s.send(j)
}

func (s *Downloads) send(j *dlJob) {
	j.mu.Lock()
	j.lastSent = s.c.now()
	d := j.d
	j.mu.Unlock()
	s.c.send(EventDownload, d)
}

// restore lists the downloads an earlier run left paused (their sidecars in
// the hidden folder), so Resume can continue them, and removes leftovers
// nothing describes. Startup calls it.
func (s *Downloads) restore() {
	s.restoreSets()
	entries, err := os.ReadDir(s.dir())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.c.log.Warn("paused downloads not read", "dir", s.dir(), "err", err)
		}
		return
	}
	known := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), metaSuffix) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m, err := download.LoadMeta(filepath.Join(s.dir(), e.Name()))
		if err != nil || checkName(m.Name) != nil || m.Name+metaSuffix != e.Name() {
			s.c.log.Warn("download sidecar unreadable: removed", "path", e.Name(), "err", err)
			os.Remove(filepath.Join(s.dir(), e.Name()))
			continue
		}
		known[m.Name] = true
		var have int64
		if st, err := os.Stat(s.partPath(m.Name)); err == nil {
			have = st.Size()
		}
		j := &dlJob{meta: m, d: Download{Name: m.Name, URL: m.URL, SHA256: m.SHA256, State: DownloadPaused,
			Received: have, Total: m.Total}}
		s.mu.Lock()
		s.jobs[m.Name] = j
		s.mu.Unlock()
	}
	for _, e := range entries {
		n := e.Name()
		base := strings.TrimSuffix(strings.TrimSuffix(n, partSuffix), metaSuffix)
		if !known[base] && !strings.HasSuffix(n, metaSuffix) {
			os.Remove(filepath.Join(s.dir(), n)) // a partial or staged file nothing describes
		}
	}
}

// wait pauses every running download (Shutdown: they resume next time)
// and waits for them to stop.
func (s *Downloads) wait() {
	s.mu.Lock()
	for _, j := range s.jobs {
		j.mu.Lock()
		if j.cancel != nil {
			j.cancel(errShutdown)
		}
		j.mu.Unlock()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
