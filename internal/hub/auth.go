package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// EnvToken is the environment variable holding a Hugging Face access token
// (the Hub's own convention, which huggingface_hub reads too): `anechat
// search` and `anechat pull` use it before the token stored in Settings.
const EnvToken = "HF_TOKEN"

// TokensURL is where a Hugging Face account makes its access tokens.
const TokensURL = "https://huggingface.co/settings/tokens"

// Authorize returns a client that sends "Authorization: Bearer TOKEN" on
// every request to the Hub at hubURL — the same scheme, host and port —
// and on no other: a redirect to the Hub's CDN (another host) or anywhere
// else goes without it. Each hop of a redirect is judged on its own, in
// the transport, so the header is never copied along by the client. hc nil
// is http.DefaultClient's settings; an empty token returns hc as it is.
func Authorize(hc *http.Client, hubURL, token string) (*http.Client, error) {
	if hc == nil {
		hc = &http.Client{}
	}
	if token == "" {
		return hc, nil
	}
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(hubURL), "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("hub: %q is not a URL: want e.g. %s", hubURL, DefaultURL)
	}
	inner := hc.Transport
	if inner == nil {
		inner = http.DefaultTransport
	}
	out := *hc
	out.Transport = &authTransport{inner: inner, scheme: u.Scheme, host: strings.ToLower(u.Host), token: token}
	return &out, nil
}

// authTransport adds the token to the requests for one origin.
type authTransport struct {
	inner        http.RoundTripper
	scheme, host string
	token        string
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	mine := r.URL.Scheme == t.scheme && strings.ToLower(r.URL.Host) == t.host
	if mine || r.Header.Get("Authorization") != "" {
		r = r.Clone(r.Context())
		if mine {
			r.Header.Set("Authorization", "Bearer "+t.token)
		} else {
			r.Header.Del("Authorization")
		}
	}
	return t.inner.RoundTrip(r)
}

// WithToken returns a client of the same Hub that sends token to it (and
// only to it: Authorize), "" for none.
func (c *Client) WithToken(token string) *Client {
	out := *c
	out.token = token
	out.http, _ = Authorize(c.plain, c.base.String(), token) // c.base parsed already
	return &out
}

// HasToken reports whether the client sends a token.
func (c *Client) HasToken() bool { return c.token != "" }

// redact removes the client's token from s (a server's message that
// repeated it must not carry it into an error or a log).
func (c *Client) redact(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "[the token]")
}

// TokenFromEnv returns $HF_TOKEN, trimmed ("" when unset).
func TokenFromEnv() string { return strings.TrimSpace(os.Getenv(EnvToken)) }

// CheckAccess asks the Hub, without downloading it, whether file of repo at
// commit may be downloaded with the client's token: a HEAD request on its
// resolve URL, the redirect to the CDN not followed. A gated repository
// whose licence the token's account has not accepted, or a token the Hub
// refuses, is the *Error saying so.
func (c *Client) CheckAccess(ctx context.Context, repo, commit, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.ResolveURL(repo, commit, file), nil)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return &Error{Kind: ErrOffline, Repo: repo, Revision: commit, Host: c.base.Host, Detail: cause(err)}
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil // the redirect to the file's bytes: allowed
	}
	return c.StatusError(resp, repo, commit, file)
}

// WhoAmI asks the Hub whose token the client sends (GET /api/whoami-v2, the
// endpoint huggingface_hub's whoami reads) and returns the account's name:
// a token the Hub refuses is ErrTokenRefused, before it is stored or used.
func (c *Client) WhoAmI(ctx context.Context) (string, error) {
	if c.token == "" {
		return "", errors.New("hub: whoami: no token to ask about")
	}
	var who struct {
		Name string `json:"name"`
	}
	if _, err := c.getJSON(ctx, c.api("/api/whoami-v2", nil), &who, target{}); err != nil {
		return "", err
	}
	if who.Name == "" {
		return "", &Error{Kind: ErrBadAnswer, Detail: "its whoami answer names no account"}
	}
	return who.Name, nil
}
