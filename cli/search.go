package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"anechat/internal/catalog"
	"anechat/internal/hub"
	"anechat/internal/human"
	"anechat/internal/pull"
	"anechat/internal/secrets"
	"anechat/storage"
)

// hubFlag adds --hub, the Hugging Face Hub (or mirror) to talk to.
func hubFlag(fs interface {
	String(string, string, string) *string
}) *string {
	return fs.String("hub", "", "the Hugging Face Hub or a mirror to use (default $"+hub.EnvURL+", else "+hub.DefaultURL+"); https, or plain http only on this machine")
}

// envHubToken is $HF_TOKEN checked as a token ("" when unset); the error
// does not repeat it.
func envHubToken() (string, error) {
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

// hubToken is the access token `anechat search` sends to the Hub: $HF_TOKEN
// (the Hub's own convention), else the one stored in Settings for the data
// dir dataDir names (--data-dir, $ANECHAT_HOME or the OS default); "" for
// none. Reading it creates nothing.
func hubToken(dataDir string) (string, error) {
	if tok, err := envHubToken(); tok != "" || err != nil {
		return tok, err
	}
	dir, err := storage.ResolveDataDir(dataDir)
	if err != nil {
		return "", err
	}
	return secrets.Default(dir).Get()
}

// runSearch is `anechat search TEXT`: the catalog's entries that match,
// then the Hub's GGUF and Core ML models whose name holds TEXT.
func runSearch(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "search", "[--hub URL] [--data-dir DIR] [--format gguf|coreml] [--limit N] TEXT")
	hubURL := hubFlag(fs)
	dataDir := fs.String("data-dir", "", "data directory whose Hugging Face token (stored in Settings) is sent when $"+hub.EnvToken+" is unset (default $ANECHAT_HOME or the OS default)")
	format := fs.String("format", "", "only this format: gguf or coreml (default both)")
	limit := fs.Int("limit", 20, "the most Hub results to list (1..100)")
	text, err := parseOperand(fs, args, "TEXT (what the model's name holds)")
	if err != nil {
		return err
	}
	if *format != "" && *format != string(hub.GGUF) && *format != string(hub.CoreML) {
		return badFlag(env, "search", fmt.Errorf("--format %q: want gguf or coreml", *format))
	}
	if *limit < 1 || *limit > 100 {
		return badFlag(env, "search", fmt.Errorf("--limit %d: want 1..100", *limit))
	}
	c, err := hub.New(hub.BaseURL(*hubURL), nil)
	if err != nil {
		return badFlag(env, "search", err)
	}
	tok, err := hubToken(*dataDir)
	if err != nil {
		return err
	}
	c = c.WithToken(tok)
	cat, err := catalog.Load()
	if err != nil {
		return err
	}
	if err := listRepository(ctx, env, c, text); err != nil {
		return err
	}
	m := catalog.ThisMachine()
	rec := cat.Recommend(m, nil)
	needle := strings.ToLower(strings.TrimSpace(text))
	shown := 0
	for i := range cat.Entries {
		e := &cat.Entries[i]
		if *format != "" && e.Format != *format {
			continue
		}
		if !strings.Contains(strings.ToLower(e.Name+" "+e.Title+" "+e.Repo), needle) {
			continue
		}
		if shown == 0 {
			fmt.Fprintln(env.Stdout, "catalog (anechat pull NAME):")
		}
		shown++
		f := catalog.Assess(e, 0, m)
		size := "size from the Hub's tree"
		if f.Size > 0 {
			size = "about " + human.Bytes(f.Size)
		}
		mark := ""
		if i == rec {
			mark = "  [recommended here]"
		}
		fmt.Fprintf(env.Stdout, "  %-24s %s (%s)%s\n", e.Name, e.Title, e.Repo, mark)
		fmt.Fprintf(env.Stdout, "  %-24s %s, %s context, %s; %s: %s\n", "", size, strconv.Itoa(e.Context)+"-token", licenceWords(e, c), f.Verdict, f.Note)
	}
	ms, err := c.Search(ctx, text, hub.Format(*format), *limit)
	if err != nil {
		if shown > 0 {
			fmt.Fprintln(env.Stdout)
		}
		return err
	}
	if shown > 0 {
		fmt.Fprintln(env.Stdout)
	}
	if len(ms) == 0 {
		fmt.Fprintf(env.Stdout, "no GGUF or Core ML model on %s matches %q\n", c.URL(), text)
		return nil
	}
	fmt.Fprintf(env.Stdout, "%s (anechat pull OWNER/NAME [FILE]):\n", c.URL())
	for _, x := range ms {
		note := ""
		if x.Gated != "" {
			note = "  gated: accept its licence at " + c.RepoURL(x.ID) + " first"
			if !c.HasToken() {
				note += ", then set $" + hub.EnvToken + " (or store a token in Settings)"
			}
		}
		fmt.Fprintf(env.Stdout, "  %-48s %-6s %9d downloads %6d likes%s\n", x.ID, x.Format, x.Downloads, x.Likes, note)
	}
	return nil
}

// licenceWords names an entry's licence and whether it must be accepted
// on the Hub first.
func licenceWords(e *catalog.Entry, c *hub.Client) string {
	if e.AcceptOnHub {
		return fmt.Sprintf("%s (accept it at %s first)", e.Licence, e.RepoURL(c.URL()))
	}
	return fmt.Sprintf("%s (%s)", e.Licence, e.LicenceURL)
}

// listRepository lists the files of the repository TEXT names when it is
// OWNER/NAME[@REVISION] of a repository on the Hub: its quantisations (the
// GGUF files, smallest first) or, with none, its size as a bundle. TEXT
// that names no repository lists nothing (it is searched for as text).
func listRepository(ctx context.Context, env *Env, c *hub.Client, text string) error {
	repo, rev, found := strings.Cut(strings.TrimSpace(text), "@")
	if !found {
		rev = "main"
	}
	if hub.CheckRepo(repo) != nil || hub.CheckRevision(rev) != nil {
		return nil
	}
	info, err := c.Info(ctx, repo, rev)
	if errors.Is(err, hub.ErrNotFound) || errors.Is(err, hub.ErrOffline) {
		return nil // searched for as text; offline, the search says so after the catalog
	}
	if err != nil {
		return err
	}
	tree, err := c.Tree(ctx, repo, info.SHA)
	if err != nil {
		return err
	}
	gated := ""
	if info.Gated != "" {
		gated = " (gated: accept its licence at " + c.RepoURL(repo) + " first"
		if !c.HasToken() {
			gated += ", then set $" + hub.EnvToken + " or store a token in Settings"
		}
		gated += ")"
	}
	fmt.Fprintf(env.Stdout, "%s at %s (commit %s)%s:\n", repo, rev, info.SHA, gated)
	if q := pull.Quantisations(tree); len(q) > 0 {
		for _, f := range q {
			fmt.Fprintf(env.Stdout, "  %-56s %10s   anechat pull %s %s\n", f.Path, human.Bytes(f.Size), repo, f.Path)
		}
	} else {
		fmt.Fprintf(env.Stdout, "  %d files, %s, no GGUF file: anechat pull %s takes them as one bundle\n", len(tree.Files), human.Bytes(tree.Size()), repo)
	}
	fmt.Fprintln(env.Stdout)
	return nil
}
