package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"anechat/engine/coreml"
)

// runBenchCoreML is `anechat bench coreml`: doctor's Core ML check of a
// bundle, printed as tables (or JSON).
func runBenchCoreML(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench coreml", "--bundle DIR [--reference CHECKPOINT] [--compute-units U] [--tokens N] [--json]")
	bundle := fs.String("bundle", "", "the Core ML bundle (a directory with manifest.json, or a CoreML-LLM bundle with model_config.json)")
	reference := fs.String("reference", "", "run the bundle with the reference executor (its function contract on the CPU kernels) from the checkpoint it was converted from, instead of Core ML")
	units := computeUnitsFlag(fs)
	tokens := fs.Int("tokens", 96, "tokens generated per prompt and width")
	rows := fs.Int("row-checks", 16, "tokens checked for row independence (each in another slot)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *bundle == "" {
		fmt.Fprintln(env.Stderr, "bench coreml needs --bundle")
		fs.Usage()
		return errUsage
	}
	if *tokens < 1 || *rows < 0 {
		return badFlag(env, "bench coreml", fmt.Errorf("--tokens %d and --row-checks %d: want at least 1 and 0", *tokens, *rows))
	}
	if err := checkComputeUnits(*units); err != nil {
		return badFlag(env, "bench coreml", err)
	}
	ctx, stop := interruptible(ctx)
	defer stop()
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
