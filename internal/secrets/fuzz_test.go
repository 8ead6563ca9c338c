package secrets

import (
	"strings"
	"testing"
)

// FuzzCheckToken: no paste makes CheckToken panic; what it accepts is the
// paste trimmed, of a token's characters only; what it refuses, its error
// does not repeat.
func FuzzCheckToken(f *testing.F) {
	for _, s := range []string{token, " " + token + "\n", "", "hf_a b", "hf_\x00\xff", strings.Repeat("a", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := CheckToken(s)
		if err != nil {
			if trimmed := strings.TrimSpace(s); len(trimmed) >= 8 && strings.Contains(err.Error(), trimmed) {
				t.Fatalf("the error repeats the paste: %v", err)
			}
			return
		}
		if got != strings.TrimSpace(s) || strings.Trim(got, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.=") != "" {
			t.Fatalf("CheckToken(%q) = %q", s, got)
		}
		if m := Mask(got); len(got) >= 12 && strings.Contains(m, got[:len(got)-4]) && len(got) > 8 {
			t.Fatalf("Mask(%q) = %q shows more than the last four", got, m)
		}
	})
}
