package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"anechat/engine/coreml"
	"anechat/engine/load"
)

// runBenchCoreML is `anechat bench coreml`: doctor's Core ML check of a
// bundle, printed as tables (or JSON).
func runBenchCoreML(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench coreml", "[--bundle DIR] [--data-dir DIR] [--reference CHECKPOINT] [--compute-units U] [--tokens N] [--row-checks N] [--json]")
	bundle := fs.String("bundle", "", "the Core ML bundle (a directory with manifest.json, or a CoreML-LLM bundle with model_config.json); default: the data directory's default model, if it is one")
	dataDir := fs.String("data-dir", "", "data directory whose default model is checked when --bundle is not given (default $ANECHAT_HOME or the OS default)")
	reference := fs.String("reference", "", "run the bundle with the reference executor (its function contract on the CPU kernels) from the checkpoint it was converted from, instead of Core ML")
	units := computeUnitsFlag(fs)
	tokens := fs.Int("tokens", 96, "tokens generated per prompt and width")
	rows := fs.Int("row-checks", 16, "tokens checked for row independence (each in another slot)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tokens < 1 || *rows < 0 {
		return badFlag(env, "bench coreml", fmt.Errorf("--tokens %d and --row-checks %d: want at least 1 and 0", *tokens, *rows))
	}
	if err := checkComputeUnits(*units); err != nil {
		return badFlag(env, "bench coreml", err)
	}
	ctx, stop := interruptible(ctx)
	defer stop()
	if *bundle == "" {
		p, err := defaultModelPath(ctx, *dataDir, cliLogger(env))
		if err != nil {
			return fmt.Errorf("no --bundle given: %w", err)
		}
		if !isCoreMLBundle(p) {
			return fmt.Errorf("no --bundle given, and the data directory's default model %s is not a Core ML bundle: pass --bundle DIR", p)
		}
		*bundle = p
	}
	rep, err := runCoreMLCheck(ctx, coremlCheckOptions{bundle: *bundle, reference: *reference, units: *units, tokens: *tokens, rowChecks: *rows,
		progress: func(msg string) {
			if !*asJSON {
				fmt.Fprintln(env.Stderr, msg)
			}
		}})
	if errors.Is(err, errNoNeuralEngine) {
		fmt.Fprintf(env.Stdout, "bench coreml: %s\n", noNeuralEngine())
		if coreml.IsPublished(*bundle) {
			fmt.Fprintf(env.Stdout, "bench coreml: %s\n", describePublished(*bundle))
		}
		return nil
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printCoreMLReport(env.Stdout, rep, true)
	}
	if rep.Identical != rep.Prompts {
		return fmt.Errorf("%s: %w", rep.Bundle, errNotLossless)
	}
	return nil
}

// isCoreMLBundle says whether path is a Core ML bundle (an anechat bundle or
// a CoreML-LLM one), whether or not this build can run it: the check that
// follows says what runs it here.
func isCoreMLBundle(path string) bool {
	src, err := load.Detect(path)
	return err == nil && src.Format == load.CoreML
}
