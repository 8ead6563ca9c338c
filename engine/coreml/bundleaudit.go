package coreml

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"anechat/engine/coreml/mlprogram"
)

// The layouts AuditBundle reads.
const (
	LayoutAnechat   = "anechat"    // a bundle of the anechat converter (manifest.json)
	LayoutPublished = "coreml-llm" // the layout CoreML-LLM publishes (model_config.json)
	LayoutPackage   = "mlpackage"  // one .mlpackage
)

// AuditReport is the audit of every package of a bundle against the rules
// known to push work off the Neural Engine (engine/coreml/mlprogram,
// audit.go): what `anechat bundle audit` prints.
type AuditReport struct {
	Bundle     string                     `json:"bundle"`
	Layout     string                     `json:"layout"`
	Limits     mlprogram.Limits           `json:"limits"`
	Packages   []*mlprogram.PackageReport `json:"packages"`
	Violations int                        `json:"violations"`
	// Rules lists every rule with its threshold and source.
	Rules []mlprogram.RuleInfo `json:"rules"`
}

// AuditBundle reads the packages of the bundle in dir (its chunks, in
// order) and audits each with thresholds l. dir is a bundle of the anechat
// converter, one of CoreML-LLM's layout whose chunks are .mlpackage files,
// or a single .mlpackage. A bundle that cannot be read, a package that
// cannot, or compiled chunks (.mlmodelc, whose program is MIL text this
// reader does not parse) are errors, never an empty report.
func AuditBundle(ctx context.Context, dir string, l mlprogram.Limits) (*AuditReport, error) {
	layout, pkgs, err := bundlePackages(dir)
	if err != nil {
		return nil, err
	}
	r := &AuditReport{Bundle: dir, Layout: layout, Limits: l, Rules: mlprogram.Rules(l)}
	for _, p := range pkgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pkg, err := mlprogram.OpenPackage(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBundle, err)
		}
		pr := mlprogram.Audit(pkg, l)
		r.Violations += pr.Count()
		r.Packages = append(r.Packages, pr)
	}
	return r, nil
}

// bundlePackages returns dir's layout and the paths of its packages.
func bundlePackages(dir string) (string, []string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	if !fi.IsDir() {
		return "", nil, fmt.Errorf("%w: %s is not a directory (a bundle or an .mlpackage)", ErrBundle, dir)
	}
	// By name: on a case-insensitive volume (a Mac's default) a package's
	// Manifest.json also answers to the bundle's manifest.json.
	if strings.HasSuffix(filepath.Clean(dir), ".mlpackage") {
		// The package the user named, wherever a link of theirs points
		// (a bundle's packages, below, are read only inside it).
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return "", nil, fmt.Errorf("%w: %w", ErrBundle, err)
		}
		return LayoutPackage, []string{real}, nil
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
		m, err := ReadManifest(dir)
		if err != nil {
			return "", nil, err
		}
		var out []string
		for _, c := range m.Chunks {
			out = append(out, filepath.Join(dir, c.Package))
		}
		return LayoutAnechat, out, nil
	}
	if IsPublished(dir) {
		p, err := ReadPublished(dir)
		if err != nil {
			return "", nil, err
		}
		var out []string
		for _, name := range append(append([]string(nil), p.Decode...), p.Prefill...) {
			if !strings.HasSuffix(name, ".mlpackage") {
				return "", nil, fmt.Errorf("%w: %s is a compiled model: bundle audit reads .mlpackage bundles (a compiled model's program is MIL text, which it does not parse); audit the .mlpackage files it was compiled from", ErrBundle, filepath.Join(dir, name))
			}
			out = append(out, filepath.Join(dir, name))
		}
		return LayoutPublished, out, nil
	}
	return "", nil, fmt.Errorf("%w: %s is not a bundle: it has neither %s (anechat converter) nor model_config.json (CoreML-LLM), and is not an .mlpackage", ErrBundle, dir, ManifestName)
}
