package secrets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"anechat/internal/atomicfile"
)

// File keeps the secret in a file only its owner may read or write (mode
// 0600), written atomically.
type File struct {
	// Path is the file, e.g. DATA_DIR/hf-token.
	Path string
}

// Get reads the secret. A file that others may read is refused (the
// secret may have leaked: the user replaces it), as ssh does a key's.
func (f File) Get() (string, error) {
	st, err := os.Stat(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the Hugging Face token file: %w", err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("the Hugging Face token file %s is a folder: remove it", f.Path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return "", fmt.Errorf("the Hugging Face token file %s may be read by other users (mode %04o): clear the token in Settings and paste it again (or chmod 600 it)", f.Path, perm)
	}
	if st.Size() > maxToken+64 {
		return "", fmt.Errorf("the Hugging Face token file %s holds %d bytes, not a token: clear it in Settings", f.Path, st.Size())
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return "", fmt.Errorf("the Hugging Face token file: %w", err)
	}
	tok, err := CheckToken(string(b))
	if err != nil {
		return "", fmt.Errorf("the Hugging Face token file %s: %w", f.Path, err)
	}
	return tok, nil
}

// Set writes the secret with mode 0600.
func (f File) Set(secret string) error {
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return fmt.Errorf("the Hugging Face token file: %w", err)
	}
	w, err := atomicfile.Create(f.Path, 0o600)
	if err != nil {
		return fmt.Errorf("the Hugging Face token file: %w", err)
	}
	defer w.Abort()
	if _, err := w.Write([]byte(secret + "\n")); err != nil {
		return fmt.Errorf("the Hugging Face token file: %w", err)
	}
	if err := w.Commit(); err != nil {
		var placed *atomicfile.SyncDirError
		if !errors.As(err, &placed) {
			return fmt.Errorf("the Hugging Face token file: %w", err)
		}
	}
	return nil
}

// Clear removes the file.
func (f File) Clear() error {
	if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the Hugging Face token file: %w", err)
	}
	return nil
}

// Where names the file.
func (f File) Where() string {
	return fmt.Sprintf("the file %s, which only your user account can read (mode 0600)", f.Path)
}
