package cli

import (
	"context"
	"log/slog"

	"anechat/engine/kv"
	"anechat/internal/kvindex"
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

// snapshotMeta binds snapshots to the model and to the ids' making: the
// tokenizer's fingerprint (not for --prompt-ids, fed as is) and, for chat
// prompts, the chat template's hash.
func snapshotMeta(m *loadedModel, mode string) kv.Meta {
	meta := kv.Meta{Model: m.backend.Config().Fingerprint, Tokenizer: "none", Template: mode}
	if tc, ok := m.codec.(*tokCodec); ok && mode != "ids" {
		meta.Tokenizer = tc.tok.Fingerprint()
		if mode == "chat" {
			meta.Template = "chat:" + tc.tmpl.Hash()
		}
	}
	return meta
}

// cliLogger logs warnings (why a snapshot was not used) to stderr.
func cliLogger(env *Env) *slog.Logger {
	return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
