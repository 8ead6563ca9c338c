package hub

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"anechat/internal/download"
)

// The kinds of *Error; match them with errors.Is.
var (
	// ErrGated: the repository's licence must be accepted on the Hub first.
	ErrGated = errors.New("gated repository")
	// ErrNotFound: no such repository (or a private one), revision or file.
	ErrNotFound = errors.New("not found")
	// ErrRateLimited: the Hub asks to slow down (HTTP 429).
	ErrRateLimited = errors.New("rate limited")
	// ErrOffline: the Hub could not be reached.
	ErrOffline = errors.New("offline")
	// ErrBadAnswer: the Hub answered something that is not what its API
	// documents, or an error status of no known kind.
	ErrBadAnswer = errors.New("unexpected answer")
	// ErrTokenRefused: the Hub did not accept the access token sent
	// (mistyped, expired or revoked).
	ErrTokenRefused = errors.New("token refused")
)

// Error is a Hub request that failed, in plain words.
type Error struct {
	// Kind is one of ErrGated, ErrNotFound, ErrRateLimited, ErrOffline,
	// ErrBadAnswer.
	Kind error
	// Repo, Revision and Path say what was asked for (any may be "").
	Repo, Revision, Path string
	// Link is where to accept a gated repository's licence.
	Link string
	// Host is the Hub's host (ErrOffline).
	Host string
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// RetryAfter is how long the Hub asked to wait (ErrRateLimited), 0
	// when it did not say.
	RetryAfter time.Duration
	// Detail is the rest: the transport's words, the server's message.
	Detail string
	// Token: the request carried an access token (a gated repository's
	// error then says the token's account has no access, not that a token
	// is missing).
	Token bool
}

func (e *Error) Unwrap() error { return e.Kind }

func (e *Error) Error() string {
	what := e.Repo
	if what == "" {
		what = "the Hub"
	}
	switch e.Kind {
	case ErrGated:
		if e.Token {
			return fmt.Sprintf("%s is a gated repository and the account of your Hugging Face token has no access to it yet: open %s, log in as that account and accept its licence (or ask for access), then try again", what, e.Link)
		}
		return fmt.Sprintf("%s is a gated repository: its licence must be accepted on Hugging Face before its files can be downloaded. Open %s, log in and accept it; then paste an access token of that account (%s, read access is enough) in Settings, or set %s for the command line (anechat never asks for your password)", what, e.Link, TokensURL, EnvToken)
	case ErrTokenRefused:
		msg := fmt.Sprintf("the token was refused: the Hub at %s did not accept your Hugging Face access token (HTTP %d", e.Host, e.Status)
		if e.Detail != "" {
			msg += ": " + e.Detail
		}
		return msg + "); it may be mistyped, expired or revoked: make a new one at " + TokensURL + " and paste it in Settings (or set " + EnvToken + "), or clear it there to go on without one"
	case ErrNotFound:
		switch {
		case e.Path != "":
			return fmt.Sprintf("%s has no file %s at revision %s (check the file name: `anechat pull %s` lists them)", what, e.Path, e.Revision, e.Repo)
		case e.Detail == "RevisionNotFound":
			return fmt.Sprintf("%s has no revision %q (a branch, a tag or a commit; main is the default)", what, e.Revision)
		case e.Repo != "":
			return fmt.Sprintf("%s was not found on the Hub (check the name, OWNER/NAME; a private repository is not found either)", what)
		}
		return "not found on the Hub"
	case ErrRateLimited:
		if e.RetryAfter > 0 {
			return fmt.Sprintf("the Hub is limiting requests (HTTP 429): try again in %s", e.RetryAfter.Round(time.Second))
		}
		return "the Hub is limiting requests (HTTP 429): try again in a few minutes"
	case ErrOffline:
		return fmt.Sprintf("the Hub at %s could not be reached (are you offline? --hub or ANECHAT_HUB points at a mirror): %s", e.Host, e.Detail)
	}
	msg := fmt.Sprintf("the Hub answered %s unexpectedly", what)
	if e.Status != 0 {
		msg = fmt.Sprintf("the Hub answered HTTP %d for %s", e.Status, what)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// StatusError returns nil for a 2xx answer and the *Error an error status
// means otherwise: the X-Error-Code header first (GatedRepo, RepoNotFound,
// RevisionNotFound, EntryNotFound), then the status (401 and 404 are not
// found, 403 gated, 429 rate limited).
func (c *Client) StatusError(resp *http.Response, repo, revision, file string) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	e := &Error{Repo: repo, Revision: revision, Status: resp.StatusCode, Link: c.RepoURL(repo), Token: c.token != ""}
	code := resp.Header.Get("X-Error-Code")
	switch {
	case c.token != "" && resp.StatusCode == http.StatusUnauthorized && code != "RepoNotFound" && code != "RevisionNotFound" && code != "EntryNotFound":
		// With a token, the Hub answers a gated repository 403 and a
		// missing one RepoNotFound: a 401 left is the token itself
		// ("Invalid credentials in Authorization header").
		e.Kind, e.Host = ErrTokenRefused, c.base.Host
		e.Detail = c.redact(strings.TrimSpace(resp.Header.Get("X-Error-Message")))
	case code == "GatedRepo" || code == "" && resp.StatusCode == http.StatusForbidden:
		e.Kind = ErrGated
	case code == "RepoNotFound":
		e.Kind = ErrNotFound
	case code == "RevisionNotFound":
		e.Kind, e.Detail = ErrNotFound, code
	case code == "EntryNotFound":
		e.Kind, e.Path = ErrNotFound, file
	case resp.StatusCode == http.StatusTooManyRequests:
		e.Kind = ErrRateLimited
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound:
		// The Hub answers 401 for a missing repository as for a private
		// one (huggingface_hub treats both as not found).
		e.Kind = ErrNotFound
		e.Path = file
	default:
		e.Kind = ErrBadAnswer
		e.Detail = c.redact(strings.TrimSpace(resp.Header.Get("X-Error-Message")))
	}
	if repo == "" && e.Kind == ErrGated {
		e.Link = c.URL()
	}
	return e
}

// retryAfter parses a Retry-After header: seconds or an HTTP date; 0 when
// absent or unreadable. It is capped at an hour.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}

// DownloadError says in the Hub's words why downloading file of repo at
// revision failed, when the download's error is one the Hub explains: a
// 401 or 403 from the resolve URL is a gated repository (the tree listed
// the file, so it exists) — with a token sent, a 401 is the token refused
// —, 404 a file gone since, 429 rate limiting, a connection never made the
// Hub being unreachable. Any other error is returned as it is.
func (c *Client) DownloadError(err error, repo, revision, file string) error {
	var se *download.StatusError
	if errors.As(err, &se) {
		e := &Error{Repo: repo, Revision: revision, Path: file, Status: se.Code, Link: c.RepoURL(repo), Token: c.token != ""}
		switch se.Code {
		case http.StatusUnauthorized:
			if c.token != "" {
				e.Kind, e.Path, e.Host = ErrTokenRefused, "", c.base.Host
			} else {
				e.Kind, e.Path = ErrGated, ""
			}
		case http.StatusForbidden:
			e.Kind, e.Path = ErrGated, ""
		case http.StatusNotFound:
			e.Kind = ErrNotFound
		case http.StatusTooManyRequests:
			e.Kind = ErrRateLimited
		default:
			return err
		}
		return e
	}
	var ie *download.InterruptedError
	if errors.As(err, &ie) && ie.Received == 0 && strings.HasPrefix(ie.Error(), "the server could not be reached") {
		return &Error{Kind: ErrOffline, Repo: repo, Revision: revision, Path: file, Host: c.base.Host, Detail: cause(ie.Err)}
	}
	return err
}
