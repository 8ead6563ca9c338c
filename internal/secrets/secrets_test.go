package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"

// TestCheckToken: a pasted token is trimmed; an empty one, one too short
// or too long, or one with a space or a quote is refused, and the error
// never repeats what was pasted.
func TestCheckToken(t *testing.T) {
	if got, err := CheckToken("  " + token + "\n"); err != nil || got != token {
		t.Fatalf("CheckToken(pasted with spaces) = %q, %v", got, err)
	}
	for _, bad := range []string{"", "   ", "hf_abc", token + " " + token, token + `"`, "hf_" + strings.Repeat("a", 600), "hf_tok\x00en1234"} {
		_, err := CheckToken(bad)
		if err == nil {
			t.Errorf("CheckToken(%q) accepted it", bad)
			continue
		}
		if strings.TrimSpace(bad) != "" && strings.Contains(err.Error(), strings.TrimSpace(bad)) {
			t.Errorf("CheckToken(%q)'s error repeats it: %v", bad, err)
		}
	}
	if m := Mask(token); m != "hf_…4567" || strings.Contains(m, token[3:10]) {
		t.Errorf("Mask = %q", m)
	}
}

// TestFileStore: Set writes the token with mode 0600 (replacing the one
// there), Get reads it back, Clear removes it; a file others may read is
// refused without its content in the error.
func TestFileStore(t *testing.T) {
	f := File{Path: filepath.Join(t.TempDir(), "data", TokenFile)}
	if got, err := f.Get(); err != nil || got != "" {
		t.Fatalf("Get with nothing stored = %q, %v", got, err)
	}
	if err := f.Set("hf_first_token_000"); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(token); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(f.Path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file %v, %v: want mode 0600", st.Mode(), err)
	}
	if got, err := f.Get(); err != nil || got != token {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if !strings.Contains(f.Where(), f.Path) || !strings.Contains(f.Where(), "0600") {
		t.Errorf("Where = %q", f.Where())
	}
	os.Chmod(f.Path, 0o644)
	if _, err := f.Get(); err == nil || !strings.Contains(err.Error(), "other users") || strings.Contains(err.Error(), token) {
		t.Errorf("Get of a world-readable file: %v", err)
	}
	if err := f.Clear(); err != nil {
		t.Fatal(err)
	}
	if err := f.Clear(); err != nil {
		t.Errorf("Clear with nothing stored: %v", err)
	}
	if got, err := f.Get(); err != nil || got != "" {
		t.Errorf("Get after Clear = %q, %v", got, err)
	}
}

// TestKeychainKeepsTheTokenOffTheCommandLine runs the keychain store
// against a stand-in for security(1) that records every command line and
// what came on standard input: the token is stored, read back and cleared,
// and appears on no command line (where ps would show it), only as hex on
// interactive mode's standard input.
func TestKeychainKeepsTheTokenOffTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	argv, stdin := filepath.Join(dir, "argv"), filepath.Join(dir, "stdin")
	t.Setenv("FAKE_STORE", filepath.Join(dir, "store"))
	t.Setenv("FAKE_ARGV", argv)
	t.Setenv("FAKE_STDIN", stdin)
	fake, err := filepath.Abs("testdata/fake-security")
	if err != nil {
		t.Fatal(err)
	}
	k := Keychain{Service: KeychainService, Account: KeychainAccount, Command: fake}
	if got, err := k.Get(); err != nil || got != "" {
		t.Fatalf("Get with no item = %q, %v", got, err)
	}
	if err := k.Set(token); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Get(); err != nil || got != token {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := k.Clear(); err != nil {
		t.Fatal(err)
	}
	if err := k.Clear(); err != nil {
		t.Errorf("Clear with no item: %v", err)
	}
	if got, err := k.Get(); err != nil || got != "" {
		t.Errorf("Get after Clear = %q, %v", got, err)
	}
	lines, _ := os.ReadFile(argv)
	in, _ := os.ReadFile(stdin)
	if strings.Contains(string(lines), token) || !strings.Contains(string(lines), "-i") {
		t.Errorf("command lines:\n%s", lines)
	}
	if strings.Contains(string(in), token) || !strings.Contains(string(in), "add-generic-password -U -s anechat-huggingface-token -a huggingface.co -X 68665f") {
		t.Errorf("standard input:\n%s", in)
	}
	if !strings.Contains(k.Where(), "keychain") {
		t.Errorf("Where = %q", k.Where())
	}
	// A security that fails says so, without the token.
	k.Command = filepath.Join(dir, "missing-security")
	if err := k.Set(token); err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("Set with no security command: %v", err)
	}
}
