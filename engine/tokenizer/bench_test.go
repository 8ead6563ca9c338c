package tokenizer

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"anechat/engine/model/gguf"
	"anechat/internal/cputime"
	"anechat/internal/testres"
)

// englishText is about 1 MB of real English prose: the comments of the Go
// standard library's net/http package (always present with the toolchain).
func englishText(b *testing.B) string {
	b.Helper()
	files, _ := filepath.Glob(filepath.Join(runtime.GOROOT(), "src", "net", "http", "*.go"))
	var sb strings.Builder
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if c, ok := strings.CutPrefix(line, "// "); ok {
				sb.WriteString(c)
				sb.WriteByte('\n')
			}
		}
		f.Close()
		if sb.Len() > 1<<20 {
			break
		}
	}
	if sb.Len() < 100<<10 {
		b.Skipf("only %d bytes of English text found under GOROOT", sb.Len())
	}
	return sb.String()
}

// BenchmarkLoadGemma loads the 33 MB Gemma 3 tokenizer.json.
func BenchmarkLoadGemma(b *testing.B) {
	path := testres.Gemma3Tokenizer(b)
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
	// On a shared machine wall time depends on the neighbours; CPU time
	// (user+system, this process, GC included) is the figure to compare.
	b.ReportMetric(float64(cputime.Process()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkResidentAfterLoad reports the heap and the process's resident
// memory with one Gemma tokenizer loaded (after a GC).
func BenchmarkResidentAfterLoad(b *testing.B) {
	path := testres.Gemma3Tokenizer(b)
	var tok *Tokenizer
	for b.Loop() {
		var err error
		if tok, err = Load(path); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MB-heap")
	if rss := residentMB(); rss > 0 {
		b.ReportMetric(rss, "MB-rss")
	}
	runtime.KeepAlive(tok)
}

// residentMB reads VmRSS from /proc (Linux); 0 elsewhere.
func residentMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkEncodeEnglish encodes ~1 MB of English with Gemma (throughput in MB/s).
// The word cache is warm after the first iteration, as in a running app.
func BenchmarkEncodeEnglish(b *testing.B) {
	tok := gemma(b)
	text := englishText(b)
	b.SetBytes(int64(len(text)))
	_ = tok.Encode(text)
	cpu0 := cputime.Process()
	for b.Loop() {
		_ = tok.Encode(text)
	}
	b.ReportMetric(float64(len(text))*float64(b.N)/(float64(cputime.Process()-cpu0)/1e9)/1e6, "MB/cpu-s")
}

// BenchmarkEncodeEnglishCold is the same with an empty word cache each time.
func BenchmarkEncodeEnglishCold(b *testing.B) {
	tok := gemma(b)
	text := englishText(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	cpu0 := cputime.Process()
	for b.Loop() {
		tok.bpe.cacheMu.Lock()
		clear(tok.bpe.cache)
		tok.bpe.cacheMu.Unlock()
		_ = tok.Encode(text)
	}
	b.ReportMetric(float64(len(text))*float64(b.N)/(float64(cputime.Process()-cpu0)/1e9)/1e6, "MB/cpu-s")
}

// BenchmarkDecodeStream streams the ids of the English text back, with
// Gemma's SentencePiece-style vocabulary and SmolLM2's byte-level one (the
// two decoder pipelines Stream.Next has).
func BenchmarkDecodeStream(b *testing.B) {
	b.Run("gemma", func(b *testing.B) { benchStream(b, gemma(b)) })
	b.Run("smollm2", func(b *testing.B) {
		f, err := gguf.Open(testres.SmolLM2GGUF(b))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		tok, err := FromGGUF(f)
		if err != nil {
			b.Fatal(err)
		}
		benchStream(b, tok)
	})
}

func benchStream(b *testing.B, tok *Tokenizer) {
	text := englishText(b)
	ids := tok.Encode(text)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s := tok.NewStream()
		for _, id := range ids {
			_ = s.Next(id)
		}
		_ = s.Flush()
	}
	b.ReportMetric(float64(testing.AllocsPerRun(1, func() {
		s := tok.NewStream()
		for _, id := range ids {
			_ = s.Next(id)
		}
	}))/float64(len(ids)), "allocs/token")
}
