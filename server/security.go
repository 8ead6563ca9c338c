package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"anechat/internal/atomicfile"
)

// TokenFile is the file in the data directory that keeps the API's bearer
// token, so that scripts keep working across restarts.
const TokenFile = "api-token"

// LoadToken returns the bearer token kept in dataDir's TokenFile, creating
// one (256 random bits, hex) the first time. The file is readable by its
// owner only and written atomically (atomicfile).
func LoadToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, TokenFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 {
			return "", fmt.Errorf("server: the token in %s is shorter than 16 characters: delete the file and a new token is made", path)
		}
		return tok, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("server: read the API token: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("server: make an API token: %w", err)
	}
	tok := hex.EncodeToString(raw[:])
	switch err := atomicfile.WriteNewFile(path, []byte(tok+"\n"), 0o600); {
	case errors.Is(err, fs.ErrExist):
		return LoadToken(dataDir) // another process made one meanwhile: the first wins
	case err != nil:
		return "", fmt.Errorf("server: write the API token %s: %w", path, err)
	}
	return tok, nil
}

// authorized reports whether r carries the bearer token, compared in
// constant time.
func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.cfg.Token)) == 1
}

// hostCheck decides which Host headers a request may carry: the names of
// the address the server listens on, with its port. A DNS-rebinding page
// sends its own domain name, which is never among them.
type hostCheck struct {
	port  string
	names []string // lower case, without brackets
	// anyIP: the server listens on every address (--host 0.0.0.0 or ::),
	// so any IP literal names it; names still need to be given.
	anyIP bool
}

// newHostCheck builds the check for a server told to listen on host ("" =
// 127.0.0.1) that got the listener address addr.
func newHostCheck(host string, addr net.Addr) (hostCheck, error) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return hostCheck{}, fmt.Errorf("server: listener address %v is not TCP", addr)
	}
	h := hostCheck{port: strconv.Itoa(ta.Port)}
	add := func(n string) {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		if n != "" && !slices.Contains(h.names, n) {
			h.names = append(h.names, n)
		}
	}
	switch {
	case ta.IP.IsUnspecified():
		h.anyIP = true
		add("localhost")
	case ta.IP.IsLoopback():
		add("localhost")
		add(ta.IP.String())
	default:
		add(ta.IP.String())
	}
	if host != "" && net.ParseIP(strings.Trim(host, "[]")) == nil {
		add(host) // a name the user chose to listen by
	}
	return h, nil
}

// allowed reports whether hostHeader names this server.
func (h hostCheck) allowed(hostHeader string) bool {
	name, port, err := net.SplitHostPort(hostHeader)
	if err != nil {
		name, port = hostHeader, "80" // no port: HTTP's default
	}
	if port != h.port {
		return false
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if slices.Contains(h.names, name) {
		return true
	}
	if ip := net.ParseIP(name); ip != nil {
		return h.anyIP || slices.Contains(h.names, ip.String())
	}
	return false
}

// String lists the accepted names, for the error message.
func (h hostCheck) String() string {
	var out []string
	for _, n := range h.names {
		if strings.Contains(n, ":") {
			n = "[" + n + "]"
		}
		out = append(out, n+":"+h.port)
	}
	if h.anyIP {
		out = append(out, "any IP address:"+h.port)
	}
	return strings.Join(out, ", ")
}
