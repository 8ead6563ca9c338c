// Package hubtest is a fake Hugging Face Hub for tests: an HTTP server on
// 127.0.0.1 that serves the search, repository information, tree and
// resolve endpoints (internal/hub describes them) from fixtures, with
// faults a test turns on: a connection dropped part-way through a file, a
// file whose bytes are not the ones its tree entry names, rate limiting,
// a gated repository (served only with the access token Token, and only on
// the Hub's own host: SplitCDN puts the files' bytes on another).
//
// The fixtures (testdata/fakehub.json) are written by gen.go (`go generate
// ./internal/hub/hubtest`); their answers have the shapes the Hub's API
// documents, because the real Hub is not reachable from the machines the
// tests run on. A file kept in Git has its text in the fixtures; a file
// kept in LFS is generated (Bytes) or, when the fixtures name it external,
// read from a file the test supplies (Server.Blobs), such as the real tiny
// model ../shared/models/stories260K.gguf.
package hubtest

//go:generate go run gen.go

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fixtures is testdata/fakehub.json.
type Fixtures struct {
	// Comment says where the fixtures come from.
	Comment []string `json:"_comment"`
	// Search lists the models the search endpoint finds, each in the
	// shape /api/models answers.
	Search []json.RawMessage `json:"search"`
	// Repos are the repositories whose information, tree and files are
	// served, by OWNER/NAME.
	Repos map[string]*Repo `json:"repos"`
}

// Repo is one repository of the fake Hub at one commit.
type Repo struct {
	// Info is the repository information answer (with "sha" the commit).
	Info json.RawMessage `json:"info"`
	// Commit is the commit every branch names; Branches are the branch
	// names that resolve to it.
	Commit   string   `json:"commit"`
	Branches []string `json:"branches"`
	// Gated makes every file answer 401 with X-Error-Code GatedRepo
	// without a token and 403 with one whose account has no access (as the
	// Hub does for a gated repository whose licence was not accepted); with
	// Token, the files are served.
	Gated bool `json:"gated"`
	// Tree is the tree answer's entries.
	Tree []json.RawMessage `json:"tree"`
	// Texts holds the content of the files kept in Git, by path.
	Texts map[string]string `json:"texts"`
	// External names the LFS files whose content the test supplies
	// (Server.Blobs), by path; every other LFS file is Bytes.
	External map[string]string `json:"external"`
}

// entry is a tree entry as the server reads it.
type entry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	OID  string `json:"oid"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// Load reads the committed fixtures.
func Load() (*Fixtures, error) {
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "testdata", "fakehub.json"))
	if err != nil {
		return nil, err
	}
	var f Fixtures
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("hubtest: fakehub.json: %w", err)
	}
	return &f, nil
}

// Server is a running fake Hub.
type Server struct {
	// URL is the Hub's base URL (http://127.0.0.1:PORT).
	URL string
	fx  *Fixtures
	srv *httptest.Server
	// Blobs maps an external file's name (Repo.External) to the local
	// file holding its content.
	Blobs map[string]string
	// PageSize is how many tree entries one page holds (0: all).
	PageSize int
	// cdn is the server of the LFS files' bytes when SplitCDN moved them to
	// a host of their own; "" while this server serves them.
	cdnURL string

	mu sync.Mutex
	// faults
	drop      map[string]int64 // resolve path -> bytes sent before the connection drops (once)
	corrupt   map[string]bool  // resolve path -> a byte flipped in every response
	rateLimit int              // API requests still to answer 429
	slowChunk int              // with slowWait: file bodies sent this many bytes at a time
	slowWait  time.Duration
	// requests seen
	log []Request
}

// Request is one request the server saw.
type Request struct {
	Method, Path, Query, Range string
	// Host is the host:port asked (the Hub's, or the CDN's after SplitCDN).
	Host string
	// Authorization is the request's Authorization header, "" for none.
	Authorization string
}

// The access tokens the fake Hub knows. Any other token sent is refused,
// on every endpoint, with the Hub's 401 "Invalid credentials in
// Authorization header".
const (
	// Token is an account's token that has accepted every gated
	// repository's licence: their files are served with it.
	Token = "hf_anechatFakeHubGrantedToken0000000"
	// UngrantedToken is a valid token of an account that accepted no
	// licence: a gated repository's files answer 403 GatedRepo.
	UngrantedToken = "hf_anechatFakeHubUngrantedToken00000"
)

// SplitCDN serves the LFS files' bytes from a second server (another
// host:port, as the Hub's CDN is another host): the resolve URLs redirect
// there. t.Cleanup stops it.
func (s *Server) SplitCDN(t testing.TB) {
	t.Helper()
	cdn := httptest.NewServer(s.Handler())
	t.Cleanup(cdn.Close)
	s.mu.Lock()
	s.cdnURL = cdn.URL
	s.mu.Unlock()
}

// Start starts the fake Hub on 127.0.0.1 with the committed fixtures;
// t.Cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(s.Handler())
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// New returns a fake Hub with the committed fixtures that is not serving
// yet: a program outside the tests (the e2e run's internal/e2ehub) serves
// Handler on its own listener and sets URL to its address.
func New() (*Server, error) {
	fx, err := Load()
	if err != nil {
		return nil, err
	}
	return &Server{fx: fx, Blobs: map[string]string{}, drop: map[string]int64{}, corrupt: map[string]bool{}}, nil
}

// Handler answers the Hub's endpoints.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// Close stops the server Start started: later requests find nothing
// listening.
func (s *Server) Close() { s.srv.Close() }

// Fixtures returns the fixtures served.
func (s *Server) Fixtures() *Fixtures { return s.fx }

// DropAfter makes the next download of file (repo's path) stop after n
// bytes, the connection closed as a network failure would.
func (s *Server) DropAfter(repo, file string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop[repo+"/"+file] = n
}

// Corrupt makes every download of file send bytes whose sha256 is not the
// one its tree entry names (one byte flipped), or, with on false, the
// right bytes again.
func (s *Server) Corrupt(repo, file string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.corrupt[repo+"/"+file] = on
}

// Slow makes file bodies trickle: n bytes at a time, wait between, so that a
// test can stop a transfer part-way through a file.
func (s *Server) Slow(n int, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slowChunk, s.slowWait = n, wait
}

// RateLimit makes the next n API requests answer 429 with Retry-After.
func (s *Server) RateLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit = n
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// Content returns the bytes the server sends for file of repo.
func (s *Server) Content(repo, file string) ([]byte, error) {
	r := s.fx.Repos[repo]
	if r == nil {
		return nil, fmt.Errorf("hubtest: no repository %s", repo)
	}
	if txt, ok := r.Texts[file]; ok {
		return []byte(txt), nil
	}
	e, ok := r.find(file)
	if !ok {
		return nil, fmt.Errorf("hubtest: %s has no file %s", repo, file)
	}
	if name, ok := r.External[file]; ok {
		p := s.Blobs[name]
		if p == "" {
			return nil, fmt.Errorf("hubtest: %s/%s is external (%s): set Server.Blobs[%q]", repo, file, name, name)
		}
		return os.ReadFile(p)
	}
	return Bytes(repo, file, e.Size), nil
}

func (r *Repo) find(p string) (entry, bool) {
	for _, raw := range r.Tree {
		var e entry
		if json.Unmarshal(raw, &e) == nil && e.Type == "file" && e.Path == p {
			return e, true
		}
	}
	return entry{}, false
}

// resolves reports whether rev names the repository's commit.
func (r *Repo) resolves(rev string) bool {
	if rev == r.Commit {
		return true
	}
	for _, b := range r.Branches {
		if b == rev {
			return true
		}
	}
	return false
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.log = append(s.log, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Range: r.Header.Get("Range"),
		Host: r.Host, Authorization: r.Header.Get("Authorization")})
	limited := false
	if strings.HasPrefix(r.URL.Path, "/api/") && s.rateLimit > 0 {
		s.rateLimit--
		limited = true
	}
	s.mu.Unlock()
	if limited {
		w.Header().Set("Retry-After", "7")
		hubError(w, http.StatusTooManyRequests, "", "You have exceeded our hourly quotas for action: api. We invite you to retry later.")
		return
	}
	p := r.URL.Path
	if auth := r.Header.Get("Authorization"); auth != "" && !strings.HasPrefix(p, "/cdn/") {
		if tok := strings.TrimPrefix(auth, "Bearer "); tok != Token && tok != UngrantedToken {
			hubError(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
			return
		}
	}
	switch {
	case p == "/api/whoami-v2":
		s.whoami(w, r)
	case p == "/api/models":
		s.search(w, r)
	case strings.HasPrefix(p, "/api/models/"):
		s.model(w, r, strings.TrimPrefix(p, "/api/models/"))
	case strings.HasPrefix(p, "/cdn/"):
		s.cdn(w, r, strings.TrimPrefix(p, "/cdn/"))
	default:
		s.resolve(w, r, strings.TrimPrefix(p, "/"))
	}
}

// whoami answers /api/whoami-v2: the account of a token it knows (an
// unknown one was refused before), 401 without one.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	switch r.Header.Get("Authorization") {
	case "Bearer " + Token:
		writeJSON(w, map[string]any{"type": "user", "name": "anechat-tester"})
	case "Bearer " + UngrantedToken:
		writeJSON(w, map[string]any{"type": "user", "name": "anechat-other"})
	default:
		hubError(w, http.StatusUnauthorized, "", "Invalid username or password.")
	}
}

// search answers /api/models: the fixtures' models whose tags hold the
// filter and whose id holds the search text, most downloaded first.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	text, filter := strings.ToLower(q.Get("search")), q.Get("filter")
	limit, _ := strconv.Atoi(q.Get("limit"))
	type hit struct {
		raw       json.RawMessage
		downloads int64
	}
	var hits []hit
	for _, raw := range s.fx.Search {
		var m struct {
			ID        string   `json:"id"`
			Tags      []string `json:"tags"`
			Downloads int64    `json:"downloads"`
		}
		if json.Unmarshal(raw, &m) != nil || !strings.Contains(strings.ToLower(m.ID), text) {
			continue
		}
		if filter != "" && !contains(m.Tags, filter) {
			continue
		}
		hits = append(hits, hit{raw, m.Downloads})
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].downloads > hits[j].downloads })
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]json.RawMessage, 0, len(hits))
	for _, h := range hits {
		out = append(out, h.raw)
	}
	writeJSON(w, out)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// model answers /api/models/OWNER/NAME/revision/REV and
// /api/models/OWNER/NAME/tree/REV.
func (s *Server) model(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) < 4 {
		hubError(w, http.StatusNotFound, "", "Sorry, we can't find the page you are looking for.")
		return
	}
	repoID, kind, rev := parts[0]+"/"+parts[1], parts[2], parts[3]
	repo := s.fx.Repos[repoID]
	if repo == nil {
		// The Hub answers 401 for a repository it does not show.
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return
	}
	if !repo.resolves(rev) {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	switch kind {
	case "revision":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Write(repo.Info)
	case "tree":
		s.tree(w, r, repo)
	default:
		hubError(w, http.StatusNotFound, "", "Sorry, we can't find the page you are looking for.")
	}
}

// tree answers one page of the tree, with a Link header to the next.
func (s *Server) tree(w http.ResponseWriter, r *http.Request, repo *Repo) {
	from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	if from < 0 || from > len(repo.Tree) {
		from = len(repo.Tree)
	}
	to := len(repo.Tree)
	if s.PageSize > 0 && from+s.PageSize < to {
		to = from + s.PageSize
		next := url.URL{Path: r.URL.Path}
		q := r.URL.Query()
		q.Set("cursor", strconv.Itoa(to))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, s.URL, next.String()))
	}
	writeJSON(w, repo.Tree[from:to])
}

// resolve answers OWNER/NAME/resolve/REV/PATH: a file kept in Git
// directly, an LFS file by a redirect to /cdn/ as the Hub redirects to its
// CDN, with the X-Repo-Commit, X-Linked-Etag and X-Linked-Size headers.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.SplitN(rest, "/", 5)
	if len(parts) < 5 || parts[2] != "resolve" {
		hubError(w, http.StatusNotFound, "", "Sorry, we can't find the page you are looking for.")
		return
	}
	repoID, rev, file := parts[0]+"/"+parts[1], parts[3], parts[4]
	repo := s.fx.Repos[repoID]
	if repo == nil {
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return
	}
	if !repo.resolves(rev) {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	if repo.Gated {
		switch r.Header.Get("Authorization") {
		case "Bearer " + Token:
		case "":
			hubError(w, http.StatusUnauthorized, "GatedRepo", "Access to model "+repoID+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
			return
		default:
			hubError(w, http.StatusForbidden, "GatedRepo", "Access to model "+repoID+" is restricted and you are not in the authorized list. Visit "+s.URL+"/"+repoID+" to ask for access.")
			return
		}
	}
	e, ok := repo.find(file)
	if !ok {
		hubError(w, http.StatusNotFound, "EntryNotFound", file+" does not exist on \""+rev+"\"")
		return
	}
	w.Header().Set("X-Repo-Commit", repo.Commit)
	if e.LFS != nil {
		w.Header().Set("X-Linked-Etag", `"`+e.LFS.OID+`"`)
		w.Header().Set("X-Linked-Size", strconv.FormatInt(e.Size, 10))
		s.mu.Lock()
		cdn := s.cdnURL
		s.mu.Unlock()
		http.Redirect(w, r, cdn+"/cdn/"+repoID+"/"+file, http.StatusFound)
		return
	}
	s.file(w, r, repoID, file, `"`+e.OID+`"`)
}

// cdn serves an LFS file's bytes, with ranges.
func (s *Server) cdn(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 3 || s.fx.Repos[parts[0]+"/"+parts[1]] == nil {
		http.NotFound(w, r)
		return
	}
	repoID, file := parts[0]+"/"+parts[1], parts[2]
	e, ok := s.fx.Repos[repoID].find(file)
	if !ok || e.LFS == nil {
		http.NotFound(w, r)
		return
	}
	s.file(w, r, repoID, file, `"`+e.LFS.OID+`"`)
}

// file sends a file's bytes (http.ServeContent: Range, If-Range against
// the ETag), applying the faults set for it.
func (s *Server) file(w http.ResponseWriter, r *http.Request, repoID, file, etag string) {
	b, err := s.Content(repoID, file)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	key := repoID + "/" + file
	s.mu.Lock()
	n, drop := s.drop[key]
	delete(s.drop, key)
	bad := s.corrupt[key]
	slow, wait := s.slowChunk, s.slowWait
	s.mu.Unlock()
	if bad && len(b) > 0 {
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 0xff
	}
	w.Header().Set("ETag", etag)
	if drop {
		w = &dropper{ResponseWriter: w, left: n}
	}
	if slow > 0 {
		w = &trickle{ResponseWriter: w, n: slow, wait: wait}
	}
	http.ServeContent(w, r, "", time.Time{}, strings.NewReader(string(b)))
}

// dropper passes left bytes on, then closes the connection mid-body.
type dropper struct {
	http.ResponseWriter
	left int64
}

func (d *dropper) Write(p []byte) (int, error) {
	if int64(len(p)) <= d.left {
		d.left -= int64(len(p))
		return d.ResponseWriter.Write(p)
	}
	d.ResponseWriter.Write(p[:d.left])
	d.left = 0
	if f, ok := d.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	// The server closes the connection of a handler that panics with
	// ErrAbortHandler, without a log line: the client sees the body end
	// short of its Content-Length.
	panic(http.ErrAbortHandler)
}

// trickle writes n bytes at a time, flushed, waiting between.
type trickle struct {
	http.ResponseWriter
	n    int
	wait time.Duration
}

func (t *trickle) Write(p []byte) (int, error) {
	sent := 0
	for len(p) > 0 {
		k := min(t.n, len(p))
		m, err := t.ResponseWriter.Write(p[:k])
		sent += m
		if err != nil {
			return sent, err
		}
		if f, ok := t.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		p = p[k:]
		time.Sleep(t.wait)
	}
	return sent, nil
}

func (t *trickle) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
