// Package catalog is the curated list of models anechat offers by name
// (catalog.json, shipped in the binary), and what a model needs of a
// machine: the memory it takes and whether it fits this one.
//
// An entry names a repository, a branch and the files to take. Unpinned,
// the Hub's tree at the commit the branch names when the download starts
// gives each file's size and sha256, and the download is pinned to that
// commit (internal/pull). Pinned (Commit and Pins, written by a maintainer
// with `go run ./internal/catalog/pin`, which reads them from the Hub's
// tree), the download is of that commit and every file must be the one
// pinned. See the _doc of catalog.json.
package catalog

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"anechat/internal/hub"
)

//go:embed catalog.json
var catalogJSON []byte

// Formats of an entry.
const (
	FormatGGUF   = "gguf"   // one .gguf file
	FormatCoreML = "coreml" // a Core ML bundle: a folder of files
)

// Backends an entry runs on.
const (
	BackendCPU    = "cpu"    // every platform
	BackendCoreML = "coreml" // the Neural Engine, on an Apple silicon Mac
)

// Entry is one model of the catalog.
type Entry struct {
	// Name is how `anechat pull NAME` and the window name it: lower-case
	// letters, digits, '.', '_' and '-'.
	Name  string `json:"name"`
	Title string `json:"title"`
	// Repo is the Hugging Face repository, OWNER/NAME.
	Repo string `json:"repo"`
	// Revision is the branch (or tag, or commit) to download; a branch is
	// resolved to its commit when the download starts and pinned then.
	Revision string `json:"revision"`
	Format   string `json:"format"`
	Backend  string `json:"backend"`
	// Context is the model's context length in tokens (its model card's).
	Context int `json:"context"`
	// Licence names the weights' licence; LicenceURL is its text.
	Licence    string `json:"licence"`
	LicenceURL string `json:"licenceURL"`
	// AcceptOnHub is true when the repository is gated: the licence must
	// be accepted on its Hugging Face page before the files download.
	AcceptOnHub bool `json:"acceptOnHub"`
	// ApproxBytes is the download's approximate size from the sources, 0
	// when they do not say; the tree's sizes replace it.
	ApproxBytes int64  `json:"approxBytes,omitempty"`
	Files       []File `json:"files"`
	// Sources say where each fact of the entry comes from.
	Sources []string `json:"sources"`
	// Commit pins the entry to the commit Revision named when a maintainer
	// last ran the pin script (`go run ./internal/catalog/pin`, which reads
	// the Hub); "" while not pinned. A pinned entry downloads that commit
	// whatever the branch names now.
	Commit string `json:"commit,omitempty"`
	// Pins are the repository's files a pinned entry downloads, each with
	// its size and checksum from the Hub's tree at Commit: the download
	// must take exactly these.
	Pins []Pin `json:"pins,omitempty"`
}

// Pin is one file of a pinned entry as the Hub's tree gave it.
type Pin struct {
	// Path is the file's path in the repository.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is an LFS file's sha256, GitBlob a file kept in Git's blob id
	// (one of the two).
	SHA256  string `json:"sha256,omitempty"`
	GitBlob string `json:"gitBlob,omitempty"`
}

// TargetRevision is the revision a download of the entry asks for: its
// pinned commit, else its branch.
func (e *Entry) TargetRevision() string {
	if e.Commit != "" {
		return e.Commit
	}
	return e.Revision
}

// File is a file (or, with a trailing slash, a folder) of the repository
// that the entry takes.
type File struct {
	Path string `json:"path"`
	// As is where it goes in the installed bundle, "" for the same path.
	As string `json:"as,omitempty"`
}

// Target is where f goes in the installed folder.
func (f File) Target() string {
	if f.As != "" {
		return f.As
	}
	return f.Path
}

// IsDir reports whether f names a folder (every file under it).
func (f File) IsDir() bool { return strings.HasSuffix(f.Path, "/") }

// RepoURL is the entry's page on the Hub at base (where a gated
// repository's licence is accepted).
func (e *Entry) RepoURL(base string) string { return strings.TrimRight(base, "/") + "/" + e.Repo }

// Catalog is the list, best first.
type Catalog struct {
	Doc     []string `json:"_doc"`
	Entries []Entry  `json:"entries"`
}

// Find returns the entry named name.
func (c *Catalog) Find(name string) (*Entry, bool) {
	for i := range c.Entries {
		if c.Entries[i].Name == name {
			return &c.Entries[i], true
		}
	}
	return nil, false
}

// Names lists the entries' names in order.
func (c *Catalog) Names() []string {
	out := make([]string, len(c.Entries))
	for i, e := range c.Entries {
		out[i] = e.Name
	}
	return out
}

// Load returns the catalog shipped in the binary.
func Load() (*Catalog, error) { return Parse(catalogJSON) }

// Parse reads and checks a catalog: every field known (a sha256 or a
// commit slipped in is an unknown field: they come from the Hub), every
// entry complete and consistent. An error names the entry and the field.
func Parse(b []byte) (*Catalog, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var c Catalog
	if err := d.Decode(&c); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if len(c.Entries) == 0 {
		return nil, fmt.Errorf("catalog: no entries")
	}
	seen := map[string]bool{}
	for i := range c.Entries {
		e := &c.Entries[i]
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("catalog: entry %d (%q): %w", i+1, e.Name, err)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("catalog: entry %d: the name %q is taken by an earlier entry", i+1, e.Name)
		}
		seen[e.Name] = true
	}
	return &c, nil
}

var entryName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func (e *Entry) check() error {
	if !entryName.MatchString(e.Name) {
		return fmt.Errorf("name: want lower-case letters, digits, '.', '_' and '-'")
	}
	if strings.Contains(e.Name, "/") || strings.Contains(e.Name, "@") {
		return fmt.Errorf("name: a name cannot look like a repository")
	}
	if strings.TrimSpace(e.Title) == "" {
		return fmt.Errorf("title: empty")
	}
	if err := hub.CheckRepo(e.Repo); err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	if err := hub.CheckRevision(e.Revision); err != nil {
		return fmt.Errorf("revision: %w", err)
	}
	switch {
	case e.Format == FormatGGUF && e.Backend != BackendCPU:
		return fmt.Errorf("backend %q: a GGUF file runs on the cpu backend", e.Backend)
	case e.Format == FormatCoreML && e.Backend != BackendCoreML:
		return fmt.Errorf("backend %q: a Core ML bundle runs on the coreml backend", e.Backend)
	case e.Format != FormatGGUF && e.Format != FormatCoreML:
		return fmt.Errorf("format %q: want gguf or coreml", e.Format)
	}
	if e.Context <= 0 || e.Context > 1<<24 {
		return fmt.Errorf("context %d: want the model's context length in tokens", e.Context)
	}
	if strings.TrimSpace(e.Licence) == "" {
		return fmt.Errorf("licence: empty")
	}
	if u, err := url.Parse(e.LicenceURL); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("licenceURL %q: want an https link to the licence", e.LicenceURL)
	}
	if e.ApproxBytes < 0 {
		return fmt.Errorf("approxBytes %d", e.ApproxBytes)
	}
	if len(e.Sources) == 0 {
		return fmt.Errorf("sources: say where the entry's facts come from")
	}
	if err := e.checkPins(); err != nil {
		return err
	}
	if len(e.Files) == 0 {
		return fmt.Errorf("files: none")
	}
	if e.Format == FormatGGUF {
		f := e.Files[0]
		if len(e.Files) != 1 || f.IsDir() || f.As != "" || !strings.EqualFold(path.Ext(f.Path), ".gguf") || strings.Contains(f.Path, "/") {
			return fmt.Errorf("files: a GGUF entry takes one .gguf file at the repository's root, as itself")
		}
		return hub.CheckPath(f.Path)
	}
	targets := map[string]bool{}
	for _, f := range e.Files {
		if err := hub.CheckPath(strings.TrimSuffix(f.Path, "/")); err != nil {
			return fmt.Errorf("files: %w", err)
		}
		t := f.Target()
		if f.IsDir() != strings.HasSuffix(t, "/") {
			return fmt.Errorf("files: %s goes to %s: a folder goes to a folder (both end in /), a file to a file", f.Path, t)
		}
		if err := hub.CheckPath(strings.TrimSuffix(t, "/")); err != nil || strings.HasPrefix(t, ".") {
			return fmt.Errorf("files: %s goes to %q, not a plain path inside the bundle", f.Path, t)
		}
		if targets[t] {
			return fmt.Errorf("files: two files go to %s", t)
		}
		targets[t] = true
	}
	return nil
}

// checkPins holds a pinned entry to its shape: a commit of 40 hex digits
// and one pin per file, each a plain path with a size and one checksum
// (written by the pin script, never by hand).
func (e *Entry) checkPins() error {
	switch {
	case e.Commit == "" && len(e.Pins) == 0:
		return nil
	case e.Commit == "":
		return fmt.Errorf("pins: no commit: the pins are of a commit (run go run ./internal/catalog/pin %s)", e.Name)
	case !hub.IsCommit(e.Commit):
		return fmt.Errorf("commit %q: want 40 hexadecimal digits (run go run ./internal/catalog/pin %s)", e.Commit, e.Name)
	case len(e.Pins) == 0:
		return fmt.Errorf("commit: no pins: a pinned entry lists its files (run go run ./internal/catalog/pin %s)", e.Name)
	}
	seen := map[string]bool{}
	for _, p := range e.Pins {
		if err := hub.CheckPath(p.Path); err != nil {
			return fmt.Errorf("pins: %w", err)
		}
		if seen[p.Path] {
			return fmt.Errorf("pins: %s twice", p.Path)
		}
		seen[p.Path] = true
		switch {
		case p.Size < 0:
			return fmt.Errorf("pins: %s: size %d", p.Path, p.Size)
		case (p.SHA256 == "") == (p.GitBlob == ""):
			return fmt.Errorf("pins: %s: want one checksum, sha256 (a file in LFS) or gitBlob (a file in Git)", p.Path)
		case p.SHA256 != "" && !isHex(p.SHA256, 64):
			return fmt.Errorf("pins: %s: sha256 %q is not 64 hexadecimal digits", p.Path, p.SHA256)
		case p.GitBlob != "" && !isHex(p.GitBlob, 40):
			return fmt.Errorf("pins: %s: gitBlob %q is not 40 hexadecimal digits", p.Path, p.GitBlob)
		}
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// Pin returns the pin of the repository file at path, if the entry has one.
func (e *Entry) Pin(path string) (Pin, bool) {
	for _, p := range e.Pins {
		if p.Path == path {
			return p, true
		}
	}
	return Pin{}, false
}
