package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlprogram"
	"anechat/internal/human"
)

// errANERules is returned when the audit found ops that break a rule.
var errANERules = errors.New("breaks rules known to push work off the Neural Engine")

// runBundleAudit is `anechat bundle audit DIR`: every package of a Core
// ML bundle read and checked against the rules of
// engine/coreml/mlprogram/audit.go, per function: ops, weight bytes and
// each op that breaks a rule, with the rule's source. It runs anywhere (no
// Core ML): where the ops actually run only a Mac's compute plan says.
// Exit status 1 when anything breaks a rule.
func runBundleAudit(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bundle audit", "DIR [--json] [--max-mb N] [--max-ops N]")
	def := mlprogram.DefaultLimits()
	asJSON := fs.Bool("json", false, "print JSON")
	maxMB := fs.Int64("max-mb", def.MaxPackageBytes>>20, "largest package in MiB (ANEMLL's chunk-planner default; iOS may fail to load weight files over 1 GB)")
	maxOps := fs.Int("max-ops", def.MaxOps, "most ops per function, constants not counted (CoreML-LLM's largest working chunk has about 1,714)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: anechat bundle audit DIR [--json] [--max-mb N] [--max-ops N]\n\n"+
			"DIR is a bundle of the anechat converter, a CoreML-LLM bundle with .mlpackage chunks, or one .mlpackage.\n\nflags:\n")
		fs.PrintDefaults()
	}
	dir, err := parseOperand(fs, args, "DIR")
	if err != nil {
		return err
	}
	if *maxMB < 1 || *maxMB > 1<<30 || *maxOps < 1 {
		return badFlag(env, "bundle audit", fmt.Errorf("--max-mb %d and --max-ops %d: want at least 1", *maxMB, *maxOps))
	}
	l := def
	l.MaxPackageBytes, l.MaxOps = *maxMB<<20, *maxOps
	rep, err := coreml.AuditBundle(ctx, dir, l)
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
		printAudit(env.Stdout, rep)
	}
	if rep.Violations > 0 {
		return fmt.Errorf("%s: %d violation(s): it %w (each is listed above with its rule and source)", dir, rep.Violations, errANERules)
	}
	return nil
}

// printAudit prints an audit report as tables.
func printAudit(w io.Writer, r *coreml.AuditReport) {
	what := fmt.Sprintf("%s, %d package(s)", map[string]string{coreml.LayoutAnechat: "anechat converter bundle", coreml.LayoutPublished: "CoreML-LLM bundle"}[r.Layout], len(r.Packages))
	if r.Layout == coreml.LayoutPackage {
		what = "one .mlpackage"
	}
	fmt.Fprintf(w, "bundle audit: %s (%s)\n", r.Bundle, what)
	fmt.Fprintf(w, "limits: %d MiB per package, %d ops per function (constants not counted), %d elements per last axis (linear, matmul, conv exempt) and per reduction\n",
		r.Limits.MaxPackageBytes>>20, r.Limits.MaxOps, r.Limits.MaxAxis)
	broken := map[string]bool{}
	for _, p := range r.Packages {
		name, err := filepath.Rel(r.Bundle, p.Path)
		if err != nil || r.Layout == coreml.LayoutPackage {
			name = filepath.Base(r.Bundle)
		}
		fmt.Fprintf(w, "\n%s  %s (weights %s)\n", name, human.Bytes(p.Bytes), human.Bytes(p.WeightBytes))
		fmt.Fprintf(w, "  %-16s %6s %10s %12s %11s\n", "function", "ops", "constants", "weights", "violations")
		for _, f := range p.Functions {
			fmt.Fprintf(w, "  %-16s %6d %10d %12s %11d\n", f.Name, f.Ops, f.Constants, human.Bytes(f.WeightBytes), len(f.Violations))
		}
		vs := p.Violations
		for _, f := range p.Functions {
			vs = append(vs, f.Violations...)
		}
		for _, v := range vs {
			broken[v.Rule] = true
			where := name
			if v.Function != "" {
				where += " " + v.Function
			}
			if v.Op != "" {
				where += fmt.Sprintf(": %s %q", v.OpType, v.Op)
			}
			fmt.Fprintf(w, "  ! %s [%s] %s\n", where, v.Rule, v.Detail)
			if len(v.Inputs) > 0 || len(v.Outputs) > 0 {
				fmt.Fprintf(w, "      in: %s  out: %s\n", orNone(v.Inputs), orNone(v.Outputs))
			}
		}
	}
	fmt.Fprintln(w)
	if r.Violations == 0 {
		fmt.Fprintln(w, "no violations: every package passes every rule. Where each op runs is Core ML's choice, which only a Mac's compute plan reports.")
		return
	}
	fmt.Fprintf(w, "%d violation(s). The rules broken, and their sources:\n", r.Violations)
	for _, rule := range r.Rules {
		if broken[rule.ID] {
			fmt.Fprintf(w, "  %s: %s.\n      source: %s\n", rule.ID, rule.Checks, rule.Source)
		}
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}
