package download

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
