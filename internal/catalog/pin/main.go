// Command pin pins the catalog's entries: for each, it resolves the
// entry's revision (a branch) to the commit it names on the Hub now, reads
// the repository's tree there, takes the entry's files as a download would
// (internal/pull: the one .gguf file, or the bundle's files and folders)
// and writes the commit and every file's size and checksum (sha256 for a
// file in LFS, the Git blob id for one in Git) into the entry's "commit"
// and "pins". A pinned entry then downloads that commit and nothing but
// those files (pull.Make refuses a tree that differs).
//
//	go run ./internal/catalog/pin                  # every entry, on huggingface.co
//	go run ./internal/catalog/pin gemma-3-1b-it    # only the entries named
//	go run ./internal/catalog/pin -hub URL -file PATH ENTRY...
//
// It needs the Hub (ANECHAT_HUB or -hub for a mirror); a gated repository
// needs HF_TOKEN of an account that accepted its licence. An entry the Hub
// could not tell about is left as it was and named at the end (exit 1);
// the others are written. The file is rewritten whole (two-space JSON), to
// be reviewed like code before it is committed.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"anechat/internal/catalog"
	"anechat/internal/hub"
	"anechat/internal/pull"
	"anechat/internal/secrets"
)

func main() {
	hubURL := flag.String("hub", "", "the Hugging Face Hub or a mirror (default $"+hub.EnvURL+", else "+hub.DefaultURL+")")
	file := flag.String("file", "internal/catalog/catalog.json", "the catalog file to pin (rewritten in place)")
	flag.Parse()
	tok, err := token()
	if err == nil {
		err = run(context.Background(), hub.BaseURL(*hubURL), tok, *file, flag.Args(), os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pin:", err)
		os.Exit(1)
	}
}

// token is $HF_TOKEN, checked, "" when unset.
func token() (string, error) {
	t := hub.TokenFromEnv()
	if t == "" {
		return "", nil
	}
	tok, err := secrets.CheckToken(t)
	if err != nil {
		return "", fmt.Errorf("$%s: %w", hub.EnvToken, err)
	}
	return tok, nil
}

// run pins the entries names lists (every entry when none) of the catalog
// in file against the Hub at hubURL, saying what it did on log.
func run(ctx context.Context, hubURL, token, file string, names []string, log io.Writer) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	cat, err := catalog.Parse(b)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	c, err := hub.New(hubURL, nil)
	if err != nil {
		return err
	}
	c = c.WithToken(token)
	want := map[string]bool{}
	for _, n := range names {
		if _, ok := cat.Find(n); !ok {
			return fmt.Errorf("%s has no entry %q (%s)", file, n, strings.Join(cat.Names(), ", "))
		}
		want[n] = true
	}
	var failed []string
	for i := range cat.Entries {
		e := &cat.Entries[i]
		if len(want) > 0 && !want[e.Name] {
			continue
		}
		// Planned from the branch, as an unpinned entry downloads.
		open := *e
		open.Commit, open.Pins = "", nil
		tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		plan, err := pull.Make(tctx, c, pull.Target{Entry: &open, Repo: e.Repo, Revision: e.Revision}, nil)
		cancel()
		if err != nil {
			fmt.Fprintf(log, "%s: not pinned: %v\n", e.Name, err)
			failed = append(failed, e.Name)
			continue
		}
		pins := make([]catalog.Pin, 0, len(plan.Taken))
		for _, f := range plan.Taken {
			p := catalog.Pin{Path: f.Path, Size: f.Size}
			if f.LFS != nil {
				p.SHA256 = f.LFS.SHA256
			} else {
				p.GitBlob = strings.ToLower(f.OID)
			}
			pins = append(pins, p)
		}
		before := e.Commit
		e.Commit, e.Pins = plan.Commit, pins
		what := "pinned"
		if before == plan.Commit {
			what = "pinned again"
		}
		fmt.Fprintf(log, "%s: %s to %s@%s (%s), %d file(s), %d bytes\n", e.Name, what, e.Repo, plan.Commit, e.Revision, len(pins), plan.Size)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cat); err != nil {
		return err
	}
	if _, err := catalog.Parse(out.Bytes()); err != nil {
		return fmt.Errorf("the pinned catalog does not parse (nothing written): %w", err)
	}
	if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
		return err
	}
	if len(failed) > 0 {
		return errors.New("not pinned (left as they were): " + strings.Join(failed, ", "))
	}
	return nil
}
