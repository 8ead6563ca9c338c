// Package pull turns what the user asked for — a catalog entry by name, or
// a Hugging Face repository (OWNER/NAME[@REVISION]) and optionally file
// names — into a download pinned to one commit: the repository's
// information gives the commit the revision names now, its tree at that
// commit gives each file's size and checksum, and every URL is a resolve
// URL of that commit, so what is downloaded is what was listed. `anechat
// pull` runs on it, and the app's Models page is to.
//
// A plan is one GGUF file (a single-file download into the models folder)
// or a bundle (a download.Set installed as one folder).
package pull

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"anechat/internal/catalog"
	"anechat/internal/download"
	"anechat/internal/hub"
	"anechat/internal/human"
)

// Target is what to pull: a catalog entry, or a repository at a revision.
type Target struct {
	// Entry is the catalog entry, nil for a repository named directly.
	Entry *catalog.Entry
	// Repo is OWNER/NAME; Revision the branch, tag or commit ("main" when
	// none was given).
	Repo, Revision string
	// Layout is the catalog's bundle entry for the same repository, whose
	// files (and where they go) a pull of the repository with no file
	// named takes: a published bundle's repository is laid out for its
	// own app, not as the folder anechat loads.
	Layout *catalog.Entry
}

// ParseTarget reads ENTRY or OWNER/NAME[@REVISION].
func ParseTarget(cat *catalog.Catalog, s string) (Target, error) {
	s = strings.TrimSpace(s)
	if e, ok := cat.Find(s); ok {
		return Target{Entry: e, Repo: e.Repo, Revision: e.TargetRevision()}, nil
	}
	if !strings.Contains(s, "/") {
		return Target{}, fmt.Errorf("%q is neither a catalog entry (%s) nor a repository (OWNER/NAME[@REVISION])", s, strings.Join(cat.Names(), ", "))
	}
	repo, rev, found := strings.Cut(s, "@")
	if !found {
		rev = "main"
	}
	if err := hub.CheckRepo(repo); err != nil {
		return Target{}, err
	}
	if err := hub.CheckRevision(rev); err != nil {
		return Target{}, err
	}
	t := Target{Repo: repo, Revision: rev}
	for i := range cat.Entries {
		if e := &cat.Entries[i]; e.Repo == repo && e.Format == catalog.FormatCoreML {
			t.Layout = e
			break
		}
	}
	return t, nil
}

// CheckFiles refuses file names given with a catalog entry: its files are
// the catalog's.
func (t Target) CheckFiles(files []string) error {
	if t.Entry != nil && len(files) > 0 {
		return fmt.Errorf("%s is a catalog entry: it takes no file names (pull %s FILE to choose files)", t.Entry.Name, t.Repo)
	}
	return nil
}

// Plan is a download pinned to a commit.
type Plan struct {
	Target
	// Commit is the commit the revision named when the plan was made.
	Commit string
	Info   hub.Model
	// GGUF is the one file of a GGUF plan, with its URL and checksum; nil
	// for a bundle.
	GGUF *download.SetFile
	// Bundle is the set of a bundle plan; nil for a GGUF.
	Bundle *download.Set
	// Name is what lands in the models folder: the .gguf file's name or
	// the bundle folder's.
	Name string
	// Size is the bytes to download.
	Size int64
	// Taken are the repository's files the plan downloads, as the tree at
	// Commit lists them (what the catalog's pins are taken from).
	Taken []hub.File
	// probe is the repository path of one of the plan's files: the one
	// whose access a gated repository's plan checks.
	probe string
}

// checkPins holds a pinned catalog entry's plan to its pins: the commit is
// the pinned one and the files taken are exactly the pinned files, each
// of the pinned size and checksum. A tree that says otherwise (a mirror
// serving other bytes, a repository rewritten) is refused.
func (p *Plan) checkPins() error {
	e := p.Entry
	if e == nil || e.Commit == "" {
		return nil
	}
	if p.Commit != e.Commit {
		return fmt.Errorf("%s is pinned to commit %s, but the Hub answered commit %s for it", e.Name, e.Commit, p.Commit)
	}
	stale := "the Hub's tree of %s at %s differs from the catalog's pin of %s (%s): the catalog entry %s is out of date (go run ./internal/catalog/pin %s), or the Hub serves other files"
	for _, f := range p.Taken {
		pin, ok := e.Pin(f.Path)
		sum, blob := "", ""
		if f.LFS != nil {
			sum = f.LFS.SHA256
		} else {
			blob = strings.ToLower(f.OID)
		}
		switch {
		case !ok:
			return fmt.Errorf(stale, p.Repo, short(p.Commit), f.Path, "not pinned", e.Name, e.Name)
		case pin.Size != f.Size:
			return fmt.Errorf(stale, p.Repo, short(p.Commit), f.Path, fmt.Sprintf("size %d, pinned %d", f.Size, pin.Size), e.Name, e.Name)
		case pin.SHA256 != sum || pin.GitBlob != blob:
			return fmt.Errorf(stale, p.Repo, short(p.Commit), f.Path, "another checksum", e.Name, e.Name)
		}
	}
	if len(p.Taken) != len(e.Pins) {
		return fmt.Errorf(stale, p.Repo, short(p.Commit), "its files", fmt.Sprintf("%d taken, %d pinned", len(p.Taken), len(e.Pins)), e.Name, e.Name)
	}
	return nil
}

// Source is "OWNER/NAME@COMMIT": where the plan's bytes come from.
func (p *Plan) Source() string { return p.Repo + "@" + p.Commit }

// Make resolves t's revision to its commit, reads the tree there and picks
// the files: a catalog entry's; for a repository, the .gguf file files
// name (by path, or by a part of its name such as a quantisation, "Q4_K_M"),
// or its only .gguf file, or, for a repository with no .gguf file, every
// file (or those files name: paths or folders) as a bundle. A gated
// repository is refused with the link to accept its licence when the
// client has no access token; with one, the Hub is asked (CheckAccess)
// whether the token's account may download the plan's files, so a
// licence not accepted or a token refused is said before anything
// downloads.
func Make(ctx context.Context, c *hub.Client, t Target, files []string) (*Plan, error) {
	p, err := makePlan(ctx, c, t, files)
	if err != nil {
		return nil, err
	}
	if err := p.checkPins(); err != nil {
		return nil, err
	}
	if p.Info.Gated == "" {
		return p, nil
	}
	if err := c.CheckAccess(ctx, p.Repo, p.Commit, p.probe); err != nil {
		return nil, err
	}
	return p, nil
}

func makePlan(ctx context.Context, c *hub.Client, t Target, files []string) (*Plan, error) {
	if err := t.CheckFiles(files); err != nil {
		return nil, err
	}
	info, err := c.Info(ctx, t.Repo, t.Revision)
	if err != nil {
		return nil, err
	}
	if info.Gated != "" && !c.HasToken() {
		return nil, &hub.Error{Kind: hub.ErrGated, Repo: t.Repo, Revision: t.Revision, Link: c.RepoURL(t.Repo)}
	}
	tree, err := c.Tree(ctx, t.Repo, info.SHA)
	if err != nil {
		return nil, err
	}
	p := &Plan{Target: t, Commit: info.SHA, Info: info}
	switch {
	case t.Entry != nil && t.Entry.Format == catalog.FormatGGUF:
		f, ok := tree.Find(t.Entry.Files[0].Path)
		if !ok {
			return nil, fmt.Errorf("%s at %s has no file %s (the catalog is out of date)%s", t.Repo, short(info.SHA), t.Entry.Files[0].Path, listGGUFs(tree))
		}
		return p.gguf(c, f)
	case t.Entry != nil:
		return p.bundle(c, tree, t.Entry.Name, t.Entry.Files)
	}
	if t.Layout != nil && len(files) == 0 {
		return p.bundle(c, tree, t.Layout.Name, t.Layout.Files)
	}
	ggufs := tree.GGUFs()
	if len(ggufs) > 0 {
		f, err := pick(tree, ggufs, files)
		if err != nil {
			return nil, err
		}
		return p.gguf(c, f)
	}
	var take []catalog.File
	for _, f := range files {
		f = strings.TrimPrefix(f, "./")
		if _, ok := tree.Find(f); !ok {
			f = strings.TrimSuffix(f, "/") + "/"
		}
		take = append(take, catalog.File{Path: f})
	}
	if len(take) == 0 {
		for _, f := range tree.Files {
			if !strings.HasPrefix(path.Base(f.Path), ".") && !strings.HasPrefix(f.Path, ".") {
				take = append(take, catalog.File{Path: f.Path})
			}
		}
	}
	_, name, _ := strings.Cut(t.Repo, "/")
	return p.bundle(c, tree, name, take)
}

// pick chooses the .gguf file names asks for among ggufs.
func pick(tree *hub.Tree, ggufs []hub.File, names []string) (hub.File, error) {
	switch {
	case len(names) == 0 && len(ggufs) == 1:
		return ggufs[0], nil
	case len(names) == 0:
		return hub.File{}, fmt.Errorf("%s has %d GGUF files: name the one to pull (its file name, or its quantisation)%s", tree.Repo, len(ggufs), listGGUFs(tree))
	case len(names) > 1:
		return hub.File{}, fmt.Errorf("a GGUF model is one file: name one of %s's%s", tree.Repo, listGGUFs(tree))
	}
	want := names[0]
	var hits []hub.File
	for _, f := range ggufs {
		switch {
		case f.Path == want:
			return f, nil
		case strings.Contains(strings.ToLower(f.Path), strings.ToLower(want)):
			hits = append(hits, f)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return hub.File{}, fmt.Errorf("%s has no GGUF file %q%s", tree.Repo, want, listGGUFs(tree))
	}
	return hub.File{}, fmt.Errorf("%q names %d of %s's GGUF files: name one%s", want, len(hits), tree.Repo, listGGUFs(tree))
}

// listGGUFs is ": a (SIZE), b (SIZE)" for an error, "" when there are none.
func listGGUFs(tree *hub.Tree) string {
	ggufs := tree.GGUFs()
	if len(ggufs) == 0 {
		return ""
	}
	parts := make([]string, len(ggufs))
	for i, f := range ggufs {
		parts[i] = fmt.Sprintf("%s (%s)", f.Path, human.Bytes(f.Size))
	}
	return ": " + strings.Join(parts, ", ")
}

// Quantisations lists a tree's GGUF files, smallest first: the choices a
// GGUF repository offers.
func Quantisations(tree *hub.Tree) []hub.File {
	out := tree.GGUFs()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Size < out[j].Size })
	return out
}

func short(commit string) string { return commit[:min(len(commit), 12)] }

// setFile is f as a file of a download pinned to the plan's commit.
func (p *Plan) setFile(c *hub.Client, f hub.File, target string) (download.SetFile, error) {
	sf := download.SetFile{URL: c.ResolveURL(p.Repo, p.Commit, f.Path), Path: target, Size: f.Size}
	if p.probe == "" {
		p.probe = f.Path
	}
	p.Taken = append(p.Taken, f)
	switch {
	case f.LFS != nil:
		sf.SHA256 = f.LFS.SHA256
	case f.OID != "":
		sf.GitBlob = strings.ToLower(f.OID)
	default:
		return sf, fmt.Errorf("%s: the tree gives no checksum for %s", p.Repo, f.Path)
	}
	return sf, nil
}

func (p *Plan) gguf(c *hub.Client, f hub.File) (*Plan, error) {
	if f.LFS == nil {
		// A model file is always in LFS on the Hub; one in Git has only a
		// Git blob id, which the single-file download does not check.
		return nil, fmt.Errorf("%s: %s is not kept in LFS, so the Hub gives no sha256 to check it against", p.Repo, f.Path)
	}
	sf, err := p.setFile(c, f, path.Base(f.Path))
	if err != nil {
		return nil, err
	}
	p.GGUF, p.Name, p.Size = &sf, sf.Path, f.Size
	return p, nil
}

// bundle builds the set of the files take names (a path ending in / is
// every file under it), each at its target path.
func (p *Plan) bundle(c *hub.Client, tree *hub.Tree, name string, take []catalog.File) (*Plan, error) {
	set := &download.Set{Name: name, Source: p.Source(), StartedAt: time.Now().UTC()}
	for _, want := range take {
		if !want.IsDir() {
			f, ok := tree.Find(want.Path)
			if !ok {
				return nil, fmt.Errorf("%s at %s has no file %s", p.Repo, short(p.Commit), want.Path)
			}
			sf, err := p.setFile(c, f, want.Target())
			if err != nil {
				return nil, err
			}
			set.Files = append(set.Files, sf)
			continue
		}
		n := 0
		for _, f := range tree.Files {
			rest, ok := strings.CutPrefix(f.Path, want.Path)
			if !ok {
				continue
			}
			sf, err := p.setFile(c, f, want.Target()+rest)
			if err != nil {
				return nil, err
			}
			set.Files = append(set.Files, sf)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("%s at %s has no folder %s (or it is empty)", p.Repo, short(p.Commit), want.Path)
		}
	}
	if len(set.Files) == 0 {
		return nil, errors.New(p.Repo + " has no files to download")
	}
	p.Bundle, p.Name, p.Size = set, name, set.Size()
	return p, nil
}
