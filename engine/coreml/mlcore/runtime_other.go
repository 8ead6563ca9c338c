//go:build !(darwin && arm64)

package mlcore

import "runtime"

// New returns Core ML on this machine. Here there is none: it returns an
// *UnsupportedError (matching errors.ErrUnsupported) naming the platform.
func New() (Runtime, error) {
	return nil, &UnsupportedError{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
}
