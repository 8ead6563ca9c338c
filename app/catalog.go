package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"anechat/internal/catalog"
	"anechat/internal/hub"
	"anechat/internal/pull"
	"anechat/internal/secrets"
	"anechat/storage"
)

// Catalog is the Models page's way to new models: the curated catalog
// (internal/catalog: each entry's size on disk, the memory it needs and
// whether it fits this machine, the one recommended here), the Hugging
// Face search (internal/hub), and Pull, which plans a download pinned to
// a commit (internal/pull) and hands it to the Downloads service: a GGUF
// file as a one-file download, a bundle as a set. `anechat search` runs
// on the same packages; `anechat pull` on this code itself (App.PlanPull,
// App.StartPull), the app started headless.
type Catalog struct {
	c         *core
	downloads *Downloads

	mu sync.Mutex
	// sizes are the entries' sizes read from the Hub's trees (Sizes), by
	// entry name; an entry not read yet shows its approximate size.
	sizes map[string]entrySize
}

// entrySize is what the Hub said of an entry.
type entrySize struct {
	size  int64
	gated bool
	err   string
}

// hubWait bounds one Hub call of the window (a search, a tree).
const hubWait = 30 * time.Second

// hubClient is a client of the Hub the options (or $ANECHAT_HUB) name,
// sending the access token the user gave (hubToken), if any.
func (c *core) hubClient() (*hub.Client, error) {
	hc, err := hub.New(hub.BaseURL(c.opts.HubURL), nil)
	if err != nil {
		return nil, err
	}
	tok, err := c.hubToken()
	if err != nil {
		return nil, err
	}
	return hc.WithToken(tok), nil
}

// secrets is where the Hugging Face token is kept (Options.Secrets).
func (c *core) secrets() secrets.Store {
	if c.opts.Secrets != nil {
		return c.opts.Secrets
	}
	return secrets.Default(c.dataDir)
}

// hubToken is the access token the Hub client sends: Options.HubToken
// (the command line's $HF_TOKEN), else the one stored in Settings; "" for
// none. The error (a token file others may read, a keychain that failed)
// never holds the token.
func (c *core) hubToken() (string, error) {
	if c.opts.HubToken != "" {
		return c.opts.HubToken, nil
	}
	if _, err := c.db(); err != nil {
		return "", err
	}
	return c.secrets().Get()
}

// machine is what fits are judged against.
func (c *core) machine() catalog.Machine {
	if c.opts.Machine.GOOS != "" {
		return c.opts.Machine
	}
	return catalog.ThisMachine()
}

// CatalogEntry is one model of the catalog as the Models page shows it.
type CatalogEntry struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Repo    string `json:"repo"`
	Format  string `json:"format"`
	Backend string `json:"backend"`
	// Context is the model's context length in tokens.
	Context    int    `json:"context"`
	Licence    string `json:"licence"`
	LicenceURL string `json:"licenceURL"`
	// AcceptOnHub: the licence must be accepted on Hugging Face before the
	// files download (the catalog says so, or the Hub's information did);
	// Link is the repository's page, where it is accepted.
	AcceptOnHub bool   `json:"acceptOnHub"`
	Link        string `json:"link"`
	// Fit is the size on disk, the memory needed and whether it fits this
	// machine (Fit.Size is the Hub's tree's once read, SizeExact).
	Fit       catalog.Fit `json:"fit"`
	SizeExact bool        `json:"sizeExact"`
	// Recommended marks the one entry recommended for this machine.
	Recommended bool `json:"recommended"`
	// Download is the name its download (and the model in the models
	// folder) has: the .gguf file's name, or the bundle folder's.
	Download string `json:"download"`
	// ModelID is the registered model the entry installed, 0 when none.
	ModelID int64 `json:"modelId"`
	// Error says why the Hub could not tell its size, "" when it did or was
	// not asked.
	Error string `json:"error"`
}

// CatalogList is the catalog for this machine.
type CatalogList struct {
	Entries []CatalogEntry `json:"entries"`
	// RAM is this machine's memory in bytes (0 when unknown);
	// NeuralEngine whether Core ML bundles run here.
	RAM          int64 `json:"ram"`
	NeuralEngine bool  `json:"neuralEngine"`
	// Hub is the Hub's address.
	Hub string `json:"hub"`
}

// List returns the catalog with what is known now (no network): sizes the
// Hub gave earlier (Sizes), else the catalog's approximate ones.
func (s *Catalog) List() (CatalogList, error) {
	if _, err := s.c.db(); err != nil {
		return CatalogList{}, err
	}
	return s.list()
}

// Sizes asks the Hub for every entry's tree (a few at a time), so each
// entry's size, memory need and fit are the exact ones, and returns the
// catalog. An entry the Hub could not tell about says why (Error); the
// others are still listed.
func (s *Catalog) Sizes() (CatalogList, error) {
	if _, err := s.c.db(); err != nil {
		return CatalogList{}, err
	}
	cat, err := catalog.Load()
	if err != nil {
		return CatalogList{}, err
	}
	c, err := s.c.hubClient()
	if err != nil {
		return CatalogList{}, err
	}
	ctx, cancel := context.WithTimeout(s.c.context(), 2*hubWait)
	defer cancel()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	for i := range cat.Entries {
		e := &cat.Entries[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			got := entrySize{}
			plan, err := pull.Make(ctx, c, pull.Target{Entry: e, Repo: e.Repo, Revision: e.TargetRevision()}, nil)
			switch {
			case errors.Is(err, hub.ErrGated):
				got.gated, got.err = true, err.Error()
			case err != nil:
				got.err = err.Error()
			default:
				got.size = plan.Size
			}
			s.mu.Lock()
			s.sizes[e.Name] = got
			s.mu.Unlock()
		}()
	}
	wg.Wait()
	return s.list()
}

// forgetSizes drops what the Hub said of the entries (the token changed:
// a gated entry may download now, or no longer).
func (s *Catalog) forgetSizes() {
	s.mu.Lock()
	s.sizes = map[string]entrySize{}
	s.mu.Unlock()
}

func (s *Catalog) list() (CatalogList, error) {
	cat, err := catalog.Load()
	if err != nil {
		return CatalogList{}, err
	}
	d, err := s.c.db()
	if err != nil {
		return CatalogList{}, err
	}
	m := s.c.machine()
	base := hub.BaseURL(s.c.opts.HubURL)
	models := storage.ModelsPath(s.c.dataDir)
	out := CatalogList{RAM: m.RAM, NeuralEngine: m.NeuralEngine(), Hub: base, Entries: make([]CatalogEntry, len(cat.Entries))}
	sizes := make([]int64, len(cat.Entries))
	s.mu.Lock()
	known := make(map[string]entrySize, len(s.sizes))
	for k, v := range s.sizes {
		known[k] = v
	}
	s.mu.Unlock()
	for i := range cat.Entries {
		e := &cat.Entries[i]
		k := known[e.Name]
		sizes[i] = k.size
		ce := CatalogEntry{Name: e.Name, Title: e.Title, Repo: e.Repo, Format: e.Format, Backend: e.Backend,
			Context: e.Context, Licence: e.Licence, LicenceURL: e.LicenceURL, AcceptOnHub: e.AcceptOnHub || k.gated,
			Link: e.RepoURL(base), Fit: catalog.Assess(e, k.size, m), SizeExact: k.size > 0, Error: k.err,
			Download: entryDownloadName(e)}
		if sm, err := d.ModelByPath(s.c.context(), filepath.Join(models, ce.Download)); err == nil {
			ce.ModelID = sm.ID
		}
		out.Entries[i] = ce
	}
	if r := cat.Recommend(m, sizes); r >= 0 {
		out.Entries[r].Recommended = true
	}
	return out, nil
}

// entryDownloadName is what an entry's download is called and lands as in
// the models folder (pull.Plan.Name): the .gguf file's name, or the
// bundle folder's (the entry's name).
func entryDownloadName(e *catalog.Entry) string {
	if e.Format == catalog.FormatGGUF {
		return filepath.Base(e.Files[0].Path)
	}
	return e.Name
}

// HubModel is one repository the Hub's search found.
type HubModel struct {
	// ID is OWNER/NAME.
	ID string `json:"id"`
	// Format is "gguf" or "coreml": what the search found it under.
	Format    string `json:"format"`
	Downloads int64  `json:"downloads"`
	Likes     int64  `json:"likes"`
	// Gated: its licence must be accepted on Link first.
	Gated bool   `json:"gated"`
	Link  string `json:"link"`
}

// maxResults is how many repositories a search lists.
const maxResults = 30

// Search asks the Hub for GGUF and Core ML repositories whose name holds
// text, most downloaded first. Its errors are in plain words: offline, rate
// limited, an unexpected answer.
func (s *Catalog) Search(text string) ([]HubModel, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("search: type part of a model's name (e.g. gemma, qwen3, SmolLM2)")
	}
	c, err := s.c.hubClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.c.context(), hubWait)
	defer cancel()
	ms, err := c.Search(ctx, text, "", maxResults)
	if err != nil {
		return nil, err
	}
	out := make([]HubModel, 0, len(ms))
	for _, m := range ms {
		out = append(out, HubModel{ID: m.ID, Format: string(m.Format), Downloads: m.Downloads, Likes: m.Likes,
			Gated: m.Gated != "", Link: c.RepoURL(m.ID)})
	}
	return out, nil
}

// RepoFile is one GGUF file of a repository: a quantisation to pick.
type RepoFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Fit says whether it fits this machine (memory needed).
	Fit catalog.Fit `json:"fit"`
}

// RepoFiles is what a repository offers to download.
type RepoFiles struct {
	Repo string `json:"repo"`
	// Commit is the commit its main branch names now: what is downloaded.
	Commit string `json:"commit"`
	// Gated: its licence must be accepted on Link; with no token stored
	// nothing more is listed (its files would not download), with one the
	// files are listed and a download asks the Hub with it.
	Gated bool   `json:"gated"`
	Link  string `json:"link"`
	// Quantisations are its GGUF files, smallest first; none for a bundle.
	Quantisations []RepoFile `json:"quantisations"`
	// Bundle: no GGUF file, so the whole repository (Files files, Size
	// bytes) is downloaded as one folder, with its Fit.
	Bundle bool        `json:"bundle"`
	Files  int         `json:"files"`
	Size   int64       `json:"size"`
	Fit    catalog.Fit `json:"fit"`
}

// Files reads repo's tree at its main branch: the quantisations it offers
// (each .gguf file with its size and fit), or, with none, its size as a
// bundle.
func (s *Catalog) Files(repo string) (RepoFiles, error) {
	c, err := s.c.hubClient()
	if err != nil {
		return RepoFiles{}, err
	}
	ctx, cancel := context.WithTimeout(s.c.context(), hubWait)
	defer cancel()
	info, err := c.Info(ctx, repo, "main")
	if err != nil {
		return RepoFiles{}, err
	}
	out := RepoFiles{Repo: repo, Commit: info.SHA, Gated: info.Gated != "", Link: c.RepoURL(repo), Quantisations: []RepoFile{}}
	if out.Gated && !c.HasToken() {
		return out, nil // its files do not download without a token: the licence first
	}
	tree, err := c.Tree(ctx, repo, info.SHA)
	if err != nil {
		return RepoFiles{}, err
	}
	m := s.c.machine()
	cpu := &catalog.Entry{Backend: catalog.BackendCPU}
	for _, f := range pull.Quantisations(tree) {
		out.Quantisations = append(out.Quantisations, RepoFile{Path: f.Path, Size: f.Size, Fit: catalog.Assess(cpu, f.Size, m)})
	}
	if len(out.Quantisations) == 0 {
		// What Pull would take: every file but the hidden ones (or, for a
		// repository the catalog knows as a bundle, the catalog's files).
		cat, err := catalog.Load()
		if err != nil {
			return RepoFiles{}, err
		}
		t, err := pull.ParseTarget(cat, repo)
		if err != nil {
			return RepoFiles{}, err
		}
		plan, err := pull.Make(ctx, c, t, nil)
		if err != nil {
			return RepoFiles{}, err
		}
		out.Bundle, out.Files, out.Size = true, len(plan.Bundle.Files), plan.Size
		guess := &catalog.Entry{Backend: catalog.BackendCPU}
		if info.Library == string(hub.CoreML) || slices.Contains(info.Tags, string(hub.CoreML)) {
			guess.Backend = catalog.BackendCoreML
		}
		out.Fit = catalog.Assess(guess, out.Size, m)
	}
	return out, nil
}

// PullRequest is what Pull downloads: a catalog entry by name, or a
// repository (OWNER/NAME[@REVISION]) and, for a GGUF repository, the file
// (its path, or its quantisation) — "" for its only GGUF file or, with
// none, the whole repository as a bundle.
type PullRequest struct {
	Entry string `json:"entry"`
	Repo  string `json:"repo"`
	File  string `json:"file"`
}

// Pull plans the download (the revision resolved to its commit, each
// file's size and checksum from the tree at it) and starts it with the
// Downloads service: progress, pause, resume and cancel are a download's;
// once complete and checked it is registered, and made the default model
// when there is none. A gated repository is refused with the link to
// accept its licence, unless a token is stored (Settings.SetHubToken) whose
// account the Hub lets download it.
func (s *Catalog) Pull(req PullRequest) (Download, error) {
	if _, err := s.c.db(); err != nil {
		return Download{}, err
	}
	cat, err := catalog.Load()
	if err != nil {
		return Download{}, err
	}
	what := strings.TrimSpace(req.Entry)
	if what == "" {
		what = strings.TrimSpace(req.Repo)
	}
	if what == "" {
		return Download{}, errors.New("pull: name a catalog entry or a repository (OWNER/NAME)")
	}
	if req.Entry != "" {
		if _, ok := cat.Find(req.Entry); !ok {
			return Download{}, fmt.Errorf("pull: %q is not in the catalog", req.Entry)
		}
	}
	t, err := pull.ParseTarget(cat, what)
	if err != nil {
		return Download{}, err
	}
	var files []string
	if f := strings.TrimSpace(req.File); f != "" {
		files = []string{f}
	}
	ctx, cancel := context.WithTimeout(s.c.context(), 2*hubWait)
	defer cancel()
	plan, err := s.plan(ctx, t, files)
	if err != nil {
		return Download{}, err
	}
	return s.start(plan)
}

// plan pins t to a commit on the app's Hub and lists what its download
// fetches (pull.Make): Pull's planning and `anechat pull`'s (App.PlanPull).
func (s *Catalog) plan(ctx context.Context, t pull.Target, files []string) (*pull.Plan, error) {
	c, err := s.c.hubClient()
	if err != nil {
		return nil, err
	}
	return pull.Make(ctx, c, t, files)
}

// start hands plan to the Downloads service: a GGUF file as a one-file
// download, a bundle as a set. A model already in the models folder under
// the plan's name is checked and registered instead of fetched again
// (Downloads.present). The download of the same model left paused (by the
// window or `anechat pull`, in this run or an earlier one) is resumed when
// it fetches the same commit, refused when another.
func (s *Catalog) start(plan *pull.Plan) (Download, error) {
	if final, ok := s.downloads.inModels(plan.Name); ok {
		return s.downloads.present(plan, final)
	}
	source := plan.Source()
	if plan.Bundle == nil {
		source = plan.GGUF.URL
	}
	if d, ok, err := s.downloads.resumePaused(plan.Name, source); ok {
		return d, err
	}
	if plan.Bundle != nil {
		return s.downloads.startSet(*plan.Bundle)
	}
	return s.downloads.Start(DownloadRequest{URL: plan.GGUF.URL, SHA256: plan.GGUF.SHA256, FileName: plan.Name, Size: plan.Size})
}

// PlanPull plans the download of t (files: the GGUF file to pick, if any)
// as Catalog.Pull does, for `anechat pull`, which shows the plan before
// StartPull hands it to the Downloads service. (Methods of App are not
// bound to the window; Catalog's are.)
func (a *App) PlanPull(ctx context.Context, t pull.Target, files []string) (*pull.Plan, error) {
	if _, err := a.core.db(); err != nil {
		return nil, err
	}
	return a.Catalog.plan(ctx, t, files)
}

// StartPull starts plan's download as Catalog.Pull does: progress, pause,
// resume, cancel, the checks and the registration are the Downloads
// service's, the same as the window's.
func (a *App) StartPull(plan *pull.Plan) (Download, error) {
	return a.Catalog.start(plan)
}

// PausedPull returns the paused download (left by the window or `anechat
// pull`, in this run or an earlier one) that a pull of t would resume,
// found by the name the window lists it under: a catalog entry's download
// (the .gguf file's name or the bundle folder's, CatalogEntry.Download), a
// repository's file by its name or a part of it (a quantisation), a
// repository's bundle by its folder. A repository with several paused
// downloads and no file named is refused, listing them. `anechat pull
// --cancel` discards what this finds with the window's Cancel.
func (a *App) PausedPull(t pull.Target, files []string) (Download, error) {
	if err := t.CheckFiles(files); err != nil {
		return Download{}, err
	}
	list, err := a.Downloads.List()
	if err != nil {
		return Download{}, err
	}
	var paused []Download
	for _, d := range list {
		if d.State == DownloadPaused {
			paused = append(paused, d)
		}
	}
	byName := func(name string) (Download, error) {
		for _, d := range paused {
			if d.Name == name {
				return d, nil
			}
		}
		return Download{}, fmt.Errorf("no paused download of %s (%s) in %s", t.Repo, name, storage.ModelsPath(a.core.dataDir))
	}
	switch {
	case t.Entry != nil:
		return byName(entryDownloadName(t.Entry))
	case t.Layout != nil && len(files) == 0:
		return byName(t.Layout.Name)
	}
	// A repository: its bundle (the folder named after it) or its GGUF
	// files, the ones files names.
	var hits []Download
	for _, d := range paused {
		mine := strings.Contains(d.URL, "/"+t.Repo+"/resolve/")
		if d.Source != "" {
			repo, _, _ := strings.Cut(d.Source, "@")
			mine = repo == t.Repo
		}
		if !mine {
			continue
		}
		if len(files) > 0 {
			want := strings.ToLower(filepath.Base(files[0]))
			if strings.ToLower(d.Name) == want {
				return d, nil
			}
			if !strings.Contains(strings.ToLower(d.Name), strings.ToLower(files[0])) {
				continue
			}
		}
		hits = append(hits, d)
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return Download{}, fmt.Errorf("no paused download of %s in %s", t.Repo, storage.ModelsPath(a.core.dataDir))
	}
	names := make([]string, len(hits))
	for i, d := range hits {
		names[i] = d.Name
	}
	return Download{}, fmt.Errorf("%s has %d paused downloads (%s): name the file (or its quantisation) to cancel", t.Repo, len(hits), strings.Join(names, ", "))
}
