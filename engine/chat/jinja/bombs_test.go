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

// Every template bomb ends in a template error: parsing or rendering with
// the default limits, the render is stopped by the work it was charged
// (steps, value sizes, memory, nesting), not by the wall clock, and what it
// allocated in all stays under 256 MB. The wall-clock limit is set out of
// reach here, so that a bomb whose work goes uncharged fails the test
// instead of being saved by the clock; each bomb's time is logged.
func TestBombs(t *testing.T) {
	msgs := List(
		Dict(Str("role"), Str("system"), Str("content"), Untrusted("You are helpful.")),
		Dict(Str("role"), Str("user"), Str("content"), Untrusted("Hello there")),
	)
	vars := map[string]Value{"messages": msgs, "add_generation_prompt": Bool(true), "bos_token": Str("<s>")}
	var total time.Duration
	for i, b := range loadBombs(t) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		var ev *evaluator
		tm, err := Parse(b.src)
		if err == nil {
			ev, _, err = tm.render(t.Context(), vars, Options{Limits: Limits{Time: time.Hour}})
		}
		took := time.Since(start)
		total += took
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		var je *Error
		switch {
		case err == nil:
			t.Errorf("bomb %d (%s) rendered without an error", i, b.what)
			continue
		case !errors.As(err, &je):
			t.Errorf("bomb %d (%s): %T %v, want a template error", i, b.what, err, err)
		case b.kind == "limit" && !errors.Is(err, ErrLimit):
			t.Errorf("bomb %d (%s): %v, want a limit", i, b.what, err)
		}
		if alloc > maxBombAlloc {
			t.Errorf("bomb %d (%s) allocated %d MB (more than %d MB): %v", i, b.what, alloc>>20, maxBombAlloc>>20, err)
		}
		steps, mem := 0, 0
		if ev != nil {
			steps, mem = ev.steps, ev.mem
		}
		t.Logf("bomb %2d: %6.3f s, %4d MB allocated (%4d MB charged), %8d steps (%4.0f ns/step): %.80s", i, took.Seconds(), alloc>>20, mem>>20, steps, float64(took.Nanoseconds())/float64(max(steps, 1)), err)
	}
	t.Logf("all bombs: %.2f s", total.Seconds())
}
