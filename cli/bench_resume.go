package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"anechat/engine"
	"anechat/engine/arch"
	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/internal/backends"
	"anechat/internal/kvindex"
)

// resumeFigures is one row of `anechat bench resume`.
type resumeFigures struct {
	PromptTokens int `json:"prompt_tokens"`
	// FreshTTFTms: prefill of the whole prompt in batched calls, then the
	// first token.
	FreshTTFTms float64 `json:"fresh_ttft_ms"`
	// ResumedTTFTms: index lookup (SQLite), load of the stored prompt,
	// prefill of its last token, first token (a prompt resumed whole, e.g. a
	// saved prompt).
	ResumedTTFTms float64 `json:"resumed_ttft_ms"`
	// Resumed64TTFTms: the same with the last 64 tokens new (a new message
	// after a stored conversation).
	Resumed64TTFTms float64 `json:"resumed64_ttft_ms"`
	Speedup         float64 `json:"speedup"`
	// LoadMs is the snapshot load alone (header checks, reading the rows
	// into the cache, checksums); LoadGBps its bandwidth, ReadGBps that of a
	// plain sequential read of the same file in the same run.
	LoadMs        float64 `json:"load_ms"`
	LoadGBps      float64 `json:"load_gbps"`
	ReadGBps      float64 `json:"read_gbps"`
	WriteMs       float64 `json:"write_ms"`
	SnapshotBytes int64   `json:"snapshot_bytes"`
	// Exact: the resumed first-token logits equal the fresh ones bit for bit.
	Exact bool `json:"exact"`
}

// runBenchResume is `anechat bench resume`: time to first token of a fresh
// prefill against a resume from a KV snapshot.
func runBenchResume(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench resume", "--model PATH|random [--prompt-tokens 256,1024,2048] [--batch N] [--repeat N] [--json]")
	modelPath := fs.String("model", "", "model file (.gguf), or \"random\" for a generated memory-bound llama (~34 MB of Q8_0 weights)")
	tokens := fs.String("prompt-tokens", "256,1024,2048", "comma-separated prompt lengths")
	batch := fs.Int("batch", 64, "prefill call width")
	repeat := fs.Int("repeat", 3, "runs of each resumed measurement (the median is reported)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *modelPath == "" {
		fs.Usage()
		return errUsage
	}
	switch {
	case *batch < 1 || *batch > 512:
		return badFlag(env, "bench resume", fmt.Errorf("--batch %d: want a prefill call width of 1..512", *batch))
	case *repeat < 1:
		return badFlag(env, "bench resume", fmt.Errorf("--repeat %d: want at least 1", *repeat))
	}
	var lens []int
	for _, s := range strings.Split(*tokens, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2*kv.BlockSize {
			return fmt.Errorf("--prompt-tokens: %q is not a length of at least %d", s, 2*kv.BlockSize)
		}
		lens = append(lens, n)
	}
	b, name, closeModel, err := openBenchModel(*modelPath)
	if err != nil {
		return err
	}
	defer closeModel()
	cfg := b.Config()
	dir, err := os.MkdirTemp("", "anechat-bench-resume-")
	if err != nil {
		return fmt.Errorf("bench resume: temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	var rows []resumeFigures
	for _, n := range lens {
		if n > cfg.ContextLen {
			return fmt.Errorf("--prompt-tokens %d: the model's context is %d", n, cfg.ContextLen)
		}
		f, err := benchResumeOne(ctx, b, dir, n, *batch, max(1, *repeat))
		if err != nil {
			return err
		}
		rows = append(rows, f)
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"model": name, "fingerprint": cfg.Fingerprint, "batch": *batch, "results": rows})
	}
	fmt.Fprintf(env.Stdout, "model %s (%s), prefill width %d\n", name, cfg.Fingerprint, *batch)
	fmt.Fprintf(env.Stdout, "%8s %12s %12s %14s %8s %9s %10s %10s %9s %10s %6s\n",
		"tokens", "fresh ms", "resumed ms", "resumed+64 ms", "speedup", "load ms", "load GB/s", "read GB/s", "write ms", "bytes", "exact")
	for _, r := range rows {
		fmt.Fprintf(env.Stdout, "%8d %12.1f %12.2f %14.1f %7.0fx %9.2f %10.2f %10.2f %9.2f %10d %6v\n",
			r.PromptTokens, r.FreshTTFTms, r.ResumedTTFTms, r.Resumed64TTFTms, r.Speedup, r.LoadMs, r.LoadGBps, r.ReadGBps, r.WriteMs, r.SnapshotBytes, r.Exact)
	}
	return nil
}

// openBenchModel loads a model's weights (a GGUF file or a safetensors
// directory, on the backend the build's registry picks), or generates the
// "random" memory-bound llama.
func openBenchModel(path string) (model.Backend, string, func(), error) {
	if path == "random" {
		o := arch.Decoder{Hidden: 512, FFN: 1408, Layers: 8, Heads: 8, KVHeads: 2, Vocab: 8192, Context: 4096}
		data, err := cpu.RandomLlama(o, gguf.Q8_0, 1)
		if err != nil {
			return nil, "", nil, err
		}
		tmp, err := os.CreateTemp("", "anechat-random-*.gguf")
		if err != nil {
			return nil, "", nil, fmt.Errorf("bench: %w", err)
		}
		if _, err := tmp.Write(data); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return nil, "", nil, fmt.Errorf("bench: %w", err)
		}
		tmp.Close()
		b, _, closeFn, err := openBenchModel(tmp.Name())
		if err != nil {
			os.Remove(tmp.Name())
			return nil, "", nil, err
		}
		return b, fmt.Sprintf("random llama (hidden %d, %d layers, Q8_0, %.1f MB)", o.Hidden, o.Layers, float64(len(data))/1e6),
			func() { closeFn(); os.Remove(tmp.Name()) }, nil
	}
	m, err := backends.Registry().Open(context.Background(), path, load.Options{WeightsOnly: true})
	if err != nil {
		return nil, "", nil, err
	}
	return m.Backend, filepath.Base(path), func() { m.Close() }, nil
}

// benchPrompt is n deterministic token ids (BOS first unless salt < 0: a
// continuation), avoiding ids below 3 (control tokens of most vocabularies).
func benchPrompt(cfg model.Config, n int, salt int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(3 + uint64(i*7919+i*i*31+salt*104729+1<<40)%uint64(cfg.VocabSize-3))
	}
	if cfg.BOS >= 0 && salt >= 0 {
		ids[0] = cfg.BOS
	}
	return ids
}

// firstToken makes s hold ids, prefilled (or, with resume, resumed from
// the longest snapshot in s's store and the rest prefilled), and generates
// the first token. It returns the logits that token was picked from and the
// stats (ResumedTokens: the positions restored).
func firstToken(ctx context.Context, s *engine.Session, ids []int32, resume bool) ([]float32, engine.Stats, error) {
	var err error
	if resume {
		err = s.Resume(ctx, ids, nil)
	} else {
		err = s.Prefill(ctx, ids, nil)
	}
	if err != nil {
		return nil, engine.Stats{}, err
	}
	logits := slices.Clone(s.Logits())
	st, err := s.Generate(ctx, engine.GenerateOptions{MaxTokens: 1, Width: 1}, func(engine.Token) error { return nil })
	return logits, st, err
}

func benchResumeOne(ctx context.Context, b model.Backend, dir string, n, batch, repeat int) (resumeFigures, error) {
	cfg := b.Config()
	f := resumeFigures{PromptTokens: n}
	meta := kv.Meta{Model: cfg.Fingerprint, Tokenizer: "bench", Template: ""}
	ids := benchPrompt(cfg, n, n)
	// The real index: a database in a fresh data dir, as the app uses.
	home, err := os.MkdirTemp(dir, "data-")
	if err != nil {
		return f, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := kvindex.Open(ctx, home, quiet)
	if err != nil {
		return f, err
	}
	defer store.Close()
	s, err := engine.NewSession(b, engine.SessionOptions{MaxBatch: batch, Snapshots: store, Meta: meta, Log: quiet})
	if err != nil {
		return f, err
	}
	t0 := time.Now()
	freshLogits, _, err := firstToken(ctx, s, ids, false)
	if err != nil {
		return f, err
	}
	f.FreshTTFTms = ms(time.Since(t0))

	t0 = time.Now()
	path, err := s.Save(ctx, "")
	if err != nil {
		return f, err
	}
	f.WriteMs = ms(time.Since(t0))
	st, err := os.Stat(path)
	if err != nil {
		return f, err
	}
	f.SnapshotBytes = st.Size()
	// A second snapshot of the prompt without its last 64 tokens: the
	// conversation before a new message.
	s.Reset()
	if err := s.Prefill(ctx, ids[:n-64], nil); err != nil {
		return f, err
	}
	if _, err := s.Save(ctx, ""); err != nil {
		return f, err
	}

	var ttft, ttft64, load, read []float64
	for range repeat {
		// Whole prompt stored: load, prefill the last token. The index
		// picks this snapshot (it shares every block). Reset first, so the
		// session does not reuse what its cache holds instead.
		s.Reset()
		t0 = time.Now()
		logits, gst, err := firstToken(ctx, s, ids, true)
		if err != nil {
			return f, err
		}
		ttft = append(ttft, ms(time.Since(t0)))
		if gst.ResumedTokens != n-1 {
			return f, fmt.Errorf("bench resume: restored %d of %d tokens", gst.ResumedTokens, n)
		}
		f.Exact = model.SameBits(logits, freshLogits)

		// Last 64 tokens new: both snapshots share the first n-64 tokens;
		// the index prefers the shorter (nothing to truncate, which a
		// sliding-window model could not do).
		other := append(append([]int32(nil), ids[:n-64]...), benchPrompt(cfg, 64, -2-n)...)
		s.Reset()
		t0 = time.Now()
		if _, gst, err = firstToken(ctx, s, other, true); err != nil {
			return f, err
		}
		ttft64 = append(ttft64, ms(time.Since(t0)))
		if gst.ResumedTokens != n-64 {
			return f, fmt.Errorf("bench resume: restored %d of %d shared tokens", gst.ResumedTokens, n-64)
		}

		s.Reset()
		t0 = time.Now()
		if _, err := kv.Load(ctx, path, meta, s.Cache()); err != nil {
			return f, err
		}
		load = append(load, ms(time.Since(t0)))
		s.Reset()
		t0 = time.Now()
		if err := plainRead(path); err != nil {
			return f, err
		}
		read = append(read, ms(time.Since(t0)))
	}
	f.ResumedTTFTms = median(ttft)
	f.Resumed64TTFTms = median(ttft64)
	f.LoadMs = median(load)
	f.Speedup = f.FreshTTFTms / f.ResumedTTFTms
	f.LoadGBps = float64(f.SnapshotBytes) / (f.LoadMs / 1e3) / 1e9
	f.ReadGBps = float64(f.SnapshotBytes) / (median(read) / 1e3) / 1e9
	return f, nil
}

// plainRead reads the file sequentially in 1 MiB chunks: the bandwidth a
// snapshot load is compared with.
func plainRead(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	buf := make([]byte, 1<<20)
	for {
		_, err := fh.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s[len(s)/2]
}
