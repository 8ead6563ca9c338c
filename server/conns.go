package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// connLimit is the server's listener. It keeps at most max connections
// open: a connection accepted past the cap makes room by closing the
// connection that matters least (connLimit.victim), so that clients who
// connect and never send a request, or never send the token, cannot
// starve the token holder; when every connection is serving an
// authenticated request, the new one waits for one to end (later ones
// wait in the kernel's backlog). It also gives each write of a response a
// deadline (conn.Write) and rides out a shortage of file descriptors.
type connLimit struct {
	net.Listener
	max   int
	write time.Duration
	log   *slog.Logger

	done chan struct{} // closed by Close
	// failed counts the failed accepts since failWarned, the last warning
	// of them; only accept uses them.
	failed     int
	failWarned time.Time

	mu     sync.Mutex
	room   *sync.Cond // signalled when a connection closes or may be shed
	open   map[*conn]struct{}
	closed bool
	warned time.Time // the last "at the cap" warning
}

// warnEvery spaces out the warnings of a cap reached or of accept failing:
// one a minute says the server is under pressure without flooding the log.
const warnEvery = time.Minute

func newConnLimit(ln net.Listener, maxConns int, write time.Duration, log *slog.Logger) *connLimit {
	l := &connLimit{Listener: ln, max: maxConns, write: write, log: log, done: make(chan struct{}), open: map[*conn]struct{}{}}
	l.room = sync.NewCond(&l.mu)
	return l
}

// Accept returns the next connection once there is room for it.
func (l *connLimit) Accept() (net.Conn, error) {
	nc, err := l.accept()
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, l: l, since: time.Now()}
	l.mu.Lock()
	for len(l.open) >= l.max && !l.closed {
		v, young := l.victim(time.Now())
		if v == nil {
			if young > 0 {
				// Wake when the youngest candidate may be shed.
				t := time.AfterFunc(young, l.wake)
				l.room.Wait()
				t.Stop()
			} else {
				l.room.Wait()
			}
			continue
		}
		l.warnCap()
		l.drop(v)
		l.mu.Unlock()
		v.Conn.Close()
		l.mu.Lock()
	}
	if l.closed {
		l.mu.Unlock()
		nc.Close()
		return nil, net.ErrClosed
	}
	l.open[c] = struct{}{}
	l.mu.Unlock()
	return c, nil
}

// accept accepts from the kernel. Out of file descriptors (or kernel
// memory), it closes a connection that can be shed, if any, and tries
// again; else it backs off (5 ms doubling to 1 s). It warns once a minute
// at most, with the failures since: net/http would log each at the debug
// level of its error log only. Only the Accept goroutine calls it.
func (l *connLimit) accept() (net.Conn, error) {
	var delay time.Duration
	for {
		nc, err := l.Listener.Accept()
		if err == nil || !outOfResources(err) {
			return nc, err
		}
		l.failed++
		if time.Since(l.failWarned) >= warnEvery {
			l.failWarned = time.Now()
			l.log.Warn("api: cannot accept a connection: closing idle and unauthenticated ones, else retrying",
				"err", err, "failed_accepts", l.failed, "open", l.count(), "max", l.max)
			l.failed = 0
		}
		if l.shed() {
			continue
		}
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		select {
		case <-time.After(delay):
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
}

// outOfResources reports whether an accept failed for want of descriptors
// or kernel memory, which closing connections or waiting may cure.
func outOfResources(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// wake signals the Accept waiting for room (a candidate has aged past
// shedGrace).
func (l *connLimit) wake() {
	l.mu.Lock()
	l.room.Broadcast()
	l.mu.Unlock()
}

// shed closes the connection victim picks, reporting whether there was one.
func (l *connLimit) shed() bool {
	l.mu.Lock()
	v, _ := l.victim(time.Now())
	if v != nil {
		l.drop(v)
	}
	l.mu.Unlock()
	if v == nil {
		return false
	}
	v.Conn.Close()
	return true
}

// victim is the open connection to close to make room, nil if none may
// be: never one serving an authenticated request; first those that never
// carried the token (connected and silent, sending a request slowly, or
// left open after a preflight), then idle ones of token holders, the
// longest in their state first. A client that sends its request at once
// is in the first group for the moment its headers take to arrive, so
// A connection is not shed in its first shedGrace in a state: a client
// whose request is still on its way (a new connection, an idle one just
// reused) would see its request fail, and under a burst of ordinary
// clients that was most of them (TestLoad, 50 clients on a cap of 64:
// connections reset while their headers were in flight). When no
// connection may be shed yet, young is how long until one may (0: none
// will, all serve).
func (l *connLimit) victim(now time.Time) (v *conn, young time.Duration) {
	for c := range l.open {
		if c.serving {
			continue
		}
		if wait := c.since.Add(shedGrace).Sub(now); wait > 0 {
			if young == 0 || wait < young {
				young = wait
			}
			continue
		}
		if v == nil || (!c.proven && v.proven) || (c.proven == v.proven && c.since.Before(v.since)) {
			v = c
		}
	}
	if v != nil {
		young = 0
	}
	return v, young
}

// shedGrace is how long a connection is safe from shedding after it enters
// a state (accepted, idle): far longer than a request's headers take to
// arrive on a loaded machine, far shorter than what a silent client would
// hold a place for without it (HeaderTimeout, IdleTimeout).
const shedGrace = 2 * time.Second

// drop forgets c (l.mu held) and makes room.
func (l *connLimit) drop(c *conn) {
	if _, ok := l.open[c]; ok {
		delete(l.open, c)
		l.room.Broadcast()
	}
}

// warnCap warns, once a minute at most, that connections are being shed
// (l.mu held).
func (l *connLimit) warnCap() {
	if time.Since(l.warned) >= warnEvery {
		l.warned = time.Now()
		l.log.Warn("api: connection cap reached: closing the oldest idle or unauthenticated connection", "max", l.max)
	}
}

func (l *connLimit) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// Close closes the listener, wakes an Accept waiting for room and closes
// the connections that serve no authenticated request: http.Server's
// Shutdown, which closes the listener first, would wait for a request
// still arriving until its header timeout, and for a silent client 5 s.
func (l *connLimit) Close() error {
	var idle []*conn
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
		l.room.Broadcast()
		for c := range l.open {
			if !c.serving {
				idle = append(idle, c)
			}
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
	return l.Listener.Close()
}

// track is the http.Server's ConnState hook: it keeps each connection's
// state for victim.
func (l *connLimit) track(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		l.drop(c)
		return
	case http.StateIdle:
		c.serving = false
		l.room.Broadcast() // it may be shed now
	}
	c.since = time.Now()
}

// connKey is the request context's key of the connection (ConnContext).
type connKey struct{}

// withConn is the http.Server's ConnContext hook.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// serving marks the connection of r as carrying the token and serving it:
// it is not shed while the request runs, and is shed after the
// unauthenticated ones when idle.
func serving(r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*conn)
	if !ok {
		return
	}
	c.l.mu.Lock()
	c.proven, c.serving = true, true
	c.l.mu.Unlock()
}

// conn is an accepted connection, tracked by its connLimit.
type conn struct {
	net.Conn
	l *connLimit
	// Guarded by l.mu:
	since   time.Time // when it entered its ConnState
	proven  bool      // a request on it carried the token
	serving bool      // an authenticated request on it is being served
	closed  sync.Once
}

// Write writes with a deadline of l.write from now: a client that stops
// reading is dropped once the socket's buffers are full for that long,
// while a reply streamed slowly (a long generation, token by token) gets a
// fresh deadline with each piece. http.Server's WriteTimeout would instead
// bound the whole response.
func (c *conn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.l.write)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// CloseWrite half-closes the connection, as net/http does before closing
// one that sent "Connection: close" (without it, it only waits).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection and frees its place.
func (c *conn) Close() error {
	err := net.ErrClosed
	c.closed.Do(func() {
		err = c.Conn.Close()
		c.l.mu.Lock()
		c.l.drop(c)
		c.l.mu.Unlock()
	})
	return err
}
