package download

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestContentRange(t *testing.T) {
	for _, c := range []struct {
		h            string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/1", 0, 1, true},
		{"bytes 5-9/*", 5, -1, true},
		{"bytes */300", 0, 300, true},
		{"bytes */*", 0, 0, false},
		{"bytes 10-5/20", 0, 0, false},
		{"bytes 0-20/20", 0, 0, false},
		{"items 0-1/2", 0, 0, false},
		{"", 0, 0, false},
		{"bytes x-1/2", 0, 0, false},
	} {
		s, total, ok := contentRange(c.h)
		if ok != c.ok || (ok && (s != c.start || total != c.total)) {
			t.Errorf("contentRange(%q) = %d, %d, %v; want %d, %d, %v", c.h, s, total, ok, c.start, c.total, c.ok)
		}
	}
}

// serve serves data with the given validators through http.ServeContent
// (which honours Range and If-Range), recording each request's headers.
func serve(t *testing.T, data []byte, etag string, mod time.Time, reqs *[]http.Header) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*reqs = append(*reqs, r.Header.Clone())
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		http.ServeContent(w, r, "", mod, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/f.gguf"
}

func fetch(t *testing.T, url, part string, m *Meta) error {
	t.Helper()
	return Fetch(context.Background(), Options{}, part, m, func(*Meta) error { return nil }, func(int64, int64) {})
}

func TestFetchContinuesOrStartsOver(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 5000)
	mod := time.Unix(1700000000, 0).UTC()
	for _, c := range []struct {
		name         string
		etag         string // the server's
		have         Meta   // what the partial file was fetched with
		wantIfRange  string
		wantContinue bool
	}{
		{"strong etag matches", `"v1"`, Meta{ETag: `"v1"`}, `"v1"`, true},
		{"the file changed", `"v2"`, Meta{ETag: `"v1"`}, `"v1"`, false},
		{"weak etag: the date instead", `W/"v1"`, Meta{ETag: `W/"v1"`, LastModified: mod.Format(http.TimeFormat)}, mod.Format(http.TimeFormat), true},
		{"no validator: the whole file", "", Meta{}, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var reqs []http.Header
			url := serve(t, data, c.etag, mod, &reqs)
			part := filepath.Join(t.TempDir(), "f.part")
			// A partial file whose first bytes differ when the file "changed",
			// so splicing would show.
			head := data[:1234]
			if !c.wantContinue {
				head = bytes.Repeat([]byte("x"), 1234)
			}
			os.WriteFile(part, head, 0o644)
			m := c.have
			m.URL, m.Total = url, int64(len(data))
			if err := fetch(t, url, part, &m); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(part)
			if !bytes.Equal(got, data) {
				t.Fatalf("file differs from the server's (%d bytes)", len(got))
			}
			if reqs[0].Get("If-Range") != c.wantIfRange {
				t.Fatalf("If-Range %q, want %q", reqs[0].Get("If-Range"), c.wantIfRange)
			}
			if (reqs[0].Get("Range") == "bytes=1234-") != (c.wantIfRange != "") {
				t.Fatalf("Range %q", reqs[0].Get("Range"))
			}
			if m.ETag != c.etag || m.Total != int64(len(data)) {
				t.Fatalf("meta after: %+v", m)
			}
		})
	}
}

func TestFetchCompleteFileAndErrors(t *testing.T) {
	data := []byte("all of it")
	var reqs []http.Header
	url := serve(t, data, `"v"`, time.Unix(1, 0), &reqs)
	part := filepath.Join(t.TempDir(), "f.part")
	os.WriteFile(part, data, 0o644)
	// The size is not known yet: the server says the range is past the end
	// (416 with the total), which means the file is complete.
	m := Meta{URL: url, ETag: `"v"`, Total: -1}
	if err := fetch(t, url, part, &m); err != nil || m.Total != int64(len(data)) {
		t.Fatalf("complete file: %v, %+v", err, m)
	}
	got, _ := os.ReadFile(part)
	if !bytes.Equal(got, data) {
		t.Fatalf("complete file changed: %q", got)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	var se *StatusError
	if err := fetch(t, srv.URL, part, &Meta{URL: srv.URL, Total: -1}); !errors.As(err, &se) || se.Code != 404 || !strings.Contains(err.Error(), "404") {
		t.Fatalf("404: %v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop here")
	cancel(stop)
	if err := Fetch(ctx, Options{}, filepath.Join(t.TempDir(), "g"), &Meta{URL: url, Total: -1}, func(*Meta) error { return nil }, func(int64, int64) {}); !errors.Is(err, stop) {
		t.Fatalf("cancelled: %v, want the cause", err)
	}
}

func TestVerifyAndMeta(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("abc"), 0o644)
	const sum = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got, err := Verify(context.Background(), p, strings.ToUpper(sum)); err != nil || got != sum {
		t.Fatalf("Verify = %s, %v", got, err)
	}
	var ce *ChecksumError
	_, err := Verify(context.Background(), p, strings.Repeat("0", 64))
	if !errors.As(err, &ce) || err.Error() != "sha256 mismatch: expected "+strings.Repeat("0", 64)+", got "+sum {
		t.Fatalf("mismatch: %v", err)
	}
	m := Meta{URL: "https://x/y.gguf", Name: "y.gguf", SHA256: sum, ETag: `"e"`, Total: 3, StartedAt: time.Unix(5, 0).UTC()}
	mp := filepath.Join(dir, "y.json")
	if err := SaveMeta(mp, &m); err != nil {
		t.Fatal(err)
	}
	back, err := LoadMeta(mp)
	if err != nil || back != m {
		t.Fatalf("LoadMeta = %+v, %v", back, err)
	}
	os.WriteFile(mp, []byte(`{"url": ""}`), 0o644)
	if _, err := LoadMeta(mp); err == nil {
		t.Fatal("a sidecar without a URL loaded")
	}
}

// TestFetchDropsAStalledResponse: a server that stops sending but keeps
// the connection open, before the headers or mid-body, is dropped after
// Options.Stall with an *InterruptedError saying so, what arrived kept; the
// next Fetch continues from it. Without the watchdog each Fetch would wait
// forever.
func TestFetchDropsAStalledResponse(t *testing.T) {
	data := bytes.Repeat([]byte("anechat "), 40000)
	half := len(data) / 2
	var calls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1: // quiet before the headers
			<-r.Context().Done()
		case 2: // half the body, then quiet
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data[:half])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			w.Header().Set("ETag", `"v1"`)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		}
	}))
	defer srv.Close()
	part := filepath.Join(t.TempDir(), "f.part")
	m := &Meta{URL: srv.URL, Total: -1}
	o := Options{Stall: 150 * time.Millisecond}
	get := func() error {
		return Fetch(context.Background(), o, part, m, func(*Meta) error { return nil }, func(int64, int64) {})
	}
	for i, want := range []int64{0, int64(half)} {
		err := get()
		var ie *InterruptedError
		if !errors.As(err, &ie) || ie.Received != want || !strings.Contains(err.Error(), "the server sent nothing for 150ms") {
			t.Fatalf("stall %d: %v, want an interruption after %d bytes naming the stall", i, err, want)
		}
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(part); !bytes.Equal(got, data) {
		t.Fatalf("file after the stalls: %d bytes, want the %d of the file", len(got), len(data))
	}
}

// TestInterruptedSaysWhatHappened: a server nobody answers on is "could not
// be reached", not "lost after 0 bytes", and the message does not repeat
// the URL (the window shows it beside); a cut transfer says how far it got.
func TestInterruptedSaysWhatHappened(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	part := filepath.Join(t.TempDir(), "f.part")
	err = Fetch(context.Background(), Options{}, part, &Meta{URL: "http://" + addr + "/m.gguf", Total: -1}, func(*Meta) error { return nil }, func(int64, int64) {})
	var ie *InterruptedError
	if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), "the server could not be reached: dial tcp") || strings.Contains(err.Error(), "m.gguf") {
		t.Fatalf("unreachable: %v", err)
	}
	cut := &InterruptedError{Received: 10, Total: 20, Err: io.ErrUnexpectedEOF}
	if got := cut.Error(); got != "the connection was lost after 10 of 20 bytes: unexpected EOF" {
		t.Fatalf("cut: %q", got)
	}
}

// TestFetchStallCountsOnlyTheServer: the watchdog times the waits for the
// server (the headers, each read of the body), not the time the client
// spends between reads (a slow disk write, the progress callback, the
// sidecar's fsync): a client slower than Options.Stall between two reads of
// a server that answers at once finishes the file.
func TestFetchStallCountsOnlyTheServer(t *testing.T) {
	data := bytes.Repeat([]byte("anechat "), 4096)
	half := len(data) / 2
	more := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data[:half])
		w.(http.Flusher).Flush()
		// The rest once the client has digested the first half: what
		// the client does before asking is not the server's silence.
		select {
		case <-more:
		case <-r.Context().Done():
			return
		}
		w.Write(data[half:])
	}))
	defer srv.Close()
	const stall = 300 * time.Millisecond
	part := filepath.Join(t.TempDir(), "f.part")
	m := &Meta{URL: srv.URL, Total: -1}
	var once sync.Once
	save := func(*Meta) error { time.Sleep(3 * stall); return nil }
	progress := func(received, _ int64) {
		if received > 0 {
			once.Do(func() { time.Sleep(3 * stall); close(more) })
		}
	}
	if err := Fetch(context.Background(), Options{Stall: stall}, part, m, save, progress); err != nil {
		t.Fatalf("a client slower than the stall limit between reads: %v", err)
	}
	if got, _ := os.ReadFile(part); !bytes.Equal(got, data) {
		t.Fatalf("%d bytes, want the %d of the file", len(got), len(data))
	}
}

// dialLog is a transport's dialer that records each address dialled and
// sends the made-up host models.example.invalid to a real loopback server,
// the way a network (or an attacker on it) would resolve a name: with it,
// a client that follows a redirect to http://models.example.invalid/...
// really fetches the file from there.
type dialLog struct {
	mu     sync.Mutex
	dialed []string
	to     string // where models.example.invalid goes
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	d.mu.Unlock()
	if host, _, _ := net.SplitHostPort(addr); host == "models.example.invalid" {
		addr = d.to
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (d *dialLog) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// redirectRig is an https server whose /to?url=U redirects to U and whose
// /hop/N redirects to /hop/N+1, a plain-http server holding the file, and a
// client that trusts the https server and dials through a dialLog.
type redirectRig struct {
	data        []byte
	tls, plain  *httptest.Server
	plainServed atomic.Int64
	tlsServed   atomic.Int64
	log         *dialLog
	client      *http.Client
}

func newRedirectRig(t *testing.T) *redirectRig {
	t.Helper()
	r := &redirectRig{data: bytes.Repeat([]byte("model "), 2000)}
	r.plain = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.plainServed.Add(1)
		http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(r.data))
	}))
	t.Cleanup(r.plain.Close)
	r.tls = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.tlsServed.Add(1)
		switch {
		case req.URL.Path == "/to":
			http.Redirect(w, req, req.URL.Query().Get("url"), http.StatusFound)
		case strings.HasPrefix(req.URL.Path, "/hop/"):
			n, _ := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/hop/"))
			http.Redirect(w, req, "/hop/"+strconv.Itoa(n+1), http.StatusFound)
		default:
			http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(r.data))
		}
	}))
	t.Cleanup(r.tls.Close)
	r.log = &dialLog{to: r.plain.Listener.Addr().String()}
	tr := r.tls.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = r.log.dial
	r.client = &http.Client{Transport: tr}
	return r
}

// to is an https URL on the rig that redirects to target.
func (r *redirectRig) to(target string) string {
	return r.tls.URL + "/to?url=" + url.QueryEscape(target)
}

// TestFetchRefusesARedirectOffTheRule: an https link that redirects to
// plain http on another machine (or to another scheme) is refused with an
// error naming the hop, before any connection to it is made: the plain
// server, which the test's "network" would reach, never hears of it, and
// nothing is written. The old code followed the redirect and fetched the
// file over plain http.
func TestFetchRefusesARedirectOffTheRule(t *testing.T) {
	for _, c := range []struct {
		name, target, want string
	}{
		{"plain http elsewhere", "http://models.example.invalid:%s/f.gguf?sig=secret",
			"the server redirected to http://models.example.invalid:%s/f.gguf which is not https (plain http is allowed only from this machine); refusing"},
		{"another scheme", "ftp://models.example.invalid:%s/f.gguf",
			"the server redirected to ftp://models.example.invalid:%s/f.gguf which is not https; refusing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRedirectRig(t)
			_, port, _ := net.SplitHostPort(r.log.to)
			start := r.to(strings.ReplaceAll(c.target, "%s", port))
			part := filepath.Join(t.TempDir(), "f.part")
			m := &Meta{URL: start, Total: -1}
			err := Fetch(context.Background(), Options{Client: r.client}, part, m, func(*Meta) error { return nil }, func(int64, int64) {})
			var ue *URLError
			if !errors.As(err, &ue) || err.Error() != strings.ReplaceAll(c.want, "%s", port) || ue.Via != r.tls.URL+"/to" {
				t.Fatalf("Fetch = %v, want %q (via %s/to)", err, strings.ReplaceAll(c.want, "%s", port), r.tls.URL)
			}
			for _, a := range r.log.addrs() {
				if a != r.tls.Listener.Addr().String() {
					t.Errorf("dialled %s: the refused hop was connected to", a)
				}
			}
			if n := r.plainServed.Load(); n != 0 {
				t.Errorf("the plain-http server served %d requests", n)
			}
			if b, _ := os.ReadFile(part); len(b) != 0 {
				t.Errorf("the partial file holds %d bytes", len(b))
			}
		})
	}
}

// TestFetchRedirectsWithinTheRule: a chain of https hops ending at plain
// http on this machine is followed; a chain longer than MaxRedirects is
// refused naming the hop, after exactly MaxRedirects redirects; a URL off
// the rule is refused before any request, with the client's own
// CheckRedirect still asked for each hop.
func TestFetchRedirectsWithinTheRule(t *testing.T) {
	r := newRedirectRig(t)
	asked := 0
	client := *r.client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { asked++; return nil }
	get := func(u string) (string, error) {
		part := filepath.Join(t.TempDir(), "f.part")
		err := Fetch(context.Background(), Options{Client: &client}, part, &Meta{URL: u, Total: -1}, func(*Meta) error { return nil }, func(int64, int64) {})
		b, _ := os.ReadFile(part)
		return string(b), err
	}
	// https /to -> https /to -> http://127.0.0.1:port/f.gguf
	chain := r.to(r.to(r.plain.URL + "/f.gguf"))
	if got, err := get(chain); err != nil || got != string(r.data) || asked != 2 || r.plainServed.Load() != 1 {
		t.Fatalf("a chain within the rule: %v, %d bytes, client's CheckRedirect asked %d times, plain served %d", err, len(got), asked, r.plainServed.Load())
	}
	before := r.tlsServed.Load()
	_, err := get(r.tls.URL + "/hop/0")
	var ue *URLError
	want := "the server redirected to " + r.tls.URL + "/hop/" + strconv.Itoa(MaxRedirects+1) + " after " + strconv.Itoa(MaxRedirects) + " redirects; refusing"
	if !errors.As(err, &ue) || err.Error() != want {
		t.Fatalf("endless redirects: %v, want %q", err, want)
	}
	if n := r.tlsServed.Load() - before; n != MaxRedirects+1 {
		t.Fatalf("endless redirects: %d requests, want the first and %d redirects", n, MaxRedirects)
	}
	for _, c := range []struct{ url, want string }{
		{"http://models.example.invalid/f.gguf?sig=x", "http://models.example.invalid/f.gguf: plain http is allowed only from this machine; use the https link"},
		{"file:///etc/passwd", "file:///etc/passwd: has no host: want an https link"},
		{"ftp://example.com/f.gguf", "ftp://example.com/f.gguf: want an https URL"},
	} {
		before := len(r.log.addrs())
		if _, err := get(c.url); !errors.As(err, &ue) || err.Error() != c.want || len(r.log.addrs()) != before {
			t.Errorf("Fetch(%s) = %v, want %q and no connection", c.url, err, c.want)
		}
	}
	for _, ok := range []string{"https://huggingface.co/x/y/resolve/main/f.gguf", "http://localhost:8080/f.gguf", "http://127.0.0.1/f.gguf", "http://[::1]:9/f.gguf"} {
		u, _ := url.Parse(ok)
		if err := CheckURL(u); err != nil {
			t.Errorf("CheckURL(%s) = %v", ok, err)
		}
	}
}

// endlessServer answers every request with head (status and headers),
// then a body that does not end: chunks until the client goes away or the
// test's own cap of 64 MiB. sent counts the body bytes written.
func endlessServer(t *testing.T, head func(w http.ResponseWriter, r *http.Request)) (string, *atomic.Int64) {
	t.Helper()
	var sent atomic.Int64
	buf := bytes.Repeat([]byte("z"), 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head(w, r)
		for sent.Load() < 64<<20 {
			n, err := w.Write(buf)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/f.gguf", &sent
}

// TestFetchStopsAnEndlessBody: a body that does not end stops at the
// size the caller expects (Meta.Expected) or, with no size known, at
// Options.MaxSize, with a *SizeError and nothing past the limit written;
// a range answer whose body goes past its Content-Range total stops there.
// The old code wrote all the server sent (here the test's 64 MiB cap, on a
// real server until the disk is full).
func TestFetchStopsAnEndlessBody(t *testing.T) {
	plain := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
	ranged := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("Range") == "bytes=1000-" {
			w.Header().Set("Content-Range", "bytes 1000-1999/2000")
			w.WriteHeader(http.StatusPartialContent)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	for _, c := range []struct {
		name      string
		head      func(http.ResponseWriter, *http.Request)
		have      int64 // bytes of the partial file, fetched with ETag "v1"
		o         Options
		expected  int64
		limit     int64
		of        SizeLimit
		wantError string
	}{
		{"no size known", plain, 0, Options{MaxSize: 1 << 20}, 0, 1 << 20, LimitMax,
			"the server sent more than 1.0 MiB, the most a download may be, and did not say how much; stopped"},
		{"the size the caller expects", plain, 0, Options{MaxSize: 1 << 20}, 300 << 10, 300 << 10, LimitExpected,
			"the server sent more than the 307200 bytes the file should have; stopped"},
		{"past the Content-Range total", ranged, 1000, Options{}, 0, 2000, LimitAnnounced,
			"the server sent more than the 2000 bytes it announced; stopped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, sent := endlessServer(t, c.head)
			part := filepath.Join(t.TempDir(), "f.part")
			os.WriteFile(part, bytes.Repeat([]byte("z"), int(c.have)), 0o644)
			m := &Meta{URL: u, ETag: `"v1"`, Total: -1, Expected: c.expected}
			if c.have > 0 {
				m.Total = 2000
			}
			err := Fetch(context.Background(), c.o, part, m, func(*Meta) error { return nil }, func(int64, int64) {})
			var se *SizeError
			if !errors.As(err, &se) || se.Limit != c.limit || se.Of != c.of || err.Error() != c.wantError {
				t.Fatalf("Fetch = %v, want %q", err, c.wantError)
			}
			st, _ := os.Stat(part)
			if st.Size() > c.limit {
				t.Fatalf("the partial file holds %d bytes, past the limit %d", st.Size(), c.limit)
			}
			if sent.Load() >= 64<<20 {
				t.Fatalf("the server sent its whole %d bytes", sent.Load())
			}
		})
	}
}

// TestFetchAnnouncedSizes: a response announcing more than Options.MaxSize,
// or a size other than the expected one, is refused before a byte is
// written; a body longer than its Content-Length ends at the announced
// length (net/http's transport stops there; the limit in Fetch holds for
// any transport).
func TestFetchAnnouncedSizes(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 200)
	var reqs []http.Header
	u := serve(t, data, `"v1"`, time.Time{}, &reqs)
	for _, c := range []struct {
		name     string
		o        Options
		expected int64
		want     string
	}{
		{"more than MaxSize", Options{MaxSize: 1000}, 0, "the server announces 2.0 KiB, more than the 1000 B a download may be"},
		{"not the expected size", Options{}, 1500, "the server announces 2000 bytes, but the file should have 1500"},
	} {
		t.Run(c.name, func(t *testing.T) {
			part := filepath.Join(t.TempDir(), "f.part")
			saved := 0
			err := Fetch(context.Background(), c.o, part, &Meta{URL: u, Total: -1, Expected: c.expected}, func(*Meta) error { saved++; return nil }, func(int64, int64) {})
			var se *SizeError
			if !errors.As(err, &se) || !se.Announced || err.Error() != c.want {
				t.Fatalf("Fetch = %v, want %q", err, c.want)
			}
			if b, _ := os.ReadFile(part); len(b) != 0 || saved != 0 {
				t.Fatalf("%d bytes written, the meta saved %d times", len(b), saved)
			}
		})
	}
	// The expected size, announced: fetched.
	part := filepath.Join(t.TempDir(), "f.part")
	if err := Fetch(context.Background(), Options{MaxSize: 1000}, part, &Meta{URL: u, Total: -1, Expected: int64(len(data))}, func(*Meta) error { return nil }, func(int64, int64) {}); err != nil {
		t.Fatalf("the expected size: %v", err)
	}

	// A raw response that sends more than its Content-Length.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				http.ReadRequest(bufio.NewReader(conn))
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n")
				conn.Write(bytes.Repeat([]byte("y"), 1000))
				conn.Write(bytes.Repeat([]byte("X"), 1<<20))
			}()
		}
	}()
	part = filepath.Join(t.TempDir(), "g.part")
	m := &Meta{URL: "http://" + ln.Addr().String() + "/f.gguf", Total: -1}
	if err := Fetch(context.Background(), Options{}, part, m, func(*Meta) error { return nil }, func(int64, int64) {}); err != nil {
		t.Fatalf("a body longer than its Content-Length: %v", err)
	}
	if b, _ := os.ReadFile(part); string(b) != strings.Repeat("y", 1000) || m.Total != 1000 {
		t.Fatalf("a body longer than its Content-Length: %d bytes kept (total %d), want the 1000 announced", len(b), m.Total)
	}
}

// TestFetchKeepsAFreeSpaceReserve: the transfer stops before the volume
// keeps less than Options.Reserve free, with a *SpaceError saying so and
// what arrived kept: up front when the rest of an announced file does not
// fit, during the transfer (looking every spaceEvery bytes) when the size
// is unknown. Once there is room the same partial file continues. The
// volume is a function reporting a disk that the partial file fills.
func TestFetchKeepsAFreeSpaceReserve(t *testing.T) {
	const reserve = 1 << 30
	var disk atomic.Int64 // the free space before the partial file
	dir := t.TempDir()
	part := filepath.Join(dir, "f.part")
	o := Options{Reserve: reserve, Space: func(d string) (int64, int64, error) {
		if d != dir {
			t.Errorf("free space of %s, want the partial file's directory %s", d, dir)
		}
		st, _ := os.Stat(part)
		return disk.Load() - st.Size(), 100 << 30, nil
	}}
	fetch := func(m *Meta) error {
		return Fetch(context.Background(), o, part, m, func(*Meta) error { return nil }, func(int64, int64) {})
	}

	// An announced file whose rest does not fit: refused before a byte,
	// the partial file untouched; with room it continues from there.
	data := bytes.Repeat([]byte("01234567"), 3<<17) // 3 MiB
	var reqs []http.Header
	u := serve(t, data, `"v1"`, time.Time{}, &reqs)
	os.WriteFile(part, data[:1<<20], 0o644)
	disk.Store(reserve + 2<<20)
	m := &Meta{URL: u, ETag: `"v1"`, Total: int64(len(data))}
	err := fetch(m)
	var se *SpaceError
	want := "not enough free space: 1.0 GiB free, keeping 1.0 GiB in reserve for the app's data, and 2.0 MiB of the file still to come"
	if !errors.As(err, &se) || se.Free != reserve+1<<20 || se.Need != int64(len(data))-1<<20 || err.Error() != want {
		t.Fatalf("a file that does not fit: %v, want %q", err, want)
	}
	if b, _ := os.ReadFile(part); !bytes.Equal(b, data[:1<<20]) {
		t.Fatalf("the partial file changed: %d bytes", len(b))
	}
	disk.Store(reserve + 4<<20)
	if err := fetch(m); err != nil {
		t.Fatalf("with room: %v", err)
	}
	if b, _ := os.ReadFile(part); !bytes.Equal(b, data) || reqs[len(reqs)-1].Get("Range") != "bytes=1048576-" {
		t.Fatalf("with room: %d bytes, last Range %q; want the file continued", len(b), reqs[len(reqs)-1].Get("Range"))
	}

	// A body of unknown size on a disk that fills: stopped once the free
	// space falls under the reserve, the bytes kept.
	os.Remove(part)
	endless, _ := endlessServer(t, func(w http.ResponseWriter, r *http.Request) {})
	disk.Store(reserve + 3<<20)
	err = fetch(&Meta{URL: endless, Total: -1})
	st, _ := os.Stat(part)
	if !errors.As(err, &se) || se.Need != 0 || se.Free != reserve+3<<20-st.Size() || !strings.HasPrefix(err.Error(), "not enough free space: ") {
		t.Fatalf("a disk that fills: %v", err)
	}
	if st.Size() < 3<<20 || st.Size() > 3<<20+spaceEvery+chunk {
		t.Fatalf("a disk that fills: stopped after %d bytes, want within one look (%d bytes) of the reserve", st.Size(), spaceEvery)
	}

	// When the free space cannot be read, the transfer goes on (MaxSize
	// still bounds it).
	o.Space = func(string) (int64, int64, error) { return 0, 0, errors.ErrUnsupported }
	os.Remove(part)
	if err := fetch(&Meta{URL: u, Total: -1}); err != nil {
		t.Fatalf("free space unknown: %v", err)
	}
}

// TestDiskSpace reads the real free space of the test's directory.
func TestDiskSpace(t *testing.T) {
	free, size, err := DiskSpace(t.TempDir())
	if err != nil || free <= 0 || size < free {
		t.Fatalf("DiskSpace = %d free of %d, %v", free, size, err)
	}
	if _, _, err := DiskSpace(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("DiskSpace of a missing directory: no error")
	}
	if DefaultReserve(10<<30) != 1<<30 || DefaultReserve(1000<<30) != 20<<30 {
		t.Fatalf("DefaultReserve: %d, %d", DefaultReserve(10<<30), DefaultReserve(1000<<30))
	}
}
