package cli

import (
	"os"
	"testing"

	"anechat/internal/testres"
)

// TestMain runs the tests with HOME pointed at an empty directory and fails
// if any of them wrote there (the user's data directory must stay untouched).
func TestMain(m *testing.M) { os.Exit(testres.IsolateHome(m)) }
