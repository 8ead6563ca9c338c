package atomicfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"anechat/internal/crashtest"
)

const (
	killDirEnv  = "ANECHAT_ATOMICFILE_KILL_DIR"
	killFromEnv = "ANECHAT_ATOMICFILE_KILL_FROM"
	// killSpan separates the versions the helpers of two runs write.
	killSpan = 1_000_000
)

// content returns version v of a file of blocks 16-byte blocks, each
// holding v and blocks: a file cut short or holding parts of two versions
// is told from a whole one (checkContent).
func content(v uint64, blocks int) []byte {
	b := make([]byte, 16*blocks)
	for i := 0; i < blocks; i++ {
		binary.LittleEndian.PutUint64(b[16*i:], v)
		binary.LittleEndian.PutUint64(b[16*i+8:], uint64(blocks))
	}
	return b
}

// checkContent returns the version of b if it is one whole content.
func checkContent(b []byte) (uint64, error) {
	if len(b) == 0 || len(b)%16 != 0 {
		return 0, fmt.Errorf("%d bytes: not whole blocks", len(b))
	}
	v := binary.LittleEndian.Uint64(b)
	for i := 0; i < len(b); i += 16 {
		if binary.LittleEndian.Uint64(b[i:]) != v || binary.LittleEndian.Uint64(b[i+8:]) != uint64(len(b)/16) {
			return 0, fmt.Errorf("%d bytes: block %d is not of version %d of %d blocks", len(b), i/16, v, len(b)/16)
		}
	}
	return v, nil
}

// TestKilledWriterHelper is the writer process of TestKilledWriter: from
// version $ANECHAT_ATOMICFILE_KILL_FROM on, it replaces dir/file with each
// version in turn (64 KiB to 1 MiB, written in 4 KiB pieces so that a kill
// lands between two of them) and installs a tree dir/tree-<version>, until
// it is killed.
func TestKilledWriterHelper(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("helper process of TestKilledWriter; runs only as its subprocess")
	}
	from, err := strconv.ParseUint(os.Getenv(killFromEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for v := from; ; v++ {
		f, err := Create(filepath.Join(dir, "file"), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		b := content(v, 4096+int(v*7919%61440))
		for len(b) > 0 {
			n := min(len(b), 4096)
			if _, err := f.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
		d, err := CreateDir(filepath.Join(dir, "tree-"+strconv.FormatUint(v, 10)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(d.Name(), "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i, name := range []string{"a", "sub/b"} {
			if err := os.WriteFile(filepath.Join(d.Name(), name), content(v, 256+i*512), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		crashtest.Progress()
	}
}

// TestKilledWriter SIGKILLs a writer at random points, 30 times, and checks
// that the destination always holds one whole version, the one before the
// run or one the run wrote (never a part, never nothing once written), that
// every installed tree is whole, and that a kill leaves nothing but
// temporary files naming the dead writer (DESIGN.md invariant 6).
func TestKilledWriter(t *testing.T) {
	if os.Getenv(killDirEnv) != "" {
		t.Skip("inside the helper")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	dir := t.TempDir()
	path := filepath.Join(dir, "file")
	var prev uint64 // the version in place before the run; 0: none
	replaced, trees, temps := 0, 0, 0
	for run := 1; run <= 30; run++ {
		from := uint64(run) * killSpan
		cmd := crashtest.Command(t, "TestKilledWriterHelper", killDirEnv+"="+dir, killFromEnv+"="+strconv.FormatUint(from, 10))
		// Kill after 0-2 completed steps plus up to a few ms: before the
		// first write, inside a write or an install, between the two.
		crashtest.KillAnywhere(t, rng, cmd, 3, 4*time.Millisecond)

		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist) && prev == 0:
		case err != nil:
			t.Fatalf("run %d: %s held version %d before the run, now: %v", run, path, prev, err)
		default:
			v, err := checkContent(b)
			if err != nil {
				t.Fatalf("run %d: %s is not one whole version: %v", run, path, err)
			}
			if v != prev && (v < from || v >= from+killSpan) {
				t.Fatalf("run %d: %s holds version %d, neither the old %d nor one of this run's", run, path, v, prev)
			}
			if v != prev {
				replaced++
			}
			prev = v
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			switch num, isTree := strings.CutPrefix(e.Name(), "tree-"); {
			case e.Name() == "file":
			case isTree:
				v, _ := strconv.ParseUint(num, 10, 64)
				checkTree(t, p, v)
				trees++
				os.RemoveAll(p)
			default:
				if pid, ok := TempWriter(e.Name()); !ok || pid != cmd.Process.Pid {
					t.Fatalf("run %d: %s left in the directory, not a temporary name of the killed writer %d", run, e.Name(), cmd.Process.Pid)
				}
				temps++
				os.RemoveAll(p) // what a start-up cleaning does
			}
		}
	}
	t.Logf("30 kills: the file replaced %d times, %d trees checked, %d temporaries left by a kill", replaced, trees, temps)
	if replaced == 0 || trees == 0 {
		t.Error("no kill happened after a complete write: the test checks nothing")
	}
}

// checkTree fails the test unless the tree at dir is whole: a, sub/b of
// version v, and nothing else.
func checkTree(t *testing.T, dir string, v uint64) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		got, err := checkContent(b)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if got != v {
			return fmt.Errorf("%s holds version %d", rel, got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("tree %s is not whole: %v", dir, err)
	}
	if strings.Join(files, ",") != "a,sub/b" {
		t.Fatalf("tree %s holds %v, want a and sub/b", dir, files)
	}
}
