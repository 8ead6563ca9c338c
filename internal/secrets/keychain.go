package secrets

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Keychain keeps the secret as a generic password item of the macOS login
// keychain, through the `security` command (security(1)):
//
//   - Get: `security find-generic-password -s SERVICE -a ACCOUNT -w`, which
//     prints the password alone; exit status 44 (errSecItemNotFound,
//     -25300, as a byte) is no item;
//   - Set: `security -i`, which reads commands from its standard input
//     until EOF, given the line `add-generic-password -U -s SERVICE -a
//     ACCOUNT -X HEX`: -X is the password as hexadecimal (no quoting can
//     go wrong), -U replaces an item that is there. The secret is on no
//     command line: `ps` shows `security -i`. Get then reads it back,
//     because interactive mode's exit status is only its last command's;
//   - Clear: `security delete-generic-password -s SERVICE -a ACCOUNT`.
//
// The code runs anywhere `security` does; Default picks it on macOS, and
// tests run it against a stand-in command.
type Keychain struct {
	// Service and Account name the item (letters, digits, '.', '-':
	// nothing interactive mode would split or unquote).
	Service, Account string
	// Command is the security program, "" for /usr/bin/security.
	Command string
}

// keychainWait bounds one `security` run (a locked keychain asks the user,
// which may take a while; a hung one must not hold the app).
const keychainWait = 2 * time.Minute

// errItemNotFound is security's exit status for a missing item.
const errItemNotFound = 44

func (k Keychain) command() string {
	if k.Command != "" {
		return k.Command
	}
	return "/usr/bin/security"
}

func (k Keychain) check() error {
	for _, s := range []string{k.Service, k.Account} {
		if s == "" || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != "" {
			return fmt.Errorf("keychain item name %q: want letters, digits, '.' and '-'", s)
		}
	}
	return nil
}

// run runs security with args and stdin, returning its standard output; a
// non-zero exit is *exec.ExitError with stderr (redacted) in the error.
func (k Keychain) run(stdin string, redacted []string, args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), keychainWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.command(), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		msg := redact(strings.TrimSpace(errb.String()), redacted...)
		if msg == "" {
			msg = ee.Error()
		}
		return out.String(), ee.ExitCode(), fmt.Errorf("the keychain (security %s): %s", args[0], msg)
	}
	if err != nil {
		return "", -1, fmt.Errorf("the keychain: %w", err)
	}
	return out.String(), 0, nil
}

// Get reads the item's password.
func (k Keychain) Get() (string, error) {
	if err := k.check(); err != nil {
		return "", err
	}
	out, code, err := k.run("", nil, "find-generic-password", "-s", k.Service, "-a", k.Account, "-w")
	if code == errItemNotFound {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	tok, err := CheckToken(strings.TrimRight(out, "\r\n"))
	if err != nil {
		return "", fmt.Errorf("the keychain item %q: %w", k.Service, err)
	}
	return tok, nil
}

// Set stores secret in the item, on security's standard input, and reads
// it back.
func (k Keychain) Set(secret string) error {
	if err := k.check(); err != nil {
		return err
	}
	if _, err := CheckToken(secret); err != nil {
		return err
	}
	h := hex.EncodeToString([]byte(secret))
	line := fmt.Sprintf("add-generic-password -U -s %s -a %s -X %s\n", k.Service, k.Account, h)
	if _, _, err := k.run(line, []string{secret, h}, "-i"); err != nil {
		return err
	}
	got, err := k.Get()
	if err != nil {
		return err
	}
	if got != secret {
		return fmt.Errorf("the keychain did not store the token (item %q reads back otherwise): is the login keychain locked?", k.Service)
	}
	return nil
}

// Clear deletes the item.
func (k Keychain) Clear() error {
	if err := k.check(); err != nil {
		return err
	}
	_, code, err := k.run("", nil, "delete-generic-password", "-s", k.Service, "-a", k.Account)
	if code == errItemNotFound {
		return nil
	}
	return err
}

// Where names the item.
func (k Keychain) Where() string {
	return fmt.Sprintf("the macOS login keychain (item %q, Keychain Access shows it)", k.Service)
}
