// Package hub is a client of the Hugging Face Hub's public HTTP API, the
// part a model manager needs: model search filtered to the formats anechat
// runs (GGUF files and Core ML bundles), a repository's information (its
// commit, whether it is gated), its file tree with each file's size and,
// for a file kept in Git LFS, its sha256, and the resolve URL a file is
// downloaded from. The app's Models page and `anechat search` / `anechat
// pull` run on it; it knows nothing of the data directory.
//
// The shapes it reads are the ones the Hub documents and its own Python
// client (huggingface_hub: HfApi.list_models, model_info, list_repo_tree,
// hf_raise_for_status) parses:
//
//   - GET /api/models?search=TEXT&filter=TAG&sort=downloads&direction=-1&limit=N
//     answers a JSON array of models ({"id", "downloads", "likes", "tags",
//     "gated", ...}); "gated" is false, "auto" or "manual";
//   - GET /api/models/OWNER/NAME/revision/REVISION answers one model with
//     its commit ("sha");
//   - GET /api/models/OWNER/NAME/tree/REVISION?recursive=true answers a JSON
//     array of {"type": "file"|"directory", "path", "size", "oid", "lfs":
//     {"oid": SHA256, "size", "pointerSize"}}, paged by a Link header
//     (rel="next") like GitHub's;
//   - GET /OWNER/NAME/resolve/REVISION/PATH is the file (a redirect to a CDN
//     for an LFS file);
//   - an error names itself in the X-Error-Code header (GatedRepo,
//     RepoNotFound, RevisionNotFound, EntryNotFound); a missing or private
//     repository may also answer 401 without one; 429 is rate limiting.
//
// A gated repository's files download with a Hugging Face access token
// the user gives (WithToken), sent to the Hub's own host only: never to
// the CDN its downloads redirect to (Authorize).
//
// Errors are *Error, in plain words, and match ErrGated, ErrNotFound,
// ErrRateLimited, ErrOffline and ErrTokenRefused with errors.Is; none of
// them holds the token.
package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"anechat/internal/download"
)

// DefaultURL is the Hub the client talks to when none is given.
const DefaultURL = "https://huggingface.co"

// EnvURL is the environment variable that points the client at another Hub
// or a mirror (the command line's --hub wins over it).
const EnvURL = "ANECHAT_HUB"

// BaseURL returns the Hub to use: flag when given, else $ANECHAT_HUB, else
// DefaultURL.
func BaseURL(flag string) string {
	if s := strings.TrimSpace(flag); s != "" {
		return s
	}
	if s := strings.TrimSpace(os.Getenv(EnvURL)); s != "" {
		return s
	}
	return DefaultURL
}

// Bounds on what one answer may hold: the API's answers are small, and a
// server that sends more is not the Hub.
const (
	maxJSON     = 32 << 20 // bytes of one JSON answer
	maxPages    = 100      // pages of one tree
	maxFiles    = 100_000  // entries of one tree
	maxSearch   = 100      // models asked for in one search
	defaultWait = 30 * time.Second
)

// Client talks to one Hub.
type Client struct {
	base *url.URL
	// http carries the requests (with the token, to the Hub only:
	// Authorize); plain is the client it was made from.
	http, plain *http.Client
	// token is the Hugging Face access token sent, "" for none (WithToken).
	token string
}

// New returns a client of the Hub at base (https, or plain http only to
// this machine: download.CheckURL, the rule every download follows).
// hc nil means a client with a 30-second timeout per request.
func New(base string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(base), "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("hub: %q is not a URL: want e.g. %s", base, DefaultURL)
	}
	if err := download.CheckURL(u); err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("hub: %s: the Hub's address takes no query or fragment", base)
	}
	if hc == nil {
		hc = &http.Client{Timeout: defaultWait}
	}
	return &Client{base: u, http: hc, plain: hc}, nil
}

// URL is the Hub's base URL.
func (c *Client) URL() string { return c.base.String() }

// RepoURL is the repository's page on the Hub: where a gated repository's
// licence is accepted.
func (c *Client) RepoURL(repo string) string { return c.base.String() + "/" + repo }

// ResolveURL is the URL of the file at path in repo at revision.
func (c *Client) ResolveURL(repo, revision, file string) string {
	return c.base.String() + "/" + repo + "/resolve/" + url.PathEscape(revision) + "/" + escapePath(file)
}

// escapePath escapes each segment of a slash-separated path.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// Format is a model format the search filters on: the Hub's tag for it.
type Format string

// The formats anechat runs.
const (
	GGUF   Format = "gguf"   // llama.cpp's single-file format
	CoreML Format = "coreml" // Core ML models and bundles
)

// Formats lists every format Search looks for when none is named.
var Formats = []Format{GGUF, CoreML}

// Model is one repository as the search and the repository information
// describe it.
type Model struct {
	// ID is "OWNER/NAME".
	ID        string   `json:"id"`
	Downloads int64    `json:"downloads"`
	Likes     int64    `json:"likes"`
	Tags      []string `json:"tags"`
	// Library is the library the Hub files it under ("gguf", "coreml", ...).
	Library     string `json:"library_name"`
	PipelineTag string `json:"pipeline_tag"`
	// Gated is "" for an open repository, "auto" or "manual" when its
	// licence must be accepted on the Hub before its files download.
	Gated   Gate `json:"gated"`
	Private bool `json:"private"`
	// SHA is the commit the answer describes (the repository information;
	// the search may leave it out).
	SHA          string `json:"sha"`
	LastModified string `json:"lastModified"`
	// Format is the format the search found it under ("" from Info).
	Format Format `json:"-"`
}

// Gate is the Hub's "gated" field: false, "auto" or "manual".
type Gate string

// UnmarshalJSON reads false (or null) as "" and a string as itself.
func (g *Gate) UnmarshalJSON(b []byte) error {
	switch s := strings.TrimSpace(string(b)); s {
	case "false", "null":
		*g = ""
		return nil
	case "true":
		*g = "auto"
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("gated: want false, \"auto\" or \"manual\", got %s", b)
	}
	*g = Gate(s)
	return nil
}

// repoName is what a repository id may be: OWNER/NAME, each of letters,
// digits, '-', '_' and '.', not starting with '.' or '-' (the Hub's rule,
// narrowed: no path tricks reach a URL).
var repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$`)

// CheckRepo refuses a repository id that is not OWNER/NAME.
func CheckRepo(repo string) error {
	if !repoName.MatchString(repo) || strings.Contains(repo, "..") {
		return fmt.Errorf("hub: %q is not a repository: want OWNER/NAME (e.g. unsloth/gemma-3-270m-it-GGUF)", repo)
	}
	return nil
}

// revisionName is a branch, tag or commit: no '..', no leading '/' or '-'.
var revisionName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.\-/]{0,199}$`)

// CheckRevision refuses a revision that cannot be a branch, tag or commit.
func CheckRevision(rev string) error {
	if !revisionName.MatchString(rev) || strings.Contains(rev, "..") || strings.HasSuffix(rev, "/") {
		return fmt.Errorf("hub: %q is not a revision: want a branch, a tag or a commit (e.g. main)", rev)
	}
	return nil
}

// IsCommit reports whether rev is a full commit id (40 hex digits): a
// revision that cannot move.
func IsCommit(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	for _, r := range rev {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// Search returns up to limit models (at most 100) whose name matches text,
// of format (or of every format in Formats when ""), most downloaded first.
func (c *Client) Search(ctx context.Context, text string, format Format, limit int) ([]Model, error) {
	if limit <= 0 || limit > maxSearch {
		limit = maxSearch
	}
	formats := Formats
	if format != "" {
		formats = []Format{format}
	}
	var out []Model
	seen := map[string]bool{}
	for _, f := range formats {
		q := url.Values{}
		if s := strings.TrimSpace(text); s != "" {
			q.Set("search", s)
		}
		q.Set("filter", string(f))
		q.Set("sort", "downloads")
		q.Set("direction", "-1")
		q.Set("limit", strconv.Itoa(limit))
		q.Add("expand", "downloads")
		q.Add("expand", "likes")
		q.Add("expand", "tags")
		q.Add("expand", "gated")
		q.Add("expand", "library_name")
		q.Add("expand", "pipeline_tag")
		q.Add("expand", "lastModified")
		var page []Model
		if _, err := c.getJSON(ctx, c.api("/api/models", q), &page, target{}); err != nil {
			return nil, err
		}
		for _, m := range page {
			if CheckRepo(m.ID) != nil || seen[m.ID] {
				continue // not a repository we could fetch from
			}
			seen[m.ID] = true
			m.Format = f
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Downloads > out[j].Downloads })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Info returns repo's information at revision ("" for main), whose SHA is
// the commit the revision names now: what a download pins.
func (c *Client) Info(ctx context.Context, repo, revision string) (Model, error) {
	if revision == "" {
		revision = "main"
	}
	if err := CheckRepo(repo); err != nil {
		return Model{}, err
	}
	if err := CheckRevision(revision); err != nil {
		return Model{}, err
	}
	var m Model
	t := target{repo: repo, revision: revision}
	if _, err := c.getJSON(ctx, c.api("/api/models/"+repo+"/revision/"+url.PathEscape(revision), nil), &m, t); err != nil {
		return Model{}, err
	}
	if m.ID == "" {
		m.ID = repo
	}
	if !IsCommit(m.SHA) {
		return Model{}, &Error{Kind: ErrBadAnswer, Repo: repo, Revision: revision,
			Detail: fmt.Sprintf("its answer names no commit (sha %q)", m.SHA)}
	}
	return m, nil
}

// File is one file of a repository's tree.
type File struct {
	// Path is relative to the repository's root, slash-separated.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// OID is the Git blob id (sha1 of "blob SIZE\0" and the content) of a
	// file kept in Git, or of the LFS pointer of one kept in LFS.
	OID string `json:"oid"`
	// LFS describes a file kept in Git LFS; nil for one kept in Git.
	LFS *LFS `json:"lfs,omitempty"`
}

// LFS is a file's Git LFS record.
type LFS struct {
	// SHA256 is the file's sha256 (lower-case hex; the API's "oid").
	SHA256      string `json:"oid"`
	Size        int64  `json:"size"`
	PointerSize int64  `json:"pointerSize"`
}

// treeEntry is one entry of the tree answer.
type treeEntry struct {
	Type string `json:"type"`
	File
}

// Tree is a repository's files at one commit.
type Tree struct {
	Repo string
	// Commit is the commit the tree is of (40 hex digits).
	Commit string
	Files  []File
}

// Find returns the file at path.
func (t *Tree) Find(p string) (File, bool) {
	for _, f := range t.Files {
		if f.Path == p {
			return f, true
		}
	}
	return File{}, false
}

// Size is the bytes of every file.
func (t *Tree) Size() int64 {
	var n int64
	for _, f := range t.Files {
		n += f.Size
	}
	return n
}

// GGUFs lists the tree's .gguf files: the quantisations a GGUF repository
// offers, one file each.
func (t *Tree) GGUFs() []File {
	var out []File
	for _, f := range t.Files {
		if strings.EqualFold(path.Ext(f.Path), ".gguf") {
			out = append(out, f)
		}
	}
	return out
}

// Tree lists every file of repo at commit (a commit id: resolve a branch
// with Info first, so that the files listed are the files downloaded).
// Each file's entry is checked: a plain relative path, a size, an LFS
// sha256 of 64 hex digits or a Git blob id of 40.
func (c *Client) Tree(ctx context.Context, repo, commit string) (*Tree, error) {
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	if !IsCommit(commit) {
		return nil, fmt.Errorf("hub: tree of %s: %q is not a commit id (40 hex digits): resolve the revision first", repo, commit)
	}
	t := &Tree{Repo: repo, Commit: commit}
	tg := target{repo: repo, revision: commit}
	next := c.api("/api/models/"+repo+"/tree/"+commit, url.Values{"recursive": {"true"}})
	for page := 0; next != ""; page++ {
		if page == maxPages {
			return nil, &Error{Kind: ErrBadAnswer, Repo: repo, Revision: commit, Detail: fmt.Sprintf("its tree runs past %d pages", maxPages)}
		}
		var entries []treeEntry
		resp, err := c.getJSON(ctx, next, &entries, tg)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.Type != "file" {
				continue // "directory": its files are listed too (recursive)
			}
			if err := checkFile(e.File); err != nil {
				return nil, &Error{Kind: ErrBadAnswer, Repo: repo, Revision: commit, Detail: err.Error()}
			}
			if e.LFS != nil {
				e.LFS.SHA256 = strings.ToLower(e.LFS.SHA256)
			}
			t.Files = append(t.Files, e.File)
			if len(t.Files) > maxFiles {
				return nil, &Error{Kind: ErrBadAnswer, Repo: repo, Revision: commit, Detail: fmt.Sprintf("its tree has more than %d files", maxFiles)}
			}
		}
		if next, err = c.nextPage(resp); err != nil {
			return nil, &Error{Kind: ErrBadAnswer, Repo: repo, Revision: commit, Detail: err.Error()}
		}
	}
	sort.Slice(t.Files, func(i, j int) bool { return t.Files[i].Path < t.Files[j].Path })
	return t, nil
}

// checkFile refuses a tree entry that could not be a file of a checkout.
func checkFile(f File) error {
	if err := CheckPath(f.Path); err != nil {
		return err
	}
	if f.Size < 0 {
		return fmt.Errorf("file %s: size %d", f.Path, f.Size)
	}
	if f.LFS != nil {
		if !isHex(f.LFS.SHA256, 64) {
			return fmt.Errorf("file %s: lfs oid %q is not a sha256", f.Path, f.LFS.SHA256)
		}
		if f.LFS.Size != f.Size {
			return fmt.Errorf("file %s: size %d, lfs size %d", f.Path, f.Size, f.LFS.Size)
		}
		return nil
	}
	if !isHex(strings.ToLower(f.OID), 40) {
		return fmt.Errorf("file %s: oid %q is not a Git blob id", f.Path, f.OID)
	}
	return nil
}

// CheckPath refuses a repository path that is not plain and relative: no
// empty, "." or ".." segment, no backslash, no leading slash, no NUL.
func CheckPath(p string) error {
	if p == "" || len(p) > 1000 || strings.ContainsAny(p, "\\\x00") || strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q is not a plain relative path", p)
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("path %q is not a plain relative path", p)
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

// api is the URL of an API path on the Hub.
func (c *Client) api(p string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + p
	u.RawPath = ""
	if q != nil {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// nextPage returns the Link header's rel="next" URL, "" for none. It must
// stay on the Hub: a page elsewhere is refused.
func (c *Client) nextPage(resp *http.Response) (string, error) {
	for _, h := range resp.Header.Values("Link") {
		for _, part := range strings.Split(h, ",") {
			ref, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
				continue
			}
			ref = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(ref), "<"), ">")
			u, err := resp.Request.URL.Parse(ref)
			if err != nil {
				return "", fmt.Errorf("its next-page link %q is not a URL", ref)
			}
			if u.Scheme != c.base.Scheme || u.Host != c.base.Host {
				return "", fmt.Errorf("its next-page link leads off the Hub (%s)", u.Host)
			}
			return u.String(), nil
		}
	}
	return "", nil
}

// target is what a request is about, for its error.
type target struct {
	repo, revision, path string
}

// getJSON GETs u and decodes its JSON answer into v.
func (c *Client) getJSON(ctx context.Context, u string, v any, t target) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, &Error{Kind: ErrOffline, Repo: t.repo, Revision: t.revision, Host: c.base.Host, Detail: cause(err)}
	}
	defer resp.Body.Close()
	if err := c.StatusError(resp, t.repo, t.revision, t.path); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJSON+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, &Error{Kind: ErrOffline, Repo: t.repo, Revision: t.revision, Host: c.base.Host, Detail: cause(err)}
	}
	if len(body) > maxJSON {
		return nil, &Error{Kind: ErrBadAnswer, Repo: t.repo, Revision: t.revision, Detail: fmt.Sprintf("it answered more than %d bytes", maxJSON)}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, &Error{Kind: ErrBadAnswer, Repo: t.repo, Revision: t.revision, Detail: fmt.Sprintf("its answer to %s is not the JSON the API documents: %v", shown(u), err)}
	}
	return resp, nil
}

// shown is u without its query.
func shown(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.RawQuery = ""
	return u.String()
}

// cause is a transport error's own words (net/http's repeat the URL).
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
