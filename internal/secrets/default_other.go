//go:build !darwin

package secrets

import "path/filepath"

// Default is where the app keeps the token off macOS: DATA_DIR/hf-token,
// mode 0600.
func Default(dataDir string) Store {
	return File{Path: filepath.Join(dataDir, TokenFile)}
}
