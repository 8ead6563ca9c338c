package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/cpu"

	"anechat/app"
	enginecpu "anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/storage"
)

// cpuWidth is one row of `anechat bench cpu`: calls of one width.
type cpuWidth struct {
	Width int `json:"width"`
	// Ms is the median wall time of one Forward of Width tokens; MinMs the
	// fastest.
	Ms    float64 `json:"ms"`
	MinMs float64 `json:"min_ms"`
	// TokS is Width / Ms: decode tokens per second at width 1, positions
	// verified per second at wider widths.
	TokS float64 `json:"tok_s"`
	// Ratio is Ms over width 1's Ms: what verifying Width-1 drafts costs.
	Ratio float64 `json:"ratio"`
	// WeightGBps is the model's bytes over Ms: the weight stream of one call.
	WeightGBps float64 `json:"weight_gbps"`
}

// cpuBench is the whole report.
type cpuBench struct {
	Model      string     `json:"model"`
	Bytes      int64      `json:"bytes"`
	Kernels    string     `json:"kernels"`
	CPU        string     `json:"cpu"`
	Features   []string   `json:"features"`
	Cores      int        `json:"cores"`
	Context    int        `json:"context"`
	Reps       int        `json:"reps"`
	ReadGBps   float64    `json:"read_gbps,omitempty"`
	Widths     []cpuWidth `json:"widths"`
	GoVersion  string     `json:"go"`
	GOOSGOARCH string     `json:"platform"`
}

// runBenchCPU is `anechat bench cpu`: the CPU backend's decode (width 1)
// and verify-width (2..8) call times on one model, with the kernel set and
// the CPU they ran on, so that figures from any machine (a Mac's NEON
// kernels, a Linux box's AVX-512) can be compared.
func runBenchCPU(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench cpu", "[--model PATH|random] [--widths 1,2,...,8] [--context N] [--reps N] [--read-mb N] [--data-dir DIR] [--json]")
	modelPath := fs.String("model", "", "model file (.gguf) or directory; \"random\" for a generated llama (34 MB of Q8_0); default: the data dir's "+app.BundledChatModel+" if present, else random")
	widthsFlag := fs.String("widths", "1,2,3,4,5,6,7,8", "comma-separated call widths (1 = decode; wider = verifying drafts)")
	contextLen := fs.Int("context", 64, "committed positions before the timed calls")
	reps := fs.Int("reps", 10, "timed calls of each width (the median is reported)")
	readMB := fs.Int("read-mb", 512, "MiB of memory read by every core between calls, for the machine's read bandwidth in the same run (0: skip)")
	dataDir := fs.String("data-dir", "", "data directory whose models/ holds the default model (default $ANECHAT_HOME or the OS default)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	widths, err := parseCPUWidths(*widthsFlag)
	switch {
	case err != nil:
		return badFlag(env, "bench cpu", err)
	case *contextLen < 0:
		return badFlag(env, "bench cpu", fmt.Errorf("--context %d: want 0 or more positions", *contextLen))
	case *reps < 1:
		return badFlag(env, "bench cpu", fmt.Errorf("--reps %d: want at least 1", *reps))
	case *readMB < 0:
		return badFlag(env, "bench cpu", fmt.Errorf("--read-mb %d: want 0 or more", *readMB))
	}
	path := *modelPath
	if path == "" {
		path = "random"
		dir, err := storage.DataDir(*dataDir, cliLogger(env))
		if err != nil {
			return err
		}
		if p := filepath.Join(storage.ModelsPath(dir), app.BundledChatModel); fileExists(p) {
			path = p
		}
	}
	b, name, closeModel, err := openBenchModel(path)
	if err != nil {
		return modelError(path, err)
	}
	defer closeModel()
	size := tensorBytes(b)
	if size == 0 {
		size = modelBytes(path)
	}
	cfg := b.Config()
	maxW := slices.Max(widths)
	if *contextLen+maxW > cfg.ContextLen {
		return badFlag(env, "bench cpu", fmt.Errorf("--context %d + width %d exceeds the model's context of %d", *contextLen, maxW, cfg.ContextLen))
	}
	cache, err := kv.New(cfg.KV, max(maxW, 64))
	if err != nil {
		return fmt.Errorf("bench cpu: %w", err)
	}
	ids := benchPrompt(cfg, *contextLen+maxW, 1)
	if err := prefillCommitted(ctx, b, cache, ids[:*contextLen], 64); err != nil {
		return fmt.Errorf("bench cpu: prefill: %w", err)
	}
	var buf []uint64
	if *readMB > 0 {
		buf = make([]uint64, *readMB<<20/8)
		for i := range buf {
			buf[i] = uint64(i)
		}
	}
	// Every round makes one call of each width (and one read of buf), in an
	// order that rotates, so that a burst of load on a shared machine hits
	// every width alike; each call is rolled back.
	times := make([][]float64, len(widths)+1)
	call := func(w int) error {
		_, err := b.Forward(ctx, ids[*contextLen:*contextLen+w], *contextLen, cache, model.Argmax)
		cache.Rollback()
		return err
	}
	if err := call(1); err != nil { // warm-up: page in the weights
		return fmt.Errorf("bench cpu: %w", err)
	}
	for round := range *reps {
		for j := range len(widths) + 1 {
			k := (round + j) % (len(widths) + 1)
			if k == len(widths) && buf == nil {
				continue
			}
			t0 := time.Now()
			if k == len(widths) {
				readEverywhere(buf)
			} else if err := call(widths[k]); err != nil {
				return fmt.Errorf("bench cpu: width %d: %w", widths[k], err)
			}
			times[k] = append(times[k], float64(time.Since(t0).Nanoseconds())/1e6)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	rep := cpuBench{Model: name, Bytes: size, Kernels: enginecpu.Kernels(), CPU: cpuName(), Features: cpuFeatures(),
		Cores: runtime.NumCPU(), Context: *contextLen, Reps: *reps, GoVersion: runtime.Version(), GOOSGOARCH: runtime.GOOS + "/" + runtime.GOARCH}
	if buf != nil {
		rep.ReadGBps = float64(8*len(buf)) / medianOf(times[len(widths)]) / 1e6
	}
	base := medianOf(times[slices.Index(widths, 1)])
	for k, w := range widths {
		ms := medianOf(times[k])
		rep.Widths = append(rep.Widths, cpuWidth{Width: w, Ms: ms, MinMs: slices.Min(times[k]), TokS: float64(w) * 1000 / ms,
			Ratio: ms / base, WeightGBps: float64(size) / ms / 1e6})
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printCPUBench(env, rep)
	return nil
}

// prefillCommitted runs ids on c in calls of at most batch tokens and
// commits them: the context every timed call sees.
func prefillCommitted(ctx context.Context, b model.Backend, c *kv.Cache, ids []int32, batch int) error {
	for p := 0; p < len(ids); {
		n := min(batch, len(ids)-p)
		if _, err := b.Forward(ctx, ids[p:p+n], p, c, model.Argmax); err != nil {
			return err
		}
		if err := c.Commit(n); err != nil {
			return err
		}
		p += n
	}
	return nil
}

func printCPUBench(env *Env, r cpuBench) {
	w := env.Stdout
	fmt.Fprintf(w, "model    %s; %.1f MB of weights\n", r.Model, float64(r.Bytes)/1e6)
	fmt.Fprintf(w, "cpu      %s, %s, %d cores; features: %s\n", r.CPU, r.GOOSGOARCH, r.Cores, strings.Join(r.Features, " "))
	fmt.Fprintf(w, "kernels  %s (%s)\n", r.Kernels, r.GoVersion)
	fmt.Fprintf(w, "calls    %d committed positions before each; median of %d calls per width, widths interleaved\n", r.Context, r.Reps)
	if r.ReadGBps > 0 {
		fmt.Fprintf(w, "memory   %.1f GB/s read by all cores (same run)\n", r.ReadGBps)
	}
	fmt.Fprintf(w, "\n%6s %10s %10s %12s %8s %12s\n", "width", "ms/call", "min ms", "tok/s", "x w1", "weight GB/s")
	for _, x := range r.Widths {
		fmt.Fprintf(w, "%6d %10.2f %10.2f %12.1f %8.2f %12.1f\n", x.Width, x.Ms, x.MinMs, x.TokS, x.Ratio, x.WeightGBps)
	}
	fmt.Fprintln(w, "\nwidth 1 is decoding (tok/s); a wider call verifies that many positions (tok/s = positions/s); x w1 is its cost over a decode step")
}

// parseCPUWidths reads --widths: 1..8 each, width 1 always included.
func parseCPUWidths(s string) ([]int, error) {
	ws := []int{1}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		w, err := strconv.Atoi(f)
		if err != nil || w < 1 || w > 8 {
			return nil, fmt.Errorf("--widths: %q is not a call width 1..8", f)
		}
		if !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	return ws, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// modelBytes is the size of a model file, or of the .safetensors files of
// a model directory: the weights a decode step streams, near enough (an
// untied embedding table is read one row per token).
func modelBytes(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if !st.IsDir() {
		return st.Size()
	}
	var n int64
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".safetensors") {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// tensorBytes is the bytes of a GGUF model's tensors (0 for other
// backends).
func tensorBytes(b model.Backend) int64 {
	f, ok := b.(interface{ File() *gguf.File })
	if !ok || f.File() == nil {
		return 0
	}
	var n int64
	for _, t := range f.File().Tensors() {
		n += t.Size
	}
	return n
}

// medianOf returns the median of xs (sorting a copy).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// readEverywhere sums buf on every core, a share each: the machine's read
// bandwidth, measured between the calls.
func readEverywhere(buf []uint64) uint64 {
	n := runtime.NumCPU()
	sums := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s0, s1, s2, s3 uint64
			part := buf[i*len(buf)/n : (i+1)*len(buf)/n]
			j := 0
			for ; j+4 <= len(part); j += 4 {
				s0 += part[j]
				s1 += part[j+1]
				s2 += part[j+2]
				s3 += part[j+3]
			}
			for ; j < len(part); j++ {
				s0 += part[j]
			}
			sums[i] = s0 + s1 + s2 + s3
		}()
	}
	wg.Wait()
	var s uint64
	for _, v := range sums {
		s += v
	}
	return s
}

// cpuName is the CPU's model name where the OS says it (Linux
// /proc/cpuinfo, macOS sysctl), else the architecture.
func cpuName() string {
	if name := cpuModelName(); name != "" {
		return name
	}
	return runtime.GOARCH
}

// cpuFeatures lists the CPU features the kernels choose by.
func cpuFeatures() []string {
	var fs []string
	add := func(ok bool, name string) {
		if ok {
			fs = append(fs, name)
		}
	}
	switch runtime.GOARCH {
	case "arm64":
		add(cpu.ARM64.HasASIMD, "asimd")
		add(cpu.ARM64.HasASIMDDP, "dotprod")
		add(cpu.ARM64.HasI8MM, "i8mm")
		add(cpu.ARM64.HasASIMDHP, "fp16")
	case "amd64":
		add(cpu.X86.HasAVX2, "avx2")
		add(cpu.X86.HasFMA, "fma")
		add(cpu.X86.HasAVX512F, "avx512f")
		add(cpu.X86.HasAVX512VNNI, "avx512vnni")
	}
	if len(fs) == 0 {
		fs = []string{"none"}
	}
	return fs
}
