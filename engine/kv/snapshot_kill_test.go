package kv

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"anechat/internal/crashtest"
)

const killDirEnv = "ANECHAT_KV_KILL_DIR"

// killGeometry makes snapshots of about 1 MB: a write takes long enough to be
// killed in the middle of it.
func killGeometry() Geometry {
	return Geometry{Context: 512, Layers: []LayerSpec{
		{KVHeads: 2, HeadDim: 64, Source: 0},
		{KVHeads: 2, HeadDim: 64, Window: 128, Source: 1},
		{KVHeads: 2, HeadDim: 64, Source: 0},
		{KVHeads: 2, HeadDim: 64, Source: 3},
	}}
}

// TestKilledWriterHelper is the writer process of TestKilledWriter: it
// writes snapshots into $ANECHAT_KV_KILL_DIR, each replacing the one before,
// until it is killed.
func TestKilledWriterHelper(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("helper process of TestKilledWriter; runs only as its subprocess")
	}
	geo := killGeometry()
	prev := ""
	for i := 0; ; i++ {
		c, ids := filledCache(t, geo, 8, 200+i%300, uint64(i))
		path, err := Write(context.Background(), dir, testMeta, ids, c)
		if err != nil {
			t.Fatal(err)
		}
		if prev != "" && prev != path {
			os.Remove(prev)
		}
		prev = path
		crashtest.Progress()
	}
}

// TestKilledWriter SIGKILLs a snapshot writer at random points, 50 times,
// and checks that every file under a snapshot name is complete and loads:
// a crash leaves at most temporary files behind (DESIGN.md invariant 6).
func TestKilledWriter(t *testing.T) {
	if os.Getenv(killDirEnv) != "" {
		t.Skip("inside the helper")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	dir := t.TempDir()
	geo := killGeometry()
	complete, temps := 0, 0
	for run := 0; run < 50; run++ {
		cmd := crashtest.Command(t, "TestKilledWriterHelper", killDirEnv+"="+dir)
		// Kill after 0-2 completed saves plus up to a few ms: before the
		// first write, inside a write, between write and delete.
		crashtest.KillAnywhere(t, rng, cmd, 3, 4*time.Millisecond)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			path := filepath.Join(dir, e.Name())
			if strings.HasPrefix(e.Name(), ".tmp-") {
				temps++
				os.Remove(path) // what start-up cleaning does
				continue
			}
			c, err := New(geo, 4)
			if err != nil {
				t.Fatal(err)
			}
			h, err := Load(context.Background(), path, testMeta, c)
			if err != nil {
				t.Fatalf("run %d: a file under a snapshot name is not complete: %v", run, err)
			}
			if h.Name() != e.Name() {
				t.Fatalf("run %d: file %s holds snapshot %s", run, e.Name(), h.Name())
			}
			complete++
		}
	}
	t.Logf("50 kills: %d complete snapshots checked, %d temporary files left by a kill", complete, temps)
	if complete == 0 {
		t.Error("no kill happened after a complete write: the test checks nothing")
	}
}
