package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"

	"anechat/app"
	"anechat/engine/coreml"
	"anechat/internal/backends"
	"anechat/internal/hub"
	"anechat/internal/human"
	"anechat/internal/secrets"
	"anechat/storage"
)

// runDoctor reports what this machine and binary can do and the state of the
// data directory: platform, backends, data dir, database, models. It exits 1
// when it found a problem (each one printed with what to do).
func runDoctor(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "doctor", "[--data-dir DIR] [--bundle DIR [--reference CHECKPOINT] [--compute-units U] [--tokens N]] [--json]")
	dataDir := fs.String("data-dir", "", "data directory to check (default $ANECHAT_HOME or the OS default)")
	bundle := fs.String("bundle", "", "also check this Core ML bundle: load and compile time, speculation on/off identity over a prompt set, row independence of the generation functions, latency per call kind and width, tok/s")
	reference := fs.String("reference", "", "with --bundle: run it with the reference executor (its function contract on the CPU kernels) from the checkpoint it was converted from, instead of Core ML")
	units := computeUnitsFlag(fs)
	tokens := fs.Int("tokens", 48, "with --bundle: tokens generated per prompt and width")
	asJSON := fs.Bool("json", false, "print one JSON document: every check, the problems, and with --bundle the bundle's report (identity, latency per width, where each operation runs; the shape of bench coreml --json)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkComputeUnits(*units); err != nil {
		return badFlag(env, "doctor", err)
	}
	if *bundle == "" && (*units != "" || *reference != "") {
		return badFlag(env, "doctor", errors.New("--compute-units and --reference say how to run a bundle: give it with --bundle DIR"))
	}
	r := doctorReport{w: env.Stdout}
	if *asJSON {
		r.w, r.doc, r.out = io.Discard, &doctorDocument{Problems: []string{}}, env.Stdout
	}
	r.platform()
	r.backends(runtime.GOOS, runtime.GOARCH)
	dir, err := storage.DataDir(*dataDir, cliLogger(env))
	if err != nil {
		r.problem("data dir", err)
		return r.result()
	}
	r.line("data dir", "%s", dir)
	r.database(ctx, storage.DBPath(dir))
	r.models(ctx, storage.ModelsPath(dir))
	r.hubToken(dir)
	if *bundle != "" {
		r.bundle(ctx, coremlCheckOptions{bundle: *bundle, reference: *reference, units: *units, tokens: max(*tokens, 1), rowChecks: 8})
	}
	return r.result()
}

// bundle runs the Core ML check on a bundle and reports it; a difference
// between speculation on and off, or rows that depend on their slot, is a
// problem. Where there is no Neural Engine (and no reference checkpoint)
// the bundle is still checked in full (coreml.CheckBundle: every file,
// size and checksum; only running it needs a Mac), and doctor says which
// backend runs here: that is this machine, not a problem.
func (r *doctorReport) bundle(ctx context.Context, o coremlCheckOptions) {
	rep, err := runCoreMLCheck(ctx, o)
	if errors.Is(err, errNoNeuralEngine) {
		if what, err := coreml.CheckBundle(ctx, o.bundle); err != nil {
			r.problem("bundle", err)
		} else {
			r.line("bundle", "%s: %s", o.bundle, what)
		}
		r.line("bundle", "%s: %s", o.bundle, noNeuralEngine())
		rep = &coremlReport{Bundle: o.bundle, Note: noNeuralEngine(), PlacementAbsent: placementNeedsMac("")}
		r.line("placement", "%s", rep.PlacementAbsent)
		r.notChecked = append(r.notChecked, "running the bundle (no Neural Engine here)")
		if r.doc != nil {
			r.doc.Bundle = rep
		}
		return
	}
	if err != nil {
		r.problem("bundle", err)
		return
	}
	if r.doc != nil {
		r.doc.Bundle = rep
	}
	printCoreMLReport(r.w, rep, false)
	if rep.placementFailed {
		r.problems++
		if r.doc != nil {
			r.doc.Problems = append(r.doc.Problems, "placement: "+rep.PlacementAbsent)
		}
	} else if rep.PlacementAbsent != "" {
		r.notChecked = append(r.notChecked, "where the bundle's operations run (Core ML's compute plan needs a Mac with Apple silicon and macOS 14.4 or later)")
	}
	if rep.Identical != rep.Prompts {
		why := ""
		if rep.Published {
			why = " (measured: this bundle's verify function is not its decode function; run it with speculation off for its exact greedy text)"
		}
		r.problem("identity", fmt.Errorf("%s differ with speculation on and off on %s%s", rep.Bundle, strings.Join(rep.Differing, ", "), why))
	}
	if rep.RowSameBits != rep.RowChecks {
		r.problem("rows", fmt.Errorf("%s: a token's row depends on its slot in %d of %d checks (max |diff| %.3g): speculation cannot be lossless there", rep.Bundle, rep.RowChecks-rep.RowSameBits, rep.RowChecks, rep.RowMaxDiff))
	}
}

// doctorReport prints aligned "label: value" lines and counts problems;
// with --json it records them in doc instead and prints doc at the end.
type doctorReport struct {
	w        io.Writer
	problems int
	// notChecked names what doctor could not check on this machine: the
	// last line says so rather than a bare "no problems found".
	notChecked []string
	doc        *doctorDocument
	out        io.Writer // where doc goes
}

// doctorDocument is `anechat doctor --json`: every line doctor prints,
// the problems, what it could not check here, and with --bundle the
// bundle's report, the same shape as `bench coreml --json`.
type doctorDocument struct {
	Anechat    string        `json:"anechat"`
	Go         string        `json:"go"`
	Platform   string        `json:"platform"`
	CPUs       int           `json:"cpus"`
	Checks     []doctorCheck `json:"checks"`
	Problems   []string      `json:"problems"`
	NotChecked []string      `json:"not_checked,omitempty"`
	Bundle     *coremlReport `json:"bundle,omitempty"`
}

// doctorCheck is one line of doctor's text report and the lines under it.
type doctorCheck struct {
	Label   string   `json:"label"`
	Text    string   `json:"text"`
	Problem bool     `json:"problem,omitempty"`
	Details []string `json:"details,omitempty"`
}

func (r *doctorReport) line(label, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	fmt.Fprintf(r.w, "%-10s %s\n", label+":", text)
	if r.doc != nil {
		r.doc.Checks = append(r.doc.Checks, doctorCheck{Label: label, Text: text})
	}
}

// detail prints an indented line under the last one.
func (r *doctorReport) detail(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	fmt.Fprintf(r.w, "  %s\n", text)
	if r.doc != nil && len(r.doc.Checks) > 0 {
		c := &r.doc.Checks[len(r.doc.Checks)-1]
		c.Details = append(c.Details, text)
	}
}

func (r *doctorReport) problem(label string, err error) {
	r.problems++
	r.line(label, "PROBLEM: %v", err)
	if r.doc != nil {
		r.doc.Checks[len(r.doc.Checks)-1].Problem = true
		r.doc.Problems = append(r.doc.Problems, label+": "+err.Error())
	}
}

func (r *doctorReport) result() error {
	if r.doc != nil {
		r.doc.NotChecked = r.notChecked
		enc := json.NewEncoder(r.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r.doc); err != nil {
			return err
		}
	}
	if r.problems > 0 {
		return fmt.Errorf("found %d problem(s), see above", r.problems)
	}
	switch {
	case len(r.notChecked) > 0:
		fmt.Fprintf(r.w, "no problems found in what could be checked here; NOT checked: %s\n", strings.Join(r.notChecked, "; "))
	default:
		fmt.Fprintln(r.w, "no problems found")
	}
	return nil
}

func (r *doctorReport) platform() {
	r.line("anechat", "%s (%s)", Version, runtime.Version())
	r.line("platform", "%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if r.doc != nil {
		r.doc.Anechat, r.doc.Go, r.doc.Platform, r.doc.CPUs = Version, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU()
	}
}

// backends says which backends this binary can run here, and why not.
func (r *doctorReport) backends(goos, goarch string) {
	r.line("backends", "")
	r.detail("%-8s %s", "cpu", "available (pure Go; runs on every platform)")
	r.detail("%-8s %s", "coreml", backends.CoreMLStatus(goos, goarch))
	what := "the CPU backend runs every model"
	if goos == "darwin" && goarch == "arm64" && backends.Statuses()[0].Available {
		what = "Core ML bundles run on the Core ML backend, every other model on the CPU backend"
	}
	r.detail("%s", what)
}

// database opens the database (migrating it, as the app would) and reports
// its schema version, integrity and row counts, or the typed error.
func (r *doctorReport) database(ctx context.Context, path string) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		r.line("database", "%s: not created yet (the app or a command creates it on first use)", path)
		return
	}
	d, err := storage.Open(ctx, path)
	if err != nil {
		r.problem("database", err)
		return
	}
	defer d.Close()
	if err := d.Check(ctx); err != nil {
		r.problem("database", err)
		return
	}
	var counts string
	for i, t := range []struct{ table, noun string }{
		{"conversations", "conversations"}, {"messages", "messages"}, {"prompts", "prompts"},
		{"models", "models"}, {"kv_snapshots", "KV snapshots"}, {"settings", "settings"},
	} {
		var n int64
		if err := d.SQL().QueryRowContext(ctx, "SELECT count(*) FROM "+t.table).Scan(&n); err != nil {
			r.problem("database", fmt.Errorf("count %s in %s: %w", t.table, path, err))
			return
		}
		if i > 0 {
			counts += ", "
		}
		counts += fmt.Sprintf("%d %s", n, t.noun)
	}
	kvBytes, err := d.TotalSnapshotBytes(ctx)
	if err != nil {
		r.problem("database", err)
		return
	}
	r.line("database", "%s: schema version %d, integrity ok", path, d.SchemaVersion())
	r.line("contents", "%s (%s of KV snapshots)", counts, human.Bytes(kvBytes))
}

// models lists what a scan of the models folder finds: each model validated
// by loading it as a reply would (on the backend that would run it), so a
// model listed here opens, and one that would not is a problem saying why.
// hubToken says which Hugging Face access token the Hub client sends (for
// gated repositories), masked: $HF_TOKEN's, or the one stored in Settings,
// or none. The token itself is never printed.
func (r *doctorReport) hubToken(dir string) {
	const label = "hub token"
	env, err := envHubToken()
	if err != nil {
		r.problem(label, err)
		return
	}
	st := secrets.Default(dir)
	stored, err := st.Get()
	switch {
	case env != "":
		r.line(label, "$%s (%s) is sent to the Hub by anechat search and pull; the window sends the one stored in Settings", hub.EnvToken, secrets.Mask(env))
	case err != nil:
		r.problem(label, err)
	case stored != "":
		r.line(label, "%s, kept in %s, is sent to the Hub for gated repositories", secrets.Mask(stored), st.Where())
	default:
		r.line(label, "none (a gated repository needs one: paste it in Settings, or set $%s for the command line)", hub.EnvToken)
	}
}

func (r *doctorReport) models(ctx context.Context, dir string) {
	found, problems, err := app.ScanDir(ctx, backends.Registry(), dir)
	if err != nil {
		r.problem("models", err)
		return
	}
	r.line("models", "%s: %d found", dir, len(found))
	for _, f := range found {
		arch := f.Arch
		if arch == "" {
			arch = "unknown architecture"
		}
		r.detail("%s  (%s %s, %s, %s, context %d, runs on %s, fingerprint %s)", f.Path, f.Format, f.Quant, arch,
			human.Bytes(f.SizeBytes), f.Config.ContextLen, f.Backend, f.Fingerprint)
	}
	for _, p := range problems {
		r.problems++
		r.detail("PROBLEM: %s: %s", p.Path, p.Error)
		if r.doc != nil {
			r.doc.Problems = append(r.doc.Problems, "models: "+p.Path+": "+p.Error)
		}
	}
	if len(found) == 0 {
		r.detail("(put a .gguf file or a model directory in %s)", dir)
	}
}
