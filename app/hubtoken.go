package app

import (
	"context"
	"errors"

	"anechat/internal/hub"
	"anechat/internal/secrets"
)

// HubToken is what the Settings page shows of the Hugging Face access
// token: whether one is stored, which (masked), and where it is kept. The
// token itself never leaves the Go side.
type HubToken struct {
	// Set: a token is stored; the Hub client sends it to the Hub (and only
	// to the Hub's own host) for every request, so gated repositories
	// whose licence its account accepted download.
	Set bool `json:"set"`
	// Masked is its kind and last four characters ("hf_…wxyz").
	Masked string `json:"masked"`
	// Where says where a token is (or would be) kept: the macOS login
	// keychain, or a file only this user can read.
	Where string `json:"where"`
	// TokensURL is where a Hugging Face account makes its tokens.
	TokensURL string `json:"tokensURL"`
	// Error says why the stored token could not be read ("" when it
	// could): clearing it and pasting it again mends it.
	Error string `json:"error"`
	// Account is the Hugging Face account the Hub named for the token when
	// it was saved (SetHubToken's answer only; "" otherwise), and Note why
	// the Hub could not be asked then (offline, a mirror without the
	// endpoint): the token was stored unchecked.
	Account string `json:"account"`
	Note    string `json:"note"`
}

// HubToken says whether a Hugging Face token is stored, masked.
func (s *Settings) HubToken() (HubToken, error) {
	if _, err := s.c.db(); err != nil {
		return HubToken{}, err
	}
	st := s.c.secrets()
	out := HubToken{Where: st.Where(), TokensURL: hub.TokensURL}
	tok, err := st.Get()
	if err != nil {
		out.Error = err.Error()
		return out, nil
	}
	out.Set, out.Masked = tok != "", secrets.Mask(tok)
	return out, nil
}

// SetHubToken stores the access token the user pasted (surrounding space
// trimmed), replacing any, once the Hub has said whose it is (whoami): a
// token the Hub refuses is not stored ("the token was refused: …"); one the
// Hub could not be asked about is stored, saying so (Note). A text that
// cannot be a token is refused without being repeated. The catalog's sizes
// the Hub told without it are forgotten, so the next look asks again.
func (s *Settings) SetHubToken(token string) (HubToken, error) {
	if _, err := s.c.db(); err != nil {
		return HubToken{}, err
	}
	tok, err := secrets.CheckToken(token)
	if err != nil {
		return HubToken{}, err
	}
	account, note, err := s.c.checkToken(tok)
	if err != nil {
		return HubToken{}, err
	}
	if err := s.c.secrets().Set(tok); err != nil {
		return HubToken{}, err
	}
	s.c.tokenChanged()
	out, err := s.HubToken()
	out.Account, out.Note = account, note
	return out, err
}

// checkToken asks the Hub the app talks to whose token tok is: the
// account's name; the Hub's refusal as the error; why it could not be
// asked as note (the token is then stored unchecked).
func (c *core) checkToken(tok string) (account, note string, err error) {
	hc, err := hub.New(hub.BaseURL(c.opts.HubURL), nil)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(c.context(), hubWait)
	defer cancel()
	name, err := hc.WithToken(tok).WhoAmI(ctx)
	switch {
	case errors.Is(err, hub.ErrTokenRefused):
		return "", "", err
	case err != nil:
		return "", "stored without being checked: " + err.Error(), nil
	}
	return name, "", nil
}

// ClearHubToken removes the stored token: gated repositories are refused
// again, with the link to their licence.
func (s *Settings) ClearHubToken() (HubToken, error) {
	if _, err := s.c.db(); err != nil {
		return HubToken{}, err
	}
	if err := s.c.secrets().Clear(); err != nil {
		return HubToken{}, err
	}
	s.c.tokenChanged()
	return s.HubToken()
}
