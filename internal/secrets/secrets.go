// Package secrets keeps the one secret anechat holds for the user: the
// Hugging Face access token they paste (Settings, or anechat's data dir),
// which the Hub client sends to the Hub for gated repositories. On macOS it
// lives in the login keychain (the `security` command, the secret passed
// on its standard input, never on its command line, where `ps` shows it);
// elsewhere in a file only its owner can read (mode 0600) in the data dir.
//
// A Store's errors never hold the secret: they come from files and
// commands that are told it only on standard input, and any output that
// repeats it is redacted.
package secrets

import (
	"errors"
	"fmt"
	"strings"
)

// Store keeps one secret.
type Store interface {
	// Get returns the secret, "" when none is stored.
	Get() (string, error)
	// Set stores secret (replacing any), which CheckToken accepted.
	Set(secret string) error
	// Clear removes the secret; no secret stored is not an error.
	Clear() error
	// Where says where the secret is kept, in words for the Settings page
	// ("the macOS login keychain (item anechat-huggingface-token)").
	Where() string
}

// TokenFile is the file name of the token in the data dir (File's store).
const TokenFile = "hf-token"

// Keychain service and account names of the token (Keychain's store).
const (
	KeychainService = "anechat-huggingface-token"
	KeychainAccount = "huggingface.co"
)

// maxToken bounds a token: Hugging Face's are "hf_" and 34 letters; the
// bound leaves room for other kinds without taking a pasted document.
const maxToken = 512

// CheckToken accepts what a Hugging Face access token can be: 8 to 512
// letters, digits, '_', '-', '.' or '=' (surrounding space trimmed: a
// paste often carries a newline). The error never repeats the text.
func CheckToken(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", errors.New("the token is empty: paste a Hugging Face access token (huggingface.co/settings/tokens; it starts with hf_)")
	case len(s) < 8 || len(s) > maxToken:
		return "", fmt.Errorf("the token pasted has %d characters: a Hugging Face access token has about 37 (hf_ and letters)", len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == '=') {
			return "", errors.New("the token pasted has a space or a character a Hugging Face access token never has (it is hf_ and letters): paste only the token")
		}
	}
	return s, nil
}

// Mask shows a token as its kind and last four characters ("hf_…wxyz"),
// enough to tell which token is stored without showing it.
func Mask(s string) string {
	if s == "" {
		return ""
	}
	prefix := ""
	if strings.HasPrefix(s, "hf_") {
		prefix = "hf_"
	}
	if len(s) < 12 {
		return prefix + "…"
	}
	return prefix + "…" + s[len(s)-4:]
}

// redact removes every secret in secrets from s.
func redact(s string, secrets ...string) string {
	for _, x := range secrets {
		if x != "" {
			s = strings.ReplaceAll(s, x, "[the token]")
		}
	}
	return s
}
