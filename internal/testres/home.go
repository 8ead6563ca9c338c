package testres

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// homeVars are the variables that decide where a program keeps its data:
// the data directory (storage.DataDir: ANECHAT_HOME, else XDG_DATA_HOME,
// else HOME) and the caches and settings of the libraries it runs.
var homeVars = []string{"HOME", "ANECHAT_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"}

// IsolateHome runs a package's tests (m.Run) with HOME pointed at a new,
// empty directory and the XDG and ANECHAT_HOME variables unset, so that
// anything resolving the default data directory lands there instead of in
// the user's ~/.local/share/anechat. Afterwards it fails the run, listing
// the paths, if anything was written there: tests keep to t.TempDir() and
// project-local directories. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testres.IsolateHome(m)) }
func IsolateHome(m *testing.M) int {
	home, err := os.MkdirTemp("", "anechat-test-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testres: temporary home:", err)
		return 1
	}
	defer os.RemoveAll(home)
	saved := map[string]*string{}
	for _, k := range homeVars {
		if v, ok := os.LookupEnv(k); ok {
			saved[k] = &v
		} else {
			saved[k] = nil
		}
		os.Unsetenv(k)
	}
	os.Setenv("HOME", home)
	code := m.Run()
	for k, v := range saved {
		if v == nil {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, *v)
		}
	}
	written, err := Written(home)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testres: read the temporary home:", err)
		return 1
	}
	if len(written) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests wrote into the home directory (%s), which stands for the user's: %v\n"+
			"Tests must use t.TempDir() or project-local directories (pass --data-dir, set DataDir).\n", home, written)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Written lists what lies under dir (relative paths, sorted); nil when it
// holds nothing.
func Written(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
