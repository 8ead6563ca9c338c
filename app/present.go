package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"anechat/internal/download"
	"anechat/internal/pull"
	"anechat/storage"
)

// present takes the place of plan's download when its model is already in
// the models folder (pulled before by the window or `anechat pull`, or put
// there by hand): a Download that checks every file there against the
// plan's checksums (verifying) and, when they all match, registers the
// model there (once: a registered path is updated in place) and ends done
// with it, nothing fetched. Other bytes under the name end it failed
// saying so; they are left as they are. The window's Pull and `anechat
// pull` both come here (Catalog.start).
func (s *Downloads) present(plan *pull.Plan, final string) (Download, error) {
	set, in := plan.Bundle, final
	if set == nil {
		set, in = &download.Set{Name: plan.Name, Files: []download.SetFile{*plan.GGUF}}, filepath.Dir(final)
	}
	d := Download{Name: plan.Name, State: DownloadVerifying, Total: plan.Size, Received: plan.Size, Source: plan.Source()}
	if plan.Bundle == nil {
		d.URL, d.SHA256, d.Source = plan.GGUF.URL, plan.GGUF.SHA256, ""
	}
	s.mu.Lock()
	if j := s.jobs[plan.Name]; j != nil {
		j.mu.Lock()
		state := j.d.State
		j.mu.Unlock()
		if state == DownloadRunning || state == DownloadPaused || state == DownloadVerifying {
			s.mu.Unlock()
			return Download{}, fmt.Errorf("downloads: %s is already being downloaded (%s)", plan.Name, state)
		}
	}
	ctx, cancel := context.WithCancelCause(s.c.context())
	j := &dlJob{d: d, cancel: cancel, done: make(chan struct{})}
	s.jobs[plan.Name] = j
	s.mu.Unlock()
	s.wg.Add(1)
	s.send(j)
	go func() {
		defer s.wg.Done()
		defer close(j.done)
		defer cancel(nil)
		err := set.VerifyInstalled(ctx, in)
		switch {
		case ctx.Err() != nil:
			// Paused, cancelled or the app closing: nothing was changed.
			s.finish(j, DownloadCancelled, "")
			s.forget(plan.Name)
			return
		case err != nil:
			s.finish(j, DownloadFailed, fmt.Sprintf("%s is already in the models folder but is not %s at %s (%v): remove or rename it first", final, plan.Name, shortCommit(plan.Commit), err))
			return
		}
		res, err := s.models.Import(final)
		var dup *DuplicateError
		switch {
		case errors.As(err, &dup):
			j.mu.Lock()
			j.d.Model = &dup.Of
			j.mu.Unlock()
			s.finish(j, DownloadDone, fmt.Sprintf("%s is already in the models folder: its %d file(s) match the tree of %s; it is the same file (same sha256) as %s, registered already", final, len(set.Files), plan.Source(), dup.Of.Path))
			return
		case err != nil:
			s.finish(j, DownloadFailed, fmt.Sprintf("%s is in the models folder and its files match the tree of %s, but it was not registered: %v", final, plan.Source(), err))
			return
		}
		j.mu.Lock()
		j.d.Model = &res.Model
		j.mu.Unlock()
		note := fmt.Sprintf("%s is already in the models folder: its %d file(s) match the tree of %s; registered, not downloaded again", final, len(set.Files), plan.Source())
		if !res.Runnable && res.Note != "" {
			note += "; it cannot run here: " + res.Note
		}
		s.finish(j, DownloadDone, note)
	}()
	return s.get(j), nil
}

// shortCommit is a commit's first 12 digits.
func shortCommit(c string) string { return c[:min(len(c), 12)] }

// inModels reports whether name is in the models folder already.
func (s *Downloads) inModels(name string) (string, bool) {
	final := filepath.Join(storage.ModelsPath(s.c.dataDir), name)
	_, err := os.Lstat(final)
	return final, err == nil
}
