// Package download fetches one file over HTTP(S) into a partial file that
// survives interruptions: a later Fetch continues where the last one
// stopped with a Range request, guarded by If-Range (the server's ETag or
// Last-Modified), so a file that changed on the server is fetched again from
// the start instead of being spliced. Servers without range support are
// handled by starting over. The app's model downloads (app/downloads.go)
// run on it; it knows nothing of models.
package download

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// ChecksumError is a finished file whose SHA-256 is not the expected one.
type ChecksumError struct {
	Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("sha256 mismatch: expected %s, got %s", e.Want, e.Got)
}

// chunk is how much is read and written at a time (and so how often
// progress is reported).
const chunk = 128 << 10

// DefaultStall is how long a response may send nothing before Fetch gives
// up on it (Options.Stall).
const DefaultStall = 60 * time.Second

// Options say how Fetch talks to the server.
type Options struct {
	// Client sends the requests (nil: http.DefaultClient).
	Client *http.Client
	// Stall is how long a response may send nothing, headers or body,
	// before Fetch drops it with an *InterruptedError, so that the caller's
	// retry asks for the rest on a new connection (0: DefaultStall). Without
	// it a server that stops sending but keeps the connection open holds the
	// transfer forever: TCP keepalives only notice a peer that is gone.
	Stall time.Duration
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
// *InterruptedError for a transfer cut short (call Fetch again).
func Fetch(ctx context.Context, o Options, part string, m *Meta, save func(*Meta) error, progress func(received, total int64)) error {
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.Stall <= 0 {
		o.Stall = DefaultStall
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
		// when nothing arrives for o.Stall (the timer is reset on every
		// read that brings bytes).
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
			return &InterruptedError{Received: have, Total: m.Total, Err: stalled(err)}
		}
		body := &watchedBody{r: resp.Body, reset: func() { watch.Reset(o.Stall) }}
		done := func() {
			watch.Stop()
			resp.Body.Close()
			drop(nil)
		}
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
			m.Total = total
		case resp.StatusCode == http.StatusOK:
			// The whole file: the server does not do ranges, or the file
			// changed (If-Range failed). Start over.
			if have > 0 {
				if have, err = restart(f, m); err != nil {
					done()
					return err
				}
			}
			m.Total = resp.ContentLength
		case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
			done()
			if _, total, ok := contentRange(resp.Header.Get("Content-Range")); ok && total == have {
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
		m.ETag, m.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
		if err := save(m); err != nil {
			done()
			return err
		}
		have, err = copyBody(ctx, f, body, have, m.Total, progress)
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

// watchedBody is a response body that tells the stall watchdog of every
// read that brought bytes.
type watchedBody struct {
	r     io.Reader
	reset func()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.reset()
	}
	return n, err
}

// copyBody appends body to f, reporting progress; it returns the bytes f
// holds.
func copyBody(ctx context.Context, f *os.File, body io.Reader, have, total int64, progress func(received, total int64)) (int64, error) {
	buf := make([]byte, chunk)
	for {
		n, err := body.Read(buf)
		if n > 0 {
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

// Verify computes the SHA-256 of the file at path and, when want is not
// "", compares it: a mismatch is a *ChecksumError.
func Verify(ctx context.Context, path, want string) (got string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return "", context.Cause(ctx)
		}
		n, err := f.Read(buf)
		h.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("download: read %s: %w", path, err)
		}
	}
	got = hex.EncodeToString(h.Sum(nil))
	if want != "" && !strings.EqualFold(want, got) {
		return got, &ChecksumError{Want: strings.ToLower(want), Got: got}
	}
	return got, nil
}

// SaveMeta writes m to path atomically (a temporary file, fsync, rename).
func SaveMeta(path string, m *Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("download: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
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
