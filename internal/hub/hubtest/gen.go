//go:build ignore

// gen writes testdata/fakehub.json, the fake Hub's fixtures:
//
//	go generate ./internal/hub/hubtest   (or: cd internal/hub/hubtest && go run gen.go)
//
// The real Hugging Face Hub is not reachable from the machines these tests
// run on, so the answers are not recordings of it: they are written here in
// the shapes the Hub's API documents and its Python client (huggingface_hub:
// HfApi.list_models, model_info, list_repo_tree, hf_raise_for_status)
// parses — /api/models search results, /api/models/OWNER/NAME/revision/REV
// information with its commit "sha" and "gated", and
// /api/models/OWNER/NAME/tree/REV entries {"type", "path", "size", "oid",
// "lfs": {"oid", "size", "pointerSize"}}. Every checksum in them is computed
// here from the content the server sends: an LFS file's sha256 and its
// pointer's Git blob id, a Git file's blob id. The commits are made up
// (sha1 of the repository's name): they only have the shape of one.
//
// Repositories (all under the made-up owner anechat-test):
//   - stories260K-GGUF: the real tiny model ../shared/models/stories260K.gguf
//     (external: the test supplies the file) and a second, generated .gguf;
//   - tiny-coreml: a CoreML-LLM-shaped bundle layout (model_config.json,
//     swa/chunkN.mlmodelc/..., RoPE tables, hf_model/tokenizer.json), bytes
//     generated, several files in LFS and several in Git;
//   - gated-GGUF: a gated repository ("gated": "manual") whose file is the
//     real tiny model (external), served only with hubtest.Token;
//   - unsloth/gemma-3-270m-it-GGUF: the catalog entry gemma-3-270m-it's
//     repository and file (stories260K's bytes), made gated here (the
//     real one is not) so that a catalog download with and without a
//     token is tested;
//   - bartowski/SmolLM2-135M-Instruct-GGUF: the catalog entry
//     smollm2-135m-instruct's repository and file, whose bytes are
//     stories260K's (external), so a catalog pull can be tested.
package main

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"anechat/internal/hub/hubtest"
)

type file struct {
	path string
	// text is the content of a file kept in Git; size the size of a
	// generated LFS file; external the name of a test-supplied one.
	text     string
	size     int64
	external string
}

type repo struct {
	id        string
	tags      []string
	library   string
	downloads int64
	likes     int64
	gated     string // "", "manual"
	files     []file
}

// stories is ../shared/models/stories260K.gguf (its README gives the size
// and sha256; gen reads the file to check them).
const (
	storiesSize   = 1185376
	storiesSHA256 = "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"
)

func main() {
	repos := []repo{
		{id: "anechat-test/stories260K-GGUF", tags: []string{"gguf", "llama", "text-generation"}, library: "gguf", downloads: 1200, likes: 3,
			files: []file{
				{path: ".gitattributes", text: "*.gguf filter=lfs diff=lfs merge=lfs -text\n"},
				{path: "README.md", text: "---\nlicense: mit\n---\n# stories260K\n\nA 260K-parameter Llama trained on TinyStories (llama2.c).\n"},
				{path: "stories260K.gguf", size: storiesSize, external: "stories260K.gguf"},
				{path: "stories260K-Q8_0.gguf", size: 40000},
			}},
		{id: "anechat-test/tiny-coreml", tags: []string{"coreml", "gemma4", "text-generation"}, library: "coreml", downloads: 800, likes: 5,
			files: []file{
				{path: ".gitattributes", text: "*.bin filter=lfs diff=lfs merge=lfs -text\n*.npy filter=lfs diff=lfs merge=lfs -text\n"},
				{path: "README.md", text: "---\nlicense: other\n---\n# tiny-coreml\n\nA bundle layout for tests: bytes, not a model.\n"},
				{path: "model_config.json", text: "{\n  \"model_name\": \"tiny\",\n  \"architecture\": \"gemma4\",\n  \"hidden_size\": 8,\n  \"context_length\": 16,\n  \"vocab_size\": 32,\n  \"num_layers\": 2,\n  \"per_layer_dim\": 4\n}\n"},
				{path: "hf_model/tokenizer.json", text: "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}\n"},
				{path: "embed_tokens_q8.bin", size: 150000},
				{path: "swa/chunk1.mlmodelc/weights/weight.bin", size: 300000},
				{path: "swa/chunk1.mlmodelc/model.mil", text: "program(1.3)\n"},
				{path: "swa/chunk1.mlmodelc/coremldata.bin", size: 900},
				{path: "swa/chunk2.mlmodelc/weights/weight.bin", size: 200000},
				{path: "swa/chunk2.mlmodelc/model.mil", text: "program(1.3)\n"},
				{path: "swa/chunk2.mlmodelc/coremldata.bin", size: 900},
				{path: "swa/cos_sliding.npy", size: 70000},
				{path: "swa/sin_sliding.npy", size: 70000},
			}},
		// The catalog's smollm2-135m-instruct entry (internal/catalog), its
		// file served as the real tiny model: the app's one-click catalog
		// download is tested end to end (fetched, checked, registered).
		{id: "bartowski/SmolLM2-135M-Instruct-GGUF", tags: []string{"gguf", "llama", "text-generation"}, library: "gguf", downloads: 300, likes: 1,
			files: []file{
				{path: "README.md", text: "---\nlicense: apache-2.0\n---\n# SmolLM2-135M-Instruct-GGUF (fake Hub: stories260K's bytes)\n"},
				{path: "SmolLM2-135M-Instruct-Q8_0.gguf", size: storiesSize, external: "stories260K.gguf"},
			}},
		{id: "anechat-test/gated-GGUF", tags: []string{"gguf", "gemma3"}, library: "gguf", downloads: 500, gated: "manual",
			files: []file{
				{path: "gated-Q4_K_M.gguf", size: storiesSize, external: "stories260K.gguf"},
			}},
		// The catalog's gemma-3-270m-it entry, gated on this fake Hub only:
		// the one-click download with the token pasted in Settings.
		{id: "unsloth/gemma-3-270m-it-GGUF", tags: []string{"gguf", "gemma3", "text-generation"}, library: "gguf", downloads: 400, gated: "auto",
			files: []file{
				{path: "README.md", text: "---\nlicense: gemma\n---\n# gemma-3-270m-it-GGUF (fake Hub: stories260K's bytes, gated here)\n"},
				{path: "gemma-3-270m-it-Q4_K_M.gguf", size: storiesSize, external: "stories260K.gguf"},
			}},
	}
	// Search-only hits: found by the search, no repository behind them.
	extra := []repo{
		{id: "someone-else/stories-finetune-GGUF", tags: []string{"gguf"}, library: "gguf", downloads: 90},
		{id: "anechat-test/not-a-model", tags: []string{"safetensors"}, library: "transformers", downloads: 5000},
	}

	out := map[string]any{
		"_comment": []string{
			"Written by gen.go (go generate ./internal/hub/hubtest); do not edit by hand.",
			"The real Hugging Face Hub is not reachable from the machines the tests run on: these answers follow the shapes the Hub's API documents",
			"(/api/models, /api/models/OWNER/NAME/revision/REV, /api/models/OWNER/NAME/tree/REV), not recordings of it. Commits are made up.",
		},
	}
	var search []map[string]any
	repoOut := map[string]any{}
	for _, r := range append(repos, extra...) {
		commit := sha1hex(r.id)
		m := map[string]any{
			"_id": commit[:24], "id": r.id, "modelId": r.id, "likes": r.likes, "downloads": r.downloads,
			"tags": r.tags, "library_name": r.library, "pipeline_tag": "text-generation",
			"private": false, "gated": gatedJSON(r.gated), "createdAt": "2026-01-15T10:00:00.000Z", "lastModified": "2026-03-01T12:00:00.000Z",
		}
		search = append(search, m)
		if len(r.files) == 0 {
			continue
		}
		info := map[string]any{}
		for k, v := range m {
			info[k] = v
		}
		info["sha"] = commit
		info["author"] = "anechat-test"
		var siblings []map[string]any
		var tree []map[string]any
		texts := map[string]string{}
		external := map[string]string{}
		dirs := map[string]bool{}
		for _, f := range r.files {
			siblings = append(siblings, map[string]any{"rfilename": f.path})
			for d := filepath.Dir(f.path); d != "."; d = filepath.Dir(d) {
				dirs[d] = true
			}
			if f.text != "" {
				texts[f.path] = f.text
				tree = append(tree, map[string]any{"type": "file", "oid": hubtest.GitBlobID([]byte(f.text)), "size": len(f.text), "path": f.path})
				continue
			}
			var sum string
			if f.external != "" {
				external[f.path] = f.external
				sum = storiesSHA256
				if b, err := os.ReadFile("../../../../shared/models/stories260K.gguf"); err == nil {
					if int64(len(b)) != f.size || hubtest.SHA256(b) != sum {
						fail(fmt.Errorf("../shared/models/stories260K.gguf is not the file its README describes"))
					}
				}
			} else {
				sum = hubtest.SHA256(hubtest.Bytes(r.id, f.path, f.size))
			}
			ptr := hubtest.LFSPointer(sum, f.size)
			tree = append(tree, map[string]any{"type": "file", "oid": hubtest.GitBlobID(ptr), "size": f.size, "path": f.path,
				"lfs": map[string]any{"oid": sum, "size": f.size, "pointerSize": len(ptr)}})
		}
		for d := range dirs {
			tree = append(tree, map[string]any{"type": "directory", "oid": sha1hex(r.id + "/" + d), "size": 0, "path": d})
		}
		sort.Slice(tree, func(i, j int) bool { return tree[i]["path"].(string) < tree[j]["path"].(string) })
		info["siblings"] = siblings
		repoOut[r.id] = map[string]any{
			"info": info, "commit": commit, "branches": []string{"main"}, "gated": r.gated != "",
			"tree": tree, "texts": texts, "external": external,
		}
	}
	out["search"] = search
	out["repos"] = repoOut
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "fakehub.json"), append(b, '\n'), 0o644); err != nil {
		fail(err)
	}
}

func gatedJSON(g string) any {
	if g == "" {
		return false
	}
	return g
}

func sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
