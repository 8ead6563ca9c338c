package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// hangGuard bounds a wait that the server under test ends much sooner:
// reaching it is the failure, it is not a measurement.
const hangGuard = 15 * time.Second

// limits sets the connection limits of the server under test.
func limits(set func(*Config)) serverOption {
	return func(_ *testing.T, c *Config, _ *testServer) { set(c) }
}

// dial opens a TCP connection to s, closed at the test's end.
func (s *testServer) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawRequest is an HTTP/1.1 request to s as bytes, with the token unless
// auth is false.
func (s *testServer) rawRequest(method, path, body string, auth bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, strings.TrimPrefix(s.url, "http://"))
	if auth {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", testToken)
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	return b.String()
}

// closedByServer waits (at most hangGuard) for the server to close c and
// fails if it sends anything else or keeps it open.
func closedByServer(t *testing.T, c net.Conn, r io.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(hangGuard))
	n, err := r.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		t.Fatalf("%s: the server sent more bytes instead of closing the connection", what)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("%s: the connection is still open after %v", what, hangGuard)
	case err == nil:
		t.Fatalf("%s: read 0 bytes and no error", what)
	}
}

// A client without the token, or with a Host the server does not answer
// to, gets its answer and a closed connection: it keeps no descriptor of
// the server's. Before, the connection stayed open for good.
func TestUnauthenticatedClosed(t *testing.T) {
	s := startServer(t, "")
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"no token", s.rawRequest("GET", "/v1/models", "", false), http.StatusUnauthorized},
		{"foreign Host", "GET /v1/models HTTP/1.1\r\nHost: evil.example:80\r\nAuthorization: Bearer " + testToken + "\r\n\r\n", http.StatusForbidden},
		{"no token, with a body", s.rawRequest("POST", "/v1/chat/completions", `{"model": "stories260K"}`, false) + `{"model": "stories260K"}`, http.StatusUnauthorized},
	} {
		conn := s.dial(t)
		if _, err := io.WriteString(conn, c.req); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(hangGuard))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != c.status || !resp.Close {
			t.Fatalf("%s: status %d, Connection %q: want %d and close", c.name, resp.StatusCode, resp.Header.Get("Connection"), c.status)
		}
		closedByServer(t, conn, br, c.name)
	}
}

// A kept-alive connection left idle is closed after IdleTimeout. Before,
// it stayed open for good.
func TestIdleTimeout(t *testing.T) {
	s := startServer(t, "", limits(func(c *Config) { c.IdleTimeout = 100 * time.Millisecond }))
	conn := s.dial(t)
	if _, err := io.WriteString(conn, s.rawRequest("GET", "/v1/models", "", true)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(hangGuard))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("status %d, close %v: want 200, kept alive", resp.StatusCode, resp.Close)
	}
	closedByServer(t, conn, br, "idle connection")
}

// A body trickled in a byte at a time is cut off when ReadTimeout passes,
// with a 408 and a closed connection. Before, the server read it for as
// long as it came.
func TestTrickledBodyCutOff(t *testing.T) {
	s := startServer(t, "", limits(func(c *Config) { c.ReadTimeout = 300 * time.Millisecond }))
	raw, _ := json.Marshal(user("Once upon a time", "max_tokens", 3))
	// Valid JSON once whole: 2,000 bytes at one per 10 ms take 20 s.
	body := string(raw) + strings.Repeat(" ", 2000-len(raw))
	conn := s.dial(t)
	if _, err := io.WriteString(conn, s.rawRequest("POST", "/v1/chat/completions", body, true)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := range len(body) {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := io.WriteString(conn, body[i:i+1]); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(hangGuard))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close || !strings.Contains(string(b), `"body_timeout"`) {
		t.Fatalf("status %d, close %v, body %s: want 408 body_timeout and close", resp.StatusCode, resp.Close, b)
	}
	closedByServer(t, conn, br, "after the 408")
}

// Replies that take longer than every timeout (their model calls held
// back by the gate for 1 s, the timeouts 300 ms) still complete, streamed
// or whole, as does the request that waits in the queue meanwhile: the
// timeouts bound a request's arrival and each write, never the reply.
// http.Server's ReadTimeout and WriteTimeout would end them.
func TestSlowReplyCompletes(t *testing.T) {
	const short = 300 * time.Millisecond
	s := startServer(t, "", withGate, limits(func(c *Config) {
		c.HeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout = short, short, short, short
	}))
	body := func(stream bool) map[string]any {
		return user("Once upon a time", "max_tokens", 8, "anechat", map[string]any{"width": 1}, "stream", stream)
	}
	want := s.post(t, "/v1/chat/completions", body(false), http.StatusOK).text()
	got := make(chan string, 2)
	send := func(stream bool) {
		resp, err := http.DefaultClient.Do(s.request(t, t.Context(), http.MethodPost, "/v1/chat/completions", body(stream)))
		if err != nil {
			got <- fmt.Sprintf("stream %v: %v", stream, err)
			return
		}
		defer resp.Body.Close()
		var text string
		if stream {
			var st streamed
			if st, err = readStream(t, resp.Body, nil); err == nil && !st.done {
				err = errors.New("no [DONE]")
			}
			text = st.text()
		} else {
			var r reply
			err = json.NewDecoder(resp.Body).Decode(&r)
			text = r.text()
		}
		got <- fmt.Sprintf("stream %v: %d %v %s", stream, resp.StatusCode, err, text)
	}
	s.gate.arm(1) // the prefill passes; the first decode call blocks
	go send(true)
	select {
	case <-s.gate.blocked:
	case <-time.After(hangGuard):
		t.Fatal("no model call blocked")
	}
	go send(false)          // waits in the queue
	time.Sleep(time.Second) // past every timeout
	s.gate.open()
	for range 2 {
		g := <-got
		if !strings.HasSuffix(g, " 200 <nil> "+want) {
			t.Errorf("%s; want 200 and %q", g, want)
		}
	}
}

// With the cap lowered to 8, 20 clients that connect and send nothing, or
// half a request's headers, do not keep out the token holder: the oldest of
// them are closed to make room, and at most 7 stay open beside it. Before,
// every one of them was kept (until the header timeout, 1 minute here).
func TestConnCapShedsUnauthenticated(t *testing.T) {
	s := startServer(t, "", limits(func(c *Config) { c.MaxConns, c.HeaderTimeout = 8, time.Minute }))
	var idle []net.Conn
	for i := range 20 {
		c := s.dial(t)
		if i%2 == 1 {
			if _, err := io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: "); err != nil {
				t.Fatal(err)
			}
		}
		idle = append(idle, c)
	}
	client := &http.Client{Timeout: hangGuard}
	resp, err := client.Do(s.request(t, t.Context(), http.MethodGet, "/v1/models", nil))
	if err != nil {
		t.Fatalf("the token holder was kept out: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The server closed the shed ones before it accepted the token
	// holder's connection: their end of file is here already.
	open := 0
	deadline := time.Now().Add(200 * time.Millisecond)
	for _, c := range idle {
		c.SetReadDeadline(deadline)
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			open++
		}
	}
	t.Logf("%d of 20 unauthenticated connections still open", open)
	if open > 7 {
		t.Fatalf("%d of 20 unauthenticated connections still open with a cap of 8", open)
	}
}

// When every connection under the cap serves an authenticated request (one
// generating, one queued), the next client waits for room instead of being
// refused or shedding them, and is served once one of them is done.
func TestConnCapWaitsForServing(t *testing.T) {
	s := startServer(t, "", withGate, limits(func(c *Config) { c.MaxConns = 2 }))
	body := user("Once upon a time", "max_tokens", 4, "anechat", map[string]any{"width": 1})
	want := s.post(t, "/v1/chat/completions", body, http.StatusOK).text()
	client := &http.Client{Timeout: hangGuard, Transport: &http.Transport{DisableKeepAlives: true}}
	got := make(chan string, 3)
	send := func() {
		resp, err := client.Do(s.request(t, t.Context(), http.MethodPost, "/v1/chat/completions", body))
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		var r reply
		err = json.NewDecoder(resp.Body).Decode(&r)
		got <- fmt.Sprintf("%d %v %s", resp.StatusCode, err, r.text())
	}
	s.gate.arm(1)
	go send()
	<-s.gate.blocked
	go send()
	for s.srv.queue.waitingN() == 0 {
		time.Sleep(time.Millisecond) // until the second one waits in the queue
	}
	go send() // no room: two connections serve
	time.Sleep(100 * time.Millisecond)
	if n := s.srv.queue.waitingN(); n != 1 {
		t.Fatalf("%d requests wait in the queue: the third connection was let in past the cap of 2", n)
	}
	s.gate.open()
	for range 3 {
		if g := <-got; g != "200 <nil> "+want {
			t.Errorf("got %q, want 200 and %q", g, want)
		}
	}
}

// A connection's writes each get WriteTimeout: writes spread over longer
// than it succeed, and a write to a client that stopped reading fails once
// the socket buffers are full for that long.
func TestWriteDeadlineEachWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimit(ln, 4, 200*time.Millisecond, slog.New(slog.DiscardHandler))
	defer l.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	guard := time.AfterFunc(hangGuard, func() { c.Close() })
	defer guard.Stop()
	for range 5 {
		if _, err := c.Write([]byte("data: a token\n\n")); err != nil {
			t.Fatalf("a slow stream's write: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	for written := 0; ; written += len(buf) {
		_, err := c.Write(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil || written > 1<<30 {
			t.Fatalf("after %d bytes the client did not read: %v, want a deadline error", written, err)
		}
	}
}

// A connection is not shed in its first shedGrace in a state, whatever the
// pressure: under a burst of ordinary clients the newest connections are
// the ones whose requests are on their way (TestLoad reset them before).
// When every candidate is that young, victim says how long until one is not.
func TestVictimSparesYoungConnections(t *testing.T) {
	l := newConnLimit(nil, 2, time.Second, slog.New(slog.DiscardHandler))
	now := time.Now()
	silentOld := &conn{l: l, since: now.Add(-3 * shedGrace)}
	proven := &conn{l: l, since: now.Add(-2 * shedGrace), proven: true}
	fresh := &conn{l: l, since: now.Add(-shedGrace / 4)}
	busy := &conn{l: l, since: now.Add(-10 * shedGrace), proven: true, serving: true}
	for _, c := range []*conn{silentOld, proven, fresh, busy} {
		l.open[c] = struct{}{}
	}
	if v, _ := l.victim(now); v != silentOld {
		t.Fatalf("victim %+v, want the old silent connection", v)
	}
	delete(l.open, silentOld)
	if v, _ := l.victim(now); v != proven {
		t.Fatalf("victim %+v, want the idle token holder", v)
	}
	delete(l.open, proven)
	v, young := l.victim(now)
	if v != nil || young <= 0 || young > shedGrace {
		t.Fatalf("victim %+v, wait %v: want none before the fresh connection is %v old", v, young, shedGrace)
	}
	if v, _ := l.victim(now.Add(young)); v != fresh {
		t.Fatalf("after %v: victim %+v, want the once fresh connection", young, v)
	}
	delete(l.open, fresh)
	if v, young := l.victim(now); v != nil || young != 0 {
		t.Fatalf("only a serving connection: victim %+v, wait %v; want none, and no wait", v, young)
	}
}
