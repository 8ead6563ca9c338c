package jinja

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// bomb is one entry of testdata/bombs.txt.
type bomb struct {
	kind, what, src string
}

func loadBombs(t testing.TB) []bomb {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "bombs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []bomb
	for _, entry := range strings.Split("\n"+string(b), "\n=== ")[1:] {
		head, src, _ := strings.Cut(entry, "\n")
		kind, what, ok := strings.Cut(head, ": ")
		if !ok || (kind != "limit" && kind != "error") || strings.TrimSpace(src) == "" {
			t.Fatalf("bombs.txt: bad entry %q", head)
		}
		out = append(out, bomb{kind, what, strings.TrimSuffix(src, "\n")})
	}
	if len(out) < 50 {
		t.Fatalf("bombs.txt: %d entries", len(out))
	}
	return out
}

// maxBombAlloc bounds what one bomb may allocate in all (not only keep):
// Limits.Memory plus what the interpreter's own frames and scratch take.
const maxBombAlloc = 256 << 20

// bombResult is how one bomb ended.
type bombResult struct {
	err        error
	took       time.Duration
	alloc      uint64 // bytes allocated in all (TotalAlloc)
	steps, mem int    // the render's accounts
}

// renderBomb parses and renders b with lim (the clock set out of reach, so
// that a bomb whose work goes uncharged is not saved by it).
func renderBomb(t testing.TB, b bomb, lim Limits) bombResult {
	msgs := List(
		Dict(Str("role"), Str("system"), Str("content"), Untrusted("You are helpful.")),
		Dict(Str("role"), Str("user"), Str("content"), Untrusted("Hello there")),
	)
	vars := map[string]Value{"messages": msgs, "add_generation_prompt": Bool(true), "bos_token": Str("<s>")}
	lim.Time = time.Hour
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	var r bombResult
	tm, err := Parse(b.src)
	if err == nil {
		var ev *evaluator
		ev, _, err = tm.render(t.Context(), vars, Options{Limits: lim})
		r.steps, r.mem = ev.steps, ev.mem
	}
	r.err, r.took = err, time.Since(start)
	runtime.ReadMemStats(&after)
	r.alloc = after.TotalAlloc - before.TotalAlloc
	return r
}

// checkBombs renders every bomb and checks how each ended: a template
// error (a charged limit for 'limit' entries), under maxBombAlloc.
func checkBombs(t testing.TB, lim Limits) {
	var total time.Duration
	for i, b := range loadBombs(t) {
		r := renderBomb(t, b, lim)
		total += r.took
		var je *Error
		switch {
		case r.err == nil:
			t.Errorf("bomb %d (%s) rendered without an error", i, b.what)
			continue
		case !errors.As(r.err, &je):
			t.Errorf("bomb %d (%s): %T %v, want a template error", i, b.what, r.err, r.err)
		case b.kind == "limit" && !errors.Is(r.err, ErrLimit):
			t.Errorf("bomb %d (%s): %v, want a limit", i, b.what, r.err)
		}
		if r.alloc > maxBombAlloc {
			t.Errorf("bomb %d (%s) allocated %d MB (more than %d MB): %v", i, b.what, r.alloc>>20, maxBombAlloc>>20, r.err)
		}
		t.Logf("bomb %2d: %6.3f s, %4d MB allocated (%4d MB charged), %8d steps: %.80s", i, r.took.Seconds(), r.alloc>>20, r.mem>>20, r.steps, r.err)
	}
	t.Logf("all bombs: %.2f s", total.Seconds())
}

// Every template bomb ends in a template error: parsing or rendering, the
// render is stopped by the work it was charged (steps, value sizes,
// memory, nesting), not by the wall clock, and what it allocated in all
// stays under 256 MB. The memory, size and nesting limits are the
// defaults; the step limit is 1,000,000 instead of 5,000,000 to keep the
// test at a second or two (BenchmarkBombs runs every default).
func TestBombs(t *testing.T) {
	checkBombs(t, Limits{Steps: 1_000_000})
}

// BenchmarkBombs is TestBombs with every limit at its default, for the
// figures in RELIABILITY.md:
//
//	go test ./engine/chat/jinja -run '^$' -bench Bombs -benchtime 1x -v
func BenchmarkBombs(b *testing.B) {
	for b.Loop() {
		checkBombs(b, Limits{})
	}
}
