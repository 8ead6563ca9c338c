// Command cpuref prints the CPU backend's reference numbers for the Core ML
// converter's tests (engine/coreml/convert): it opens a model as the engine
// does (engine/load on the CPU backend: a llama GGUF file or a gemma4
// directory), runs
// the calls a JSON request on stdin describes against a KV cache, and
// writes every call's logits and new K/V rows to a safetensors file.
//
//	go run ./engine/coreml/convert/cpuref -model M -out ref.safetensors < req.json > resp.json
//
// The request:
//
//	{"encode": ["text", ...],               // prompts to tokenize (engine.RawPrompt)
//	 "sequences": [{"name": "a",            // a fresh cache each
//	   "steps": [{"tokens": [..], "commit": n}, ...]}],
//	 "greedy": [{"name": "g", "ids": [..], "n": 32}]}  // greedy ids after a prompt
//
// The response (stdout) holds the encoded prompts and the greedy ids; the
// tensors are "<seq>.<step>.logits" [n, vocab] and "<seq>.<step>.k.<layer>",
// "<seq>.<step>.v.<layer>" [n, kv_heads*head_dim] for every layer that owns
// its K/V rows, all float32.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"anechat/engine"
	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
)

type step struct {
	Tokens []int32 `json:"tokens"`
	Commit int     `json:"commit"`
}

type request struct {
	Encode    []string `json:"encode"`
	Sequences []struct {
		Name  string `json:"name"`
		Steps []step `json:"steps"`
	} `json:"sequences"`
	Greedy []struct {
		Name string  `json:"name"`
		IDs  []int32 `json:"ids"`
		N    int     `json:"n"`
	} `json:"greedy"`
}

type response struct {
	Encoded [][]int32          `json:"encoded"`
	Greedy  map[string][]int32 `json:"greedy"`
	Vocab   int                `json:"vocab"`
	Owners  []int              `json:"owners"`
}

// tensors collects named float32 tensors for a safetensors file.
type tensors struct {
	names  []string
	shapes map[string][]int
	data   map[string][]float32
}

func (t *tensors) add(name string, shape []int, v []float32) {
	if t.shapes == nil {
		t.shapes, t.data = map[string][]int{}, map[string][]float32{}
	}
	t.names = append(t.names, name)
	t.shapes[name] = shape
	t.data[name] = v
}

// write stores the tensors in the safetensors layout: an 8-byte header
// length, the JSON header, then the little-endian data.
func (t *tensors) write(w io.Writer) error {
	sort.Strings(t.names)
	type entry struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	head := map[string]entry{}
	off := 0
	for _, n := range t.names {
		size := 4 * len(t.data[n])
		head[n] = entry{"F32", t.shapes[n], [2]int{off, off + size}}
		off += size
	}
	hb, err := json.Marshal(head)
	if err != nil {
		return err
	}
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	if err := binary.Write(w, binary.LittleEndian, uint64(len(hb))); err != nil {
		return err
	}
	if _, err := w.Write(hb); err != nil {
		return err
	}
	buf := make([]byte, 0, 1<<16)
	for _, n := range t.names {
		for _, f := range t.data[n] {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			if len(buf) == cap(buf) {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	_, err = w.Write(buf)
	return err
}

func run(ctx context.Context, modelPath, outPath string, in io.Reader, out io.Writer) error {
	var req request
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("cpuref: request: %w", err)
	}
	// The CPU backend alone, whatever else this build registers: it is the
	// reference.
	m, err := load.NewRegistry(cpu.Loader{}).Open(ctx, modelPath, load.Options{})
	if err != nil {
		return err
	}
	defer m.Close()
	b, tok := m.Backend, m.Tokenizer
	cfg := b.Config()
	resp := response{Greedy: map[string][]int32{}, Vocab: cfg.VocabSize}
	for i, l := range cfg.KV.Layers {
		if l.Source == i {
			resp.Owners = append(resp.Owners, i)
		}
	}
	for _, s := range req.Encode {
		resp.Encoded = append(resp.Encoded, engine.RawPrompt(tok, s))
	}
	var ts tensors
	for _, seq := range req.Sequences {
		cache, err := kv.New(cfg.KV, 1024)
		if err != nil {
			return err
		}
		for si, st := range seq.Steps {
			start := cache.Len()
			r, err := b.Forward(ctx, st.Tokens, start, cache, model.Logits)
			if err != nil {
				return fmt.Errorf("cpuref: %s step %d: %w", seq.Name, si, err)
			}
			n := len(st.Tokens)
			flat := make([]float32, 0, n*cfg.VocabSize)
			for _, row := range r.Logits {
				flat = append(flat, row...)
			}
			p := fmt.Sprintf("%s.%d.", seq.Name, si)
			ts.add(p+"logits", []int{n, cfg.VocabSize}, flat)
			for _, li := range resp.Owners {
				stride := cfg.KV.Layers[li].Stride()
				k := make([]float32, 0, n*stride)
				v := make([]float32, 0, n*stride)
				for t := range n {
					k = append(k, cache.K(li, start+t)...)
					v = append(v, cache.V(li, start+t)...)
				}
				ts.add(fmt.Sprintf("%sk.%d", p, li), []int{n, stride}, k)
				ts.add(fmt.Sprintf("%sv.%d", p, li), []int{n, stride}, v)
			}
			if err := cache.Commit(st.Commit); err != nil {
				return fmt.Errorf("cpuref: %s step %d: %w", seq.Name, si, err)
			}
		}
	}
	for _, g := range req.Greedy {
		cache, err := kv.New(cfg.KV, 1024)
		if err != nil {
			return err
		}
		r, err := b.Forward(ctx, g.IDs, 0, cache, model.Argmax|model.Last)
		if err != nil {
			return fmt.Errorf("cpuref: greedy %s: %w", g.Name, err)
		}
		if err := cache.Commit(len(g.IDs)); err != nil {
			return err
		}
		ids := []int32{r.Argmax[0]}
		for len(ids) < g.N {
			r, err := b.Forward(ctx, ids[len(ids)-1:], cache.Len(), cache, model.Argmax)
			if err != nil {
				return fmt.Errorf("cpuref: greedy %s: %w", g.Name, err)
			}
			if err := cache.Commit(1); err != nil {
				return err
			}
			ids = append(ids, r.Argmax[0])
		}
		resp.Greedy[g.Name] = ids
	}
	f, err := os.Create(outPath)
	if err != nil {
		return fmt.Errorf("cpuref: %w", err)
	}
	if err := ts.write(f); err != nil {
		f.Close()
		return fmt.Errorf("cpuref: %s: %w", outPath, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cpuref: %w", err)
	}
	return json.NewEncoder(out).Encode(resp)
}

func main() {
	modelPath := flag.String("model", "", "a llama .gguf file or a gemma4 model directory")
	outPath := flag.String("out", "", "the safetensors file to write")
	flag.Parse()
	if *modelPath == "" || *outPath == "" {
		fmt.Fprintln(os.Stderr, "usage: cpuref -model M -out ref.safetensors < request.json")
		os.Exit(2)
	}
	if err := run(context.Background(), *modelPath, *outPath, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
