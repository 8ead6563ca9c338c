package backends

import (
	"strings"
	"testing"
)

func TestCoreMLStatus(t *testing.T) {
	if s := CoreMLStatus("linux", "amd64"); !strings.HasPrefix(s, "not built for this platform") {
		t.Errorf("linux: %q", s)
	}
	if s := CoreMLStatus("darwin", "amd64"); !strings.HasPrefix(s, "not built for this platform") {
		t.Errorf("intel mac: %q", s)
	}
	if s := CoreMLStatus("darwin", "arm64"); strings.Contains(s, "not built for this platform") {
		t.Errorf("apple silicon: %q", s)
	}
}
