package catalog

import (
	"fmt"
	"runtime"

	"anechat/internal/human"
)

// Machine is what a model's fit depends on.
type Machine struct {
	GOOS, GOARCH string
	// RAM is the machine's memory in bytes, 0 when unknown.
	RAM int64
}

// ThisMachine describes the machine the program runs on.
func ThisMachine() Machine {
	return Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, RAM: totalRAM()}
}

// NeuralEngine reports whether the Core ML backend (the Neural Engine)
// applies: an Apple silicon Mac.
func (m Machine) NeuralEngine() bool { return m.GOOS == "darwin" && m.GOARCH == "arm64" }

// appOverhead is the memory the app itself takes besides a model (the Go
// runtime, the window's web view, the database): a round figure.
const appOverhead = 512 << 20

// Need is the memory a model of size bytes takes while it answers: its
// weights (mapped from the file, all of them touched on every token), a
// tenth more for the KV cache and activations at a few thousand tokens of
// context, and the app's own share. It is a rough bound for saying whether
// a model fits, not a measurement.
func Need(size int64) int64 {
	if size <= 0 {
		return 0
	}
	return size + size/10 + appOverhead
}

// Verdict says how a model fits a machine.
type Verdict string

// Verdicts.
const (
	Fits      Verdict = "fits"      // needs at most 3/4 of the memory: room for the rest of the system
	Tight     Verdict = "tight"     // fits, but leaves less than a quarter for everything else
	TooLarge  Verdict = "too-large" // needs more memory than the machine has
	Elsewhere Verdict = "elsewhere" // its backend does not run here (a Core ML bundle off a Mac)
	Unknown   Verdict = "unknown"   // its size or the machine's memory is not known
)

// Fit is an entry's fit to a machine.
type Fit struct {
	Verdict Verdict `json:"verdict"`
	// Size and Need are bytes (0 when unknown); RAM the machine's.
	Size int64 `json:"size"`
	Need int64 `json:"need"`
	RAM  int64 `json:"ram"`
	// NeuralEngine is true when the model runs on the Neural Engine here.
	NeuralEngine bool `json:"neuralEngine"`
	// Note says it in words.
	Note string `json:"note"`
}

// Assess says whether entry e, whose files take size bytes (the tree's
// sum; 0 for unknown, then e.ApproxBytes is used), fits machine m.
func Assess(e *Entry, size int64, m Machine) Fit {
	if size <= 0 {
		size = e.ApproxBytes
	}
	f := Fit{Size: size, Need: Need(size), RAM: m.RAM}
	if e.Backend == BackendCoreML && !m.NeuralEngine() {
		f.Verdict = Elsewhere
		f.Note = fmt.Sprintf("a Core ML bundle runs on the Neural Engine of an Apple silicon Mac; this is %s/%s", m.GOOS, m.GOARCH)
		return f
	}
	f.NeuralEngine = e.Backend == BackendCoreML
	switch {
	case size <= 0 || m.RAM <= 0:
		f.Verdict = Unknown
		f.Note = "its memory need is known once its size is (the repository's tree gives it)"
		if m.RAM <= 0 && size > 0 {
			f.Note = fmt.Sprintf("needs about %s; this machine's memory is not known", human.Bytes(f.Need))
		}
	case f.Need <= m.RAM/4*3:
		f.Verdict = Fits
		f.Note = fmt.Sprintf("needs about %s of %s", human.Bytes(f.Need), human.Bytes(m.RAM))
	case f.Need <= m.RAM:
		f.Verdict = Tight
		f.Note = fmt.Sprintf("needs about %s of %s: close other apps", human.Bytes(f.Need), human.Bytes(m.RAM))
	default:
		f.Verdict = TooLarge
		f.Note = fmt.Sprintf("needs about %s, more than this machine's %s", human.Bytes(f.Need), human.Bytes(m.RAM))
	}
	if f.NeuralEngine && f.Verdict != TooLarge {
		f.Note += "; runs on the Neural Engine"
	}
	return f
}

// Recommend returns the index of the entry recommended for m: the first,
// in the catalog's order (best first), that fits with room to spare;
// sizes gives each entry's size in bytes (0 for unknown: its ApproxBytes).
// It is -1 when none is known to fit.
func (c *Catalog) Recommend(m Machine, sizes []int64) int {
	for i := range c.Entries {
		var size int64
		if i < len(sizes) {
			size = sizes[i]
		}
		if Assess(&c.Entries[i], size, m).Verdict == Fits {
			return i
		}
	}
	return -1
}
