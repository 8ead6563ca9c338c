// Package download fetches one file over HTTP(S) into a partial file that
// survives interruptions: a later Fetch continues where the last one
// stopped with a Range request, guarded by If-Range (the server's ETag or
// Last-Modified), so a file that changed on the server is fetched again from
// the start instead of being spliced. Servers without range support are
// handled by starting over. The app's model downloads (app/downloads.go)
// run on it; it knows nothing of models. A set (set.go) is several files
// fetched this way, each checked, and installed as one folder at once (a
// Core ML bundle from a Hugging Face repository).
//
// A checksum is optional, so the transport is what keeps the file honest:
// every URL, the one asked for and each redirect's target, must be https
// (plain http only to this machine, CheckURL), checked before any
// connection to it is made. A body never fills the disk: the transfer stops
// at the size the server announced or the caller expected, at
// Options.MaxSize when neither is known, and before the volume keeps less
// than Options.Reserve free for the app's own data.
package download

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"anechat/engine/model/mmap"
	"anechat/internal/atomicfile"
	"anechat/internal/human"
)

// Meta describes a download in progress; Save keeps it beside the partial
// file so that it resumes after a restart.
type Meta struct {
	// URL is what was asked for (a redirect's target is not kept: the
	// origin may redirect elsewhere next time).
	URL string `json:"url"`
	// Name is the file name the finished file gets.
	Name string `json:"name"`
	// SHA256 is the expected checksum (lower-case hex), "" for none.
	SHA256 string `json:"sha256,omitempty"`
	// ETag and LastModified are the validators of the response the partial
	// file holds the start of; If-Range sends one of them.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	// Total is the file's size, -1 while unknown.
	Total int64 `json:"total"`
	// Expected is the file's size as the caller knows it beforehand (a
	// catalog's), 0 when it does not: a server announcing another size or
	// sending more is refused (*SizeError).
	Expected int64 `json:"expected,omitempty"`
	// StartedAt is when the download was first asked for.
	StartedAt time.Time `json:"startedAt"`
}

// StatusError is a response that is not the file: 404, 403, 500, ...
type StatusError struct {
	URL    string
	Code   int
	Status string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("download %s: the server answered %s", e.URL, e.Status)
}

// InterruptedError is a transfer that stopped before the end of the file
// (the connection dropped, the server stalled): what arrived is kept, and
// Fetch again continues from it.
type InterruptedError struct {
	Received, Total int64
	Err             error
}

func (e *InterruptedError) Error() string {
	// The URL is the caller's to show: keep the transport's own words
	// (net/http's errors repeat the method and the URL).
	cause := e.Err
	var ue *url.Error
	if errors.As(cause, &ue) {
		cause = ue.Err
	}
	var op *net.OpError
	if e.Received == 0 && errors.As(cause, &op) && op.Op == "dial" {
		return fmt.Sprintf("the server could not be reached: %v", cause)
	}
	got := strconv.FormatInt(e.Received, 10) + " bytes"
	if e.Total >= 0 {
		got = fmt.Sprintf("%d of %d bytes", e.Received, e.Total)
	}
	return fmt.Sprintf("the connection was lost after %s: %v", got, cause)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// ChecksumError is a finished file whose SHA-256 (or, for a file of a
// set kept in Git, whose Git blob id) is not the expected one.
type ChecksumError struct {
	Want, Got string
	// Kind names the checksum: "" for sha256, "git blob id".
	Kind string
}

func (e *ChecksumError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = "sha256"
	}
	return fmt.Sprintf("%s mismatch: expected %s, got %s", kind, e.Want, e.Got)
}

// URLError is a URL Fetch refuses to fetch: one CheckURL refuses, asked
// for or redirected to, or a redirect past MaxRedirects. Nothing was
// fetched from it: the check comes before the connection.
type URLError struct {
	// URL is the refused URL (without its query, which may hold a
	// signature), Via the one that redirected to it ("" for the URL asked
	// for).
	URL, Via string
	// Reason says what is wrong with URL.
	Reason string
}

func (e *URLError) Error() string {
	if e.Via != "" {
		return fmt.Sprintf("the server redirected to %s %s; refusing", e.URL, e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.URL, e.Reason)
}

// SizeError is a response larger than the file may be: more bytes than the
// server announced or the caller expected (Meta.Expected), an announced
// size other than the expected one, or more than Options.MaxSize. Nothing
// past the limit is written.
type SizeError struct {
	// Limit is the size the file may have; Of names whose limit it is.
	Limit int64
	Of    SizeLimit
	// Got is the size the server announced (Announced) or the bytes the
	// file would have held with the last read (at least Limit+1).
	Got       int64
	Announced bool
}

// SizeLimit names where a SizeError's limit comes from.
type SizeLimit int

// Where a size limit comes from.
const (
	LimitAnnounced SizeLimit = iota // the response's Content-Length or Content-Range
	LimitExpected                   // Meta.Expected, the caller's
	LimitMax                        // Options.MaxSize, for a file of unknown size
)

func (e *SizeError) Error() string {
	switch {
	case e.Of == LimitMax && e.Announced:
		return fmt.Sprintf("the server announces %s, more than the %s a download may be", human.Bytes(e.Got), human.Bytes(e.Limit))
	case e.Of == LimitMax:
		return fmt.Sprintf("the server sent more than %s, the most a download may be, and did not say how much; stopped", human.Bytes(e.Limit))
	case e.Announced:
		return fmt.Sprintf("the server announces %d bytes, but the file should have %d", e.Got, e.Limit)
	case e.Of == LimitExpected:
		return fmt.Sprintf("the server sent more than the %d bytes the file should have; stopped", e.Limit)
	}
	return fmt.Sprintf("the server sent more than the %d bytes it announced; stopped", e.Limit)
}

// SpaceError is a transfer stopped (or not started) because the volume
// holding the partial file would keep less than Options.Reserve free: the
// app's database and snapshots need room too. What arrived is kept.
type SpaceError struct {
	Dir           string
	Free, Reserve int64
	// Need is the bytes of the file still to come, 0 when unknown.
	Need int64
}

func (e *SpaceError) Error() string {
	msg := fmt.Sprintf("not enough free space: %s free, keeping %s in reserve for the app's data", human.Bytes(e.Free), human.Bytes(e.Reserve))
	if e.Need > 0 {
		msg += fmt.Sprintf(", and %s of the file still to come", human.Bytes(e.Need))
	}
	return msg
}

// chunk is how much is read and written at a time (and so how often
// progress is reported).
const chunk = 128 << 10

// spaceEvery is how many bytes are written between two looks at the free
// space: small beside the smallest reserve (1 GiB), so a disk filling by
// other means is noticed well before the reserve is gone.
const spaceEvery = 32 * chunk

// MaxRedirects is how many redirects Fetch follows for one request (Hugging
// Face uses one or two).
const MaxRedirects = 10

// DefaultMaxSize is the most bytes a file of unknown size may have
// (Options.MaxSize): above the largest single file Hugging Face stores
// (50 GB), so no real model is refused, yet a bound on an endless body.
const DefaultMaxSize = 64 << 30

// DefaultReserve is the free space kept on a volume of the given size
// (Options.Reserve): 2%, at least 1 GiB, enough for SQLite to finish its
// writes and the snapshot cache to notice it is full.
func DefaultReserve(volume int64) int64 { return max(1<<30, volume/50) }

// DefaultStall is how long a response may send nothing before Fetch gives
// up on it (Options.Stall).
const DefaultStall = 60 * time.Second

// Options say how Fetch talks to the server.
type Options struct {
	// Client sends the requests (nil: http.DefaultClient).
	Client *http.Client
	// Stall is how long Fetch waits for a response that sends nothing,
	// headers or body (time the caller takes between reads not counted),
	// before Fetch drops it with an *InterruptedError, so that the caller's
	// retry asks for the rest on a new connection (0: DefaultStall). Without
	// it a server that stops sending but keeps the connection open holds the
	// transfer forever: TCP keepalives only notice a peer that is gone.
	Stall time.Duration
	// MaxSize is the most bytes the file may have when Meta.Expected does
	// not say its size: the most the server may announce, and where a body
	// of unannounced size is stopped (0: DefaultMaxSize).
	MaxSize int64
	// Reserve is the free space the transfer leaves on the partial file's
	// volume (0 or less: DefaultReserve of the volume's size).
	Reserve int64
	// Space reports the bytes free for this user and the size of the
	// volume holding dir (nil: DiskSpace). When it fails the space is not
	// watched (MaxSize still bounds the file).
	Space func(dir string) (free, size int64, err error)
}

// errStalled is why a response was dropped by the stall watchdog.
type errStalled time.Duration

func (e errStalled) Error() string {
	return fmt.Sprintf("the server sent nothing for %s", time.Duration(e))
}

// Fetch downloads m.URL into the partial file part, continuing after the
// bytes it already holds, until the file is complete. It updates m (the
// validators, the total) and calls save(m) before any byte of a new
// response is written, so the partial file never holds bytes its Meta does
// not describe. progress hears the bytes held so far after each write.
//
// It returns nil once part holds the whole file, ctx's error when
// cancelled, *StatusError for a response that is not the file,
// *InterruptedError for a transfer cut short (call Fetch again), *URLError
// for a URL or redirect the rule refuses, *SizeError for a file larger
// than it may be, *SpaceError when the disk is getting full (what arrived
// is kept: free some space and call Fetch again).
func Fetch(ctx context.Context, o Options, part string, m *Meta, save func(*Meta) error, progress func(received, total int64)) error {
	u, err := url.Parse(m.URL)
	if err != nil {
		return fmt.Errorf("download: %q is not a URL: %w", m.URL, err)
	}
	if err := CheckURL(u); err != nil {
		return err
	}
	o.Client = guardRedirects(o.Client)
	if o.Stall <= 0 {
		o.Stall = DefaultStall
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.Space == nil {
		o.Space = DiskSpace
	}
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("download: %s: %w", part, err)
	}
	if m.Total >= 0 && have > m.Total {
		// Longer than the file: not ours to trust.
		if have, err = restart(f, m); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		if m.Total >= 0 && have == m.Total && have > 0 {
			progress(have, m.Total)
			return f.Sync()
		}
		// Each response has its own context, which the watchdog cancels
		// when the server sends nothing for o.Stall. It runs only while
		// Fetch waits for the server (the headers, then each read of the
		// body), so time spent between reads (a slow disk, the sidecar's
		// fsync, the progress callback) is not taken for the server's.
		rctx, drop := context.WithCancelCause(ctx)
		watch := time.AfterFunc(o.Stall, func() { drop(errStalled(o.Stall)) })
		stalled := func(err error) error {
			if ctx.Err() == nil && errors.Is(context.Cause(rctx), errStalled(o.Stall)) {
				return errStalled(o.Stall)
			}
			return err
		}
		resp, err := get(rctx, o.Client, m, have)
		if err != nil {
			watch.Stop()
			drop(nil)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if ue := (*URLError)(nil); errors.As(err, &ue) {
				return ue // a refused redirect: no retry makes it right
			}
			return &InterruptedError{Received: have, Total: m.Total, Err: stalled(err)}
		}
		watch.Stop() // the headers came
		body := &watchedBody{r: resp.Body, watch: watch, stall: o.Stall}
		done := func() {
			watch.Stop()
			resp.Body.Close()
			drop(nil)
		}
		var lim limit
		switch {
		case resp.StatusCode == http.StatusPartialContent && have > 0:
			start, total, ok := contentRange(resp.Header.Get("Content-Range"))
			if !ok || start != have {
				done()
				if attempt > 0 {
					return fmt.Errorf("download %s: the server sent bytes from %d when asked from %d (Content-Range %q)", m.URL, start, have, resp.Header.Get("Content-Range"))
				}
				if have, err = restart(f, m); err != nil {
					return err
				}
				continue
			}
			if lim, err = limitFor(m, total, o.MaxSize); err != nil {
				done()
				return err
			}
		case resp.StatusCode == http.StatusOK:
			if lim, err = limitFor(m, resp.ContentLength, o.MaxSize); err != nil {
				done()
				return err
			}
			// The whole file: the server does not do ranges, or the file
			// changed (If-Range failed). Start over.
			if have > 0 {
				if have, err = restart(f, m); err != nil {
					done()
					return err
				}
			}
		case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
			done()
			if _, total, ok := contentRange(resp.Header.Get("Content-Range")); ok && total == have {
				if _, err := limitFor(m, total, o.MaxSize); err != nil {
					return err
				}
				m.Total = total // it was complete already
				continue
			}
			if attempt > 0 {
				return &StatusError{URL: m.URL, Code: resp.StatusCode, Status: resp.Status}
			}
			if have, err = restart(f, m); err != nil {
				return err
			}
			continue
		default:
			done()
			return &StatusError{URL: m.URL, Code: resp.StatusCode, Status: resp.Status}
		}
		m.Total = lim.total()
		disk := &room{space: o.Space, reserve: o.Reserve, dir: filepath.Dir(part), lim: lim, next: have}
		if err := disk.check(have); err != nil {
			done()
			return err
		}
		m.ETag, m.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
		if err := save(m); err != nil {
			done()
			return err
		}
		have, err = copyBody(ctx, f, body, have, m.Total, disk, progress)
		done()
		if ie := (*InterruptedError)(nil); errors.As(err, &ie) {
			ie.Err = stalled(ie.Err)
		}
		if err != nil {
			return err
		}
		if m.Total < 0 {
			m.Total = have // the body ended: that is the size
			if err := save(m); err != nil {
				return err
			}
		}
		if have != m.Total {
			return &InterruptedError{Received: have, Total: m.Total, Err: io.ErrUnexpectedEOF}
		}
	}
}

// get sends the request for the bytes from have on.
func get(ctx context.Context, client *http.Client, m *Meta, have int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		return nil, err
	}
	// Compressed transfer would make byte offsets meaningless.
	req.Header.Set("Accept-Encoding", "identity")
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		// If-Range takes a strong ETag or a date: with neither, a changed
		// file would be spliced, so ask for all of it.
		switch {
		case m.ETag != "" && !strings.HasPrefix(m.ETag, "W/"):
			req.Header.Set("If-Range", m.ETag)
		case m.LastModified != "":
			req.Header.Set("If-Range", m.LastModified)
		default:
			req.Header.Del("Range")
		}
	}
	return client.Do(req)
}

// CheckURL is the rule every URL of a download follows, the one asked
// for and each redirect's target: https, or plain http only to this
// machine (a local server), so that no one on the network can change the
// bytes on the way, checksum or not. It returns a *URLError saying which
// part is wrong.
func CheckURL(u *url.URL) error {
	if reason := refusal(u, false); reason != "" {
		return &URLError{URL: shown(u), Reason: reason}
	}
	return nil
}

// refusal says why u breaks the URL rule, "" if it does not; a redirect's
// target is worded as such.
func refusal(u *url.URL, redirect bool) string {
	switch {
	case u.Host != "" && (u.Scheme == "https" || u.Scheme == "http" && loopback(u.Hostname())):
		return ""
	case redirect && u.Scheme == "http":
		return "which is not https (plain http is allowed only from this machine)"
	case redirect:
		return "which is not https"
	case u.Host == "":
		return "has no host: want an https link"
	case u.Scheme == "http":
		return "plain http is allowed only from this machine; use the https link"
	}
	return "want an https URL"
}

// loopback reports whether host names this machine.
func loopback(host string) bool {
	return host == "localhost" || net.ParseIP(host).IsLoopback()
}

// shown is u as errors show it: without the query, which may hold a
// signature, and without a password.
func shown(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery, c.Fragment = "", false, ""
	return c.Redacted()
}

// guardRedirects returns a copy of client (nil: http.DefaultClient) that
// holds each redirect to CheckURL, before any connection to its target,
// and follows at most MaxRedirects of them; the client's own
// CheckRedirect, if any, is asked after.
func guardRedirects(client *http.Client) *http.Client {
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		from := shown(via[len(via)-1].URL)
		if len(via) > MaxRedirects {
			return &URLError{URL: shown(req.URL), Via: from, Reason: fmt.Sprintf("after %d redirects", MaxRedirects)}
		}
		if reason := refusal(req.URL, true); reason != "" {
			return &URLError{URL: shown(req.URL), Via: from, Reason: reason}
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &c
}

// limit is how many bytes the partial file may hold after one response
// and whose word that is.
type limit struct {
	n  int64
	of SizeLimit
}

// total is the file's size as far as it is known, -1 for none (the cap of
// a file of unknown size is not its size).
func (l limit) total() int64 {
	if l.of == LimitMax {
		return -1
	}
	return l.n
}

// limitFor says how large the file may be given the size a response
// announces (-1: none): the announced size, which must be the expected one
// when the caller knows it; else the expected size; else maxSize. Without an
// expected size, an announced size above maxSize is refused (the caller's
// expected size is the caller's to bound).
func limitFor(m *Meta, announced, maxSize int64) (limit, error) {
	switch {
	case m.Expected > 0 && announced >= 0 && announced != m.Expected:
		return limit{}, &SizeError{Limit: m.Expected, Of: LimitExpected, Got: announced, Announced: true}
	case m.Expected <= 0 && announced > maxSize:
		return limit{}, &SizeError{Limit: maxSize, Of: LimitMax, Got: announced, Announced: true}
	case announced >= 0:
		return limit{announced, LimitAnnounced}, nil
	case m.Expected > 0:
		return limit{m.Expected, LimitExpected}, nil
	}
	return limit{maxSize, LimitMax}, nil
}

// room watches the free space of the partial file's volume during one
// response.
type room struct {
	space   func(dir string) (free, size int64, err error)
	reserve int64 // 0: DefaultReserve
	dir     string
	lim     limit
	next    int64 // the file's size at which to look again
}

// check returns a *SpaceError when the volume, with the rest of the file
// written (as far as its size is known), would keep less than the reserve
// free. After the first look it looks again only every spaceEvery bytes.
func (r *room) check(have int64) error {
	if have < r.next {
		return nil
	}
	r.next = have + spaceEvery
	free, size, err := r.space(r.dir)
	if err != nil {
		return nil // not known here: MaxSize still bounds the file
	}
	reserve := r.reserve
	if reserve <= 0 {
		reserve = DefaultReserve(size)
	}
	var need int64
	if r.lim.of != LimitMax {
		need = max(r.lim.n-have, 0)
	}
	if free-need < reserve {
		return &SpaceError{Dir: r.dir, Free: free, Reserve: reserve, Need: need}
	}
	return nil
}

// restart empties the partial file.
func restart(f *os.File, m *Meta) (int64, error) {
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("download: %s: %w", f.Name(), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("download: %s: %w", f.Name(), err)
	}
	m.ETag, m.LastModified, m.Total = "", "", -1
	return 0, nil
}

// watchedBody is a response body whose reads are timed by the stall
// watchdog: each read that waits longer than stall for the server is cut
// short (watch cancels the response).
type watchedBody struct {
	r     io.Reader
	watch *time.Timer
	stall time.Duration
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.watch.Reset(b.stall)
	n, err := b.r.Read(p)
	b.watch.Stop()
	return n, err
}

// copyBody appends body to f, reporting progress; it returns the bytes f
// holds. It stops with a *SizeError before f would hold more than r's
// limit, and with a *SpaceError when the volume is getting full.
func copyBody(ctx context.Context, f *os.File, body io.Reader, have, total int64, r *room, progress func(received, total int64)) (int64, error) {
	buf := make([]byte, chunk)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if have+int64(n) > r.lim.n {
				return have, &SizeError{Limit: r.lim.n, Of: r.lim.of, Got: have + int64(n)}
			}
			if err := r.check(have); err != nil {
				return have, err
			}
			if _, werr := f.Write(buf[:n]); werr != nil {
				return have, fmt.Errorf("download: write %s: %w", f.Name(), werr)
			}
			have += int64(n)
			progress(have, total)
		}
		if errors.Is(err, io.EOF) {
			return have, f.Sync()
		}
		if err != nil {
			if ctx.Err() != nil {
				return have, context.Cause(ctx)
			}
			return have, &InterruptedError{Received: have, Total: total, Err: err}
		}
	}
}

// contentRange parses "bytes START-END/TOTAL" (or "bytes */TOTAL"); total
// is -1 for "*".
func contentRange(h string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !found {
		return 0, 0, false
	}
	span, size, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	total = -1
	if size != "*" {
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, false
		}
		total = n
	}
	if span == "*" {
		return 0, total, total >= 0
	}
	a, b, found := strings.Cut(span, "-")
	s, err1 := strconv.ParseInt(a, 10, 64)
	e, err2 := strconv.ParseInt(b, 10, 64)
	if !found || err1 != nil || err2 != nil || s < 0 || e < s || (total >= 0 && e >= total) {
		return 0, 0, false
	}
	return s, total, true
}

// Verify computes the SHA-256 of the file at path (mmap.SHA256) and, when
// want is not "", compares it: a mismatch is a *ChecksumError.
func Verify(ctx context.Context, path, want string) (got string, err error) {
	got, err = mmap.SHA256(ctx, path, nil)
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", fmt.Errorf("download: %w", err)
	}
	if want != "" && !strings.EqualFold(want, got) {
		return got, &ChecksumError{Want: strings.ToLower(want), Got: got}
	}
	return got, nil
}

// SaveMeta writes m to path atomically (atomicfile: a temporary file,
// fsync, rename, fsync of the directory).
func SaveMeta(path string, m *Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}

// LoadMeta reads a Meta SaveMeta wrote.
func LoadMeta(path string) (Meta, error) {
	var m Meta
	b, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("download: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("download: %s: %w", path, err)
	}
	if m.URL == "" || m.Name == "" {
		return m, fmt.Errorf("download: %s: no url or name", path)
	}
	return m, nil
}
