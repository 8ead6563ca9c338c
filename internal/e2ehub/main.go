// Command e2ehub serves the fake Hugging Face Hub (internal/hub/hubtest's
// fixtures) on 127.0.0.1 for the end-to-end run: build/scripts/e2e.sh
// starts it, points the app at it with ANECHAT_HUB and stops it at the end.
// It writes its URL to the file -url names once it listens.
//
// The files of the repository -slow names trickle (4 KiB every 50 ms), so
// the test sees a bundle download in progress, pauses and cancels it; the
// other files come at full speed. The gated repositories (the catalog's
// gemma-3-270m-it among them) serve their files only with hubtest.Token,
// the token e2e/hftoken.spec.ts pastes in Settings.
//
// usage: go run ./internal/e2ehub -url FILE -blob stories260K.gguf=PATH [-slow OWNER/NAME]
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"anechat/internal/hub/hubtest"
)

func main() {
	urlFile := flag.String("url", "", "file to write the Hub's URL to")
	blob := flag.String("blob", "", "NAME=PATH: the local file an external fixture (e.g. stories260K.gguf) is served from")
	slow := flag.String("slow", "anechat-test/tiny-coreml", "repository whose files trickle")
	flag.Parse()
	if err := run(*urlFile, *blob, *slow); err != nil {
		fmt.Fprintln(os.Stderr, "e2ehub:", err)
		os.Exit(1)
	}
}

func run(urlFile, blob, slow string) error {
	if urlFile == "" {
		return errors.New("-url FILE is required")
	}
	s, err := hubtest.New()
	if err != nil {
		return err
	}
	if blob != "" {
		name, path, ok := strings.Cut(blob, "=")
		if !ok {
			return fmt.Errorf("-blob %q: want NAME=PATH", blob)
		}
		if _, err := os.Stat(path); err != nil {
			return err
		}
		s.Blobs[name] = path
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.URL = "http://" + ln.Addr().String()
	h := s.Handler()
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow != "" && strings.HasPrefix(r.URL.Path, "/cdn/"+slow+"/") {
			w = &trickle{ResponseWriter: w}
		}
		h.ServeHTTP(w, r)
	})
	if err := os.WriteFile(urlFile, []byte(s.URL+"\n"), 0o644); err != nil {
		return err
	}
	return http.Serve(ln, mux)
}

// trickle sends 4 KiB every 50 ms.
type trickle struct{ http.ResponseWriter }

func (t *trickle) Write(p []byte) (int, error) {
	sent := 0
	for len(p) > 0 {
		k := min(4096, len(p))
		n, err := t.ResponseWriter.Write(p[:k])
		sent += n
		if err != nil {
			return sent, err
		}
		if f, ok := t.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		p = p[k:]
		time.Sleep(50 * time.Millisecond)
	}
	return sent, nil
}
