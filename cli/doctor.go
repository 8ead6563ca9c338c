package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"

	"anechat/app"
	"anechat/internal/backends"
	"anechat/storage"
)

// runDoctor reports what this machine and binary can do and the state of the
// data directory: platform, backends, data dir, database, models. It exits 1
// when it found a problem (each one printed with what to do).
func runDoctor(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "doctor", "[--data-dir DIR]")
	dataDir := fs.String("data-dir", "", "data directory to check (default $ANECHAT_HOME or the OS default)")
	if err := parse(fs, args); err != nil {
		return err
	}
	r := doctorReport{w: env.Stdout}
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
	return r.result()
}

// doctorReport prints aligned "label: value" lines and counts problems.
type doctorReport struct {
	w        io.Writer
	problems int
}

func (r *doctorReport) line(label, format string, args ...any) {
	fmt.Fprintf(r.w, "%-10s %s\n", label+":", fmt.Sprintf(format, args...))
}

func (r *doctorReport) problem(label string, err error) {
	r.problems++
	r.line(label, "PROBLEM: %v", err)
}

func (r *doctorReport) result() error {
	if r.problems == 0 {
		fmt.Fprintln(r.w, "no problems found")
		return nil
	}
	return fmt.Errorf("found %d problem(s), see above", r.problems)
}

func (r *doctorReport) platform() {
	r.line("anechat", "%s (%s)", Version, runtime.Version())
	r.line("platform", "%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}

// backends says which backends this binary can run here, and why not.
func (r *doctorReport) backends(goos, goarch string) {
	r.line("backends", "")
	fmt.Fprintf(r.w, "  %-8s %s\n", "cpu", "available (pure Go; runs on every platform)")
	fmt.Fprintf(r.w, "  %-8s %s\n", "coreml", backends.CoreMLStatus(goos, goarch))
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
	r.line("contents", "%s (%s of KV snapshots)", counts, humanBytes(kvBytes))
}

// models lists what a scan of the models folder finds: each model validated
// by loading it as a reply would (on the backend that would run it), so a
// model listed here opens, and one that would not is a problem saying why.
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
		fmt.Fprintf(r.w, "  %s  (%s %s, %s, %s, context %d, runs on %s, fingerprint %s)\n", f.Path, f.Format, f.Quant, arch,
			humanBytes(f.SizeBytes), f.Config.ContextLen, f.Backend, f.Fingerprint)
	}
	for _, p := range problems {
		r.problems++
		fmt.Fprintf(r.w, "  PROBLEM: %s: %s\n", p.Path, p.Error)
	}
	if len(found) == 0 {
		fmt.Fprintf(r.w, "  (put a .gguf file or a model directory in %s)\n", dir)
	}
}

// humanBytes formats n with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
