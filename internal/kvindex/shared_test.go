package kvindex

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"anechat/engine"
	"anechat/engine/kv"
	"anechat/internal/atomicfile"
	"anechat/internal/crashtest"
	"anechat/storage"
)

const (
	sharedHomeEnv = "ANECHAT_TEST_SHARED_HOME"
	sharedIDEnv   = "ANECHAT_TEST_SHARED_ID"
	sharedSaves   = 4
)

// TestSharedDirHelper is one of the processes of TestSharedDataDir: it opens
// the index (start-up cleaning included), says "ready", then saves
// sharedSaves snapshots of its own (the last one as its conversation's),
// printing "saved <path>" or "failed <error>" for each.
func TestSharedDirHelper(t *testing.T) {
	home := os.Getenv(sharedHomeEnv)
	if home == "" {
		t.Skip("helper process of TestSharedDataDir; runs only as its subprocess")
	}
	id, _ := strconv.Atoi(os.Getenv(sharedIDEnv))
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	x, err := Open(ctx, home, log)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	conv, err := x.db.CreateConversation(ctx, storage.ConversationInput{Title: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	r := &engine.Resumer{Store: x, Meta: killMeta, Log: log}
	for i := range sharedSaves {
		c, ids := killCache(t, 200+64*i, uint64(1000*id+i))
		key := ""
		if i == sharedSaves-1 {
			key = ConversationKey(conv.ID)
		}
		path, err := r.Save(ctx, key, ids, c)
		if err != nil {
			fmt.Println("failed", err)
			continue
		}
		fmt.Println("saved", path)
	}
}

// TestSharedDataDir starts 30 processes on one data dir, each when the one
// before has opened its index, so that every start-up cleaning runs while
// earlier processes are writing and indexing snapshots. Every save must
// succeed, and every snapshot reported saved must be there afterwards, whole
// and indexed: the cleaning of one process never removes another's
// temporary file or fresh snapshot. Once all have exited, a cleaning that
// treats every file as old leaves one file per row.
func TestSharedDataDir(t *testing.T) {
	if os.Getenv(sharedHomeEnv) != "" {
		t.Skip("inside the helper")
	}
	const procs = 30
	home := t.TempDir()
	ctx := context.Background()
	type result struct {
		saved, failed []string
		stderr        bytes.Buffer
		err           error
	}
	results := make([]*result, procs)
	done := make(chan int, procs)
	for i := range procs {
		cmd := crashtest.Command(t, "TestSharedDirHelper", sharedHomeEnv+"="+home, sharedIDEnv+"="+strconv.Itoa(i))
		res := &result{}
		results[i] = res
		cmd.Stderr = &res.stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				switch f := strings.SplitN(sc.Text(), " ", 2); f[0] {
				case "ready":
					close(ready)
				case "saved":
					res.saved = append(res.saved, f[1])
				case "failed":
					res.failed = append(res.failed, f[1])
				}
			}
			io.Copy(io.Discard, out)
			res.err = cmd.Wait()
			select {
			case <-ready:
			default:
				close(ready)
			}
			done <- i
		}()
		select {
		case <-ready:
		case <-time.After(60 * time.Second):
			t.Fatalf("process %d did not open the index in 60 s", i)
		}
	}
	for range procs {
		<-done
	}
	x, err := Open(ctx, home, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	rows, err := x.db.ListSnapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	indexed := map[string]storage.Snapshot{}
	for _, r := range rows {
		indexed[filepath.Join(x.dir, r.FilePath)] = r
	}
	saved, lost := 0, 0
	for i, res := range results {
		if res.err != nil || strings.Contains(res.stderr.String(), "FAIL") {
			t.Errorf("process %d: %v: %s", i, res.err, res.stderr.String())
		}
		for _, f := range res.failed {
			t.Errorf("process %d: a save failed: %s", i, f)
		}
		if len(res.saved)+len(res.failed) != sharedSaves {
			t.Errorf("process %d reported %d saves, want %d", i, len(res.saved)+len(res.failed), sharedSaves)
		}
		for _, p := range res.saved {
			saved++
			row, ok := indexed[p]
			c, _ := kv.New(killGeometry(), 64)
			h, err := kv.Load(ctx, p, killMeta, c)
			if !ok || err != nil || len(h.Tokens) != row.TokenCount {
				lost++
				t.Errorf("process %d: snapshot %s reported saved: indexed %v, loads: %v", i, p, ok, err)
			}
		}
	}
	t.Logf("%d processes: %d snapshots reported saved, %d lost", procs, saved, lost)
	// With every writer gone, nothing is in flight: all that is not indexed
	// can go, and what is indexed stays.
	rep, err := x.db.ReconcileMinAge(ctx, x.dir, 0)
	if err != nil || len(rep.RowsDeleted)+len(rep.Skipped) != 0 {
		t.Errorf("final cleaning: %+v, %v", rep, err)
	}
	ents, _ := os.ReadDir(x.dir)
	if len(ents) != len(rows) || len(rows) != saved {
		t.Errorf("after the final cleaning: %d files, %d rows, %d snapshots saved", len(ents), len(rows), saved)
	}
}

const stallHomeEnv = "ANECHAT_TEST_STALL_HOME"

// TestStalledWriterHelper saves a large snapshot of one conversation for
// each line on stdin, each replacing the one before, and prints "saved" or
// "failed <error>" after each.
func TestStalledWriterHelper(t *testing.T) {
	home := os.Getenv(stallHomeEnv)
	if home == "" {
		t.Skip("helper process of TestStalledWriter; runs only as its subprocess")
	}
	ctx := context.Background()
	x, err := Open(ctx, home, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := x.db.CreateConversation(ctx, storage.ConversationInput{Title: "stall"})
	if err != nil {
		t.Fatal(err)
	}
	r := &engine.Resumer{Store: x, Meta: killMeta}
	c, ids := killCache(t, 1000, 9)
	sc := bufio.NewScanner(os.Stdin)
	for i := 0; sc.Scan(); i++ {
		ids[0] = int32(i) // a new snapshot each time
		if _, err := r.Save(ctx, ConversationKey(conv.ID), ids, c); err != nil {
			fmt.Println("failed", err)
			continue
		}
		fmt.Println("saved")
	}
}

// stalledWriter drives TestStalledWriterHelper.
type stalledWriter struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.Writer
	lines chan string
	kvDir string
}

// temp returns the path of a snapshot temporary file in kv/, or "".
func (w *stalledWriter) temp() string {
	ents, _ := os.ReadDir(w.kvDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			return filepath.Join(w.kvDir, e.Name())
		}
	}
	return ""
}

// stopInsideWrite has the writer save until it is caught stopped (SIGSTOP)
// with its temporary file on disk, and returns that file.
func (w *stalledWriter) stopInsideWrite() string {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		fmt.Fprintln(w.in, "go")
		for {
			select {
			case l, ok := <-w.lines:
				if !ok || l != "saved" {
					w.t.Fatalf("writer: %q (open %v)", l, ok)
				}
			default:
				if w.temp() == "" {
					time.Sleep(50 * time.Microsecond)
					continue
				}
				w.cmd.Process.Signal(syscall.SIGSTOP)
				if tmp := w.temp(); tmp != "" {
					return tmp
				}
				w.cmd.Process.Signal(syscall.SIGCONT)
				continue
			}
			break // that save ended before it was caught: another
		}
	}
	w.t.Fatal("never caught the writer inside a write in 60 s")
	return ""
}

// TestStalledWriter stops a writer process (SIGSTOP) while its temporary
// file exists and backdates the file by an hour: a start-up cleaning in
// another process must leave it, since its writer is still running, and the
// writer's save then completes. Once the writer is killed inside a write,
// its old temporary file is removed, with a Warn naming the dead process.
func TestStalledWriter(t *testing.T) {
	if os.Getenv(stallHomeEnv) != "" {
		t.Skip("inside the helper")
	}
	home := t.TempDir()
	ctx := context.Background()
	cmd := crashtest.Command(t, "TestStalledWriterHelper", stallHomeEnv+"="+home)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	w := &stalledWriter{t: t, cmd: cmd, in: in, lines: make(chan string, 16), kvDir: storage.KVPath(home)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	tmp := w.stopInsideWrite()
	if pid, ok := atomicfile.TempWriter(filepath.Base(tmp)); !ok || pid != cmd.Process.Pid {
		t.Errorf("temporary file %s does not name its writer %d", tmp, cmd.Process.Pid)
	}
	hourAgo := time.Now().Add(-time.Hour)
	os.Chtimes(tmp, hourAgo, hourAgo)
	var logBuf bytes.Buffer
	x, err := Open(ctx, home, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	x.Close()
	if _, err := os.Stat(tmp); err != nil {
		t.Errorf("another process's cleaning removed a running writer's temporary file: %v; log: %s", err, logBuf.String())
	}
	cmd.Process.Signal(syscall.SIGCONT)
	if l := <-w.lines; l != "saved" {
		t.Errorf("the stalled save: %q, want saved", l)
	}
	tmp = w.stopInsideWrite()
	cmd.Process.Kill()
	cmd.Wait()
	os.Chtimes(tmp, hourAgo, hourAgo)
	logBuf.Reset()
	x, err = Open(ctx, home, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("a dead writer's old temporary file is still there: %v", err)
	}
	want := fmt.Sprintf("process %d is not running", cmd.Process.Pid)
	if log := logBuf.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, filepath.Base(tmp)) || !strings.Contains(log, want) {
		t.Errorf("log %q: want a Warn naming %s and saying %q", log, filepath.Base(tmp), want)
	}
	if rows, _ := x.db.ListSnapshots(ctx); len(rows) != 1 || rows[0].ConversationID == 0 {
		t.Errorf("rows after the writer died: %+v", rows)
	}
}
