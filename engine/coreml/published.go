package coreml

import (
	"os"
	"path/filepath"
)

// IsPublished reports whether dir looks like a bundle of the CoreML-LLM
// project (model_config.json beside chunk models) rather than one of the
// anechat converter.
func IsPublished(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "model_config.json"))
	return err == nil
}
