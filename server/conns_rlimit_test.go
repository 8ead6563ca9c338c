//go:build linux || darwin

package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"anechat/internal/crashtest"
)

// fdRoomEnv tells TestFDLimitHelper how many file descriptors to leave
// free for connections.
const fdRoomEnv = "ANECHAT_TEST_FD_ROOM"

// TestFDLimitHelper serves, with RLIMIT_NOFILE lowered to what it has open
// plus the room fdRoomEnv gives and a header timeout of a minute, until
// its stdin closes; it prints the server's URL first.
func TestFDLimitHelper(t *testing.T) {
	room, _ := strconv.Atoi(os.Getenv(fdRoomEnv))
	if room == 0 {
		t.Skip("helper process of TestFDLimit; runs only as its subprocess")
	}
	s := startServer(t, "", limits(func(c *Config) { c.HeaderTimeout = time.Minute }))
	fds, err := os.ReadDir("/dev/fd")
	if err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = uint64(len(fds) + room)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	fmt.Println(s.url)
	io.Copy(io.Discard, os.Stdin)
}

// With the file-descriptor limit 30 above what the server holds at the
// start (below the connection cap), 40 clients that send a request without
// the token and 40 that connect and send nothing do not starve the token
// holder: the first are closed after their 401, and when accept fails for
// want of descriptors the oldest silent ones are closed to make room.
// Before, the 401's connections stayed open, accept failed for good
// (logged at debug level) and the token holder waited forever.
func TestFDLimit(t *testing.T) {
	cmd := crashtest.Command(t, "TestFDLimitHelper", fdRoomEnv+"=30")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("helper: %v\n%s", err, stderr.String())
			}
		case <-time.After(hangGuard):
			cmd.Process.Kill()
			t.Errorf("the helper did not stop when its stdin closed")
		}
	}()
	url, err := bufio.NewReader(stdout).ReadString('\n')
	go func() { exited <- cmd.Wait() }()
	if err != nil {
		t.Fatalf("helper printed no URL: %v\n%s", err, stderr.String())
	}
	s := &testServer{url: strings.TrimSpace(url)}
	for i := range 80 {
		c := s.dial(t)
		if i < 40 {
			if _, err := io.WriteString(c, s.rawRequest("GET", "/v1/models", "", false)); err != nil {
				t.Fatal(err)
			}
		}
	}
	client := &http.Client{Timeout: hangGuard}
	t0 := time.Now()
	resp, err := client.Do(s.request(t, t.Context(), http.MethodGet, "/v1/models", nil))
	if err != nil {
		t.Fatalf("the token holder was kept out: %v\n%s", err, stderr.String())
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	t.Logf("the token holder was answered in %v", time.Since(t0))
}
