package cli

import (
	"context"
	"log/slog"

	"anechat/internal/backends"
	"anechat/internal/kvindex"
	"anechat/internal/sessions"
	"anechat/storage"
)

// openSnapshots opens the KV snapshot index of the data dir (--data-dir >
// $ANECHAT_HOME > the OS default) for a command; its database also keeps the
// measured call costs (Index.DB). With noCache, or when the data dir or
// database cannot be used (logged), it returns nil: prefill from scratch,
// save nothing. The returned func closes the database.
func openSnapshots(ctx context.Context, dataDirFlag string, noCache bool, log *slog.Logger) (*kvindex.Index, func()) {
	if noCache {
		return nil, func() {}
	}
	dir, err := storage.DataDir(dataDirFlag, log)
	if err == nil {
		var x *kvindex.Index
		if x, err = kvindex.Open(ctx, dir, log); err == nil {
			return x, func() { x.Close() }
		}
	}
	log.Warn("kv cache off: the data directory cannot be used", "err", err)
	return nil, func() {}
}

// openSessions returns the manager a command runs its model on, as the app
// and `anechat serve` do (package sessions): models opened on the build's
// backends (a Core ML bundle on the compute units named), and unless
// noCache the data directory's KV snapshots and measured call costs
// (openSnapshots), bound as the app and the API bind them, so each resumes
// from the others' snapshots. The returned func unloads the model and
// closes the database.
func openSessions(ctx context.Context, dataDirFlag string, noCache bool, units string, log *slog.Logger) (*sessions.Manager, func()) {
	run := sessions.New(log, backends.RegistryWith(backends.Options{ComputeUnits: units, Log: log}))
	x, closeCache := openSnapshots(ctx, dataDirFlag, noCache, log)
	if x != nil {
		run.UseStorage(x, x.DB())
	}
	return run, func() {
		run.Close()
		run.UseStorage(nil, nil) // before the database closes
		closeCache()
	}
}

// cliLogger logs warnings (why a snapshot was not used) to stderr.
func cliLogger(env *Env) *slog.Logger {
	return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
