package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"anechat/internal/download"
	"anechat/storage"
)

// Bundle downloads: a set of files (a Core ML bundle's config, sidecars,
// RoPE tables and chunk folders) downloaded as one Download. The set's
// files are fetched one after another by download.SetJob (each resumed by
// HTTP Range, checked against the tree's sha256 or Git blob id, staged in
// the set's work folder under BundlesDir) and the folder is renamed into
// the models folder only when every file is there; then the folder is
// registered with Models.Import, which validates it as loading it would.
// Pause, Resume (also after a restart: restoreSets), Cancel (the work
// folder is removed) and the events are the one-file downloads' own.

// startSet starts downloading set as the bundle folder set.Name in the
// models folder.
func (s *Downloads) startSet(set download.Set) (Download, error) {
	if _, err := s.c.db(); err != nil {
		return Download{}, err
	}
	s.mu.Lock()
	if j := s.jobs[set.Name]; j != nil {
		j.mu.Lock()
		state := j.d.State
		j.mu.Unlock()
		if state == DownloadRunning || state == DownloadPaused || state == DownloadVerifying {
			s.mu.Unlock()
			return Download{}, fmt.Errorf("downloads: %s is already being downloaded (%s)", set.Name, state)
		}
	}
	s.mu.Unlock()
	if err := os.MkdirAll(s.setsDir(), 0o755); err != nil {
		return Download{}, fmt.Errorf("downloads: %w", err)
	}
	job, err := download.PrepareSet(s.setsDir(), storage.ModelsPath(s.c.dataDir), set)
	if err != nil {
		return Download{}, err
	}
	j := setJob(job)
	s.mu.Lock()
	s.jobs[set.Name] = j
	s.mu.Unlock()
	return s.run(j), nil
}

// setJob is the download of job, paused, with the progress on disk.
func setJob(job *download.SetJob) *dlJob {
	p := job.Progress()
	return &dlJob{set: job, d: Download{Name: job.Set.Name, Source: job.Set.Source, State: DownloadPaused,
		Received: p.Received, Total: p.Total, Files: p.Files, ETASeconds: 0}}
}

// restoreSets lists the bundle downloads an earlier run (or `anechat
// pull`) left in the work folder, paused, so Resume continues them.
func (s *Downloads) restoreSets() {
	names, err := download.ListSets(s.setsDir())
	if err != nil {
		s.c.log.Warn("paused bundle downloads not read", "dir", s.setsDir(), "err", err)
		return
	}
	for _, n := range names {
		job, err := download.OpenSet(s.setsDir(), storage.ModelsPath(s.c.dataDir), n)
		if err != nil {
			s.c.log.Warn("paused bundle download unreadable: left as it is", "name", n, "err", err)
			continue
		}
		s.mu.Lock()
		s.jobs[n] = setJob(job)
		s.mu.Unlock()
	}
}

// transferSet fetches and checks every file of j's set not yet there,
// installs the folder and registers it.
func (s *Downloads) transferSet(ctx context.Context, j *dlJob) {
	stop := s.ticker(j)
	o := download.SetOptions{
		Options:    download.Options{Client: s.client(), Stall: s.stall, MaxSize: s.maxSize, Reserve: s.reserve, Space: s.space},
		Retries:    s.retries,
		RetryDelay: s.retryDelay,
	}
	err := j.set.Run(ctx, o, func(p download.SetProgress) { s.setProgress(j, p) })
	stop()
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		s.completeSet(j)
	case errors.Is(err, errCancelled) || errors.Is(cause, errCancelled):
		s.discard(j)
		s.finish(j, DownloadCancelled, "")
		s.forget(j.d.Name)
	case ctx.Err() != nil:
		s.finish(j, DownloadPaused, "") // paused, or the app closing
	default:
		// A file that failed its checksum has lost its bytes (Run); the
		// files checked so far stay, so Resume fetches only the rest.
		p := j.set.Progress()
		j.mu.Lock()
		j.d.Received, j.d.Total, j.d.Files = p.Received, p.Total, p.Files
		j.mu.Unlock()
		s.pausedBy(j, s.explain(j, err), RemedyRetry)
	}
}

// setProgress records a set's progress and sends an event when enough time
// has passed since the last, or a file changed state.
func (s *Downloads) setProgress(j *dlJob, p download.SetProgress) {
	now := s.c.now()
	files := append([]download.FileProgress(nil), p.Files...) // Run keeps writing p's
	j.mu.Lock()
	if p.Received != j.d.Received {
		j.lastByte = now
	}
	changed := len(files) != len(j.d.Files)
	for i := range files {
		if !changed && files[i].State != j.d.Files[i].State {
			changed = true
		}
	}
	j.d.Received, j.d.Total, j.d.Files = p.Received, p.Total, files
	j.measure(now, s.stallShown)
	due := changed || now.Sub(j.lastSent) >= s.progressEvery
	j.mu.Unlock()
	if due {
		s.send(j)
	}
}

// completeSet registers the installed bundle folder (Models.Import: the
// loader's validation; a Core ML bundle this build cannot run is
// registered all the same, saying so) and makes it the default when there
// is none and it runs here.
func (s *Downloads) completeSet(j *dlJob) {
	j.mu.Lock()
	j.d.State, j.d.BytesPerSec, j.d.ETASeconds, j.d.StalledSeconds = DownloadVerifying, 0, 0, 0
	j.mu.Unlock()
	s.send(j)
	dest := j.set.Dest
	res, err := s.models.Import(dest)
	if err != nil {
		s.finish(j, DownloadFailed, fmt.Sprintf("%s was downloaded and every file checked, but it was not registered: %v (it is in the models folder: remove it, or fix it and press Scan)", dest, err))
		return
	}
	j.mu.Lock()
	j.d.Model = &res.Model
	j.mu.Unlock()
	note := ""
	if !res.Runnable {
		note = "registered, but it cannot run here: " + res.Note
	}
	s.finish(j, DownloadDone, note)
}

// explain says a set's failure in the Hub's words when the Hub explains it
// (a gated repository, a file gone, rate limiting, offline), else as it is.
func (s *Downloads) explain(j *dlJob, err error) string {
	var fe *download.FileError
	repo, commit, ok := strings.Cut(j.set.Set.Source, "@")
	if !errors.As(err, &fe) || !ok {
		return err.Error()
	}
	c, cerr := s.c.hubClient()
	if cerr != nil {
		return err.Error()
	}
	if h := c.DownloadError(fe.Err, repo, commit, fe.Path); h != fe.Err {
		return h.Error()
	}
	return err.Error()
}

// hubWords says a one-file download's failure in the Hub's words (a gated
// repository and where to accept its licence, a file gone, rate limiting)
// when the file is a resolve URL of the Hub the app talks to; any other
// error is returned as it is.
func (s *Downloads) hubWords(raw string, err error) error {
	c, cerr := s.c.hubClient()
	if cerr != nil {
		return err
	}
	rest, ok := strings.CutPrefix(raw, c.URL()+"/")
	parts := strings.SplitN(rest, "/", 5) // OWNER, NAME, resolve, REVISION, PATH
	if !ok || len(parts) < 5 || parts[2] != "resolve" {
		return err
	}
	rev, _ := url.PathUnescape(parts[3])
	file, _ := url.PathUnescape(parts[4])
	return c.DownloadError(err, parts[0]+"/"+parts[1], rev, file)
}
