package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/storage"
)

func runChat(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "chat", "[--model PATH] [--system TEXT] [--max-tokens N] [--width K] [--temperature T] [--seed S] [--compute-units U] [--data-dir DIR] [--no-cache]")
	g := addGenFlags(fs, 512)
	system := fs.String("system", "", "system prompt")
	stats := fs.Bool("stats", false, "print per-turn statistics to stderr")
	dataDir := fs.String("data-dir", "", "data directory whose default model chat runs without --model, and whose settings keep the speculative decoder's measured call costs (default $ANECHAT_HOME or the OS default)")
	noCache := fs.Bool("no-cache", false, "neither load nor store the measured call costs in the data directory")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := g.validate(); err != nil {
		return badFlag(env, "chat", err)
	}
	if err := g.useDefaultModel(ctx, *dataDir, cliLogger(env)); err != nil {
		return err
	}
	m, err := openModel(ctx, *g.model, *g.units)
	if err != nil {
		return modelError(*g.model, err)
	}
	defer m.Close()
	codec, ok := m.codec.(chatCodec)
	if !ok {
		return errors.New("chat needs a tokenizer and chat template for the model")
	}
	log := cliLogger(env)
	opts := engine.SessionOptions{Text: m.textStream(), Log: log}
	// As for generate: the data directory's settings keep the measured call
	// costs per model and kernel set, so only the first speculative run
	// measures them (width 1 measures nothing).
	if *g.width != 1 && !*noCache {
		db, err := openSettings(ctx, *dataDir, log)
		if err != nil {
			log.Warn("speculation: measured call costs not kept: the data directory cannot be used", "err", err)
		} else {
			defer db.Close()
			opts.CostStore = db
		}
	}
	s, err := engine.NewSession(m.backend, opts)
	if err != nil {
		return err
	}
	c := &chatLoop{env: env, codec: codec, s: s, gen: g.options(), stats: *stats, system: *system, ctxLen: m.backend.Config().ContextLen}
	c.gen.Stop = codec.stops()
	fmt.Fprintf(env.Stdout, "anechat chat with %s (%s). Type a message; Ctrl-C stops an answer; /reset starts over; /quit, Ctrl-C at the prompt or end of input leaves.\n", *g.model, m.backend.Config().Arch)
	// Ctrl-C is the chat's own: it stops the answer being written (not the
	// chat), or leaves at the prompt. The process-wide handler (main.go)
	// cancels ctx on the same signal, so a turn runs on a context that only
	// an interrupt seen here, or ctx ending for another reason, cancels.
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	// After an interrupt the process-wide handler has fired and no longer
	// ends anything: SIGTERM is watched here too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	defer signal.Stop(terms)
	go func() {
		select {
		case <-terms:
			cancel()
		case <-ctx.Done():
		}
	}()
	return c.run(ctx, env.Stdin, interrupts)
}

// openSettings opens the database of the data directory named by
// --data-dir (storage.DataDir: else $ANECHAT_HOME or the OS default).
func openSettings(ctx context.Context, dataDirFlag string, log *slog.Logger) (*storage.DB, error) {
	dir, err := storage.DataDir(dataDirFlag, log)
	if err != nil {
		return nil, err
	}
	return storage.Open(ctx, storage.DBPath(dir))
}

// isInterrupt reports whether cause is what signal.NotifyContext cancels
// with on os.Interrupt (its error type is not exported; its text is
// documented as describing the signal).
func isInterrupt(cause error) bool {
	return cause != nil && cause.Error() == os.Interrupt.String()+" signal received"
}

// run reads messages from in, one a line, until /quit, the end of in, an
// interrupt at the prompt, or ctx ending for a reason other than an
// interrupt.
func (c *chatLoop) run(ctx context.Context, in io.Reader, interrupts <-chan os.Signal) error {
	// ended is closed when ctx ends other than by an interrupt (SIGTERM,
	// the caller).
	ended := make(chan struct{})
	defer context.AfterFunc(ctx, func() {
		if !isInterrupt(context.Cause(ctx)) {
			close(ended)
		}
	})()
	lines := make(chan string)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()
	base := context.WithoutCancel(ctx)
	for {
		fmt.Fprint(c.env.Stdout, "\n> ")
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(c.env.Stdout)
				return <-readErr
			}
			line = strings.TrimSpace(l)
		case <-interrupts:
			fmt.Fprintln(c.env.Stdout)
			return nil
		case <-ended:
			return ctx.Err()
		}
		switch line {
		case "":
			continue
		case "/quit", "/exit":
			return nil
		case "/reset":
			c.msgs = nil
			c.s.Reset()
			fmt.Fprintln(c.env.Stdout, "(conversation reset)")
			continue
		}
		turnCtx, cancel := context.WithCancel(base)
		turnDone := make(chan struct{})
		go func() {
			select {
			case <-interrupts:
			case <-ended:
			case <-turnDone:
			}
			cancel()
		}()
		err := c.turn(turnCtx, line)
		close(turnDone)
		cancel()
		select {
		case <-ended:
			return ctx.Err()
		default:
		}
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(c.env.Stdout, "\n(stopped)")
			continue
		}
		if errors.Is(err, engine.ErrContextFull) {
			// The conversation outgrew the context: say so and keep the
			// chat open; the message was not added.
			fmt.Fprintf(c.env.Stdout, "(the conversation no longer fits in the model's context of %d tokens: /reset to start over)\n", c.ctxLen)
			continue
		}
		if err != nil {
			return err
		}
	}
}

// chatLoop is the state of an interactive chat: the conversation and the
// session that holds its tokens and KV.
type chatLoop struct {
	env    *Env
	codec  chatCodec
	s      *engine.Session
	gen    engine.GenerateOptions
	system string         // the system prompt ("" for none)
	msgs   []chat.Message // the conversation after the system prompt
	stats  bool
	ctxLen int // the model's context length
}

// turn adds the user's message, prefills what the session does not hold yet
// (Session.Resume: where the rendered history does not extend what the
// session holds, because the answer re-encodes differently, it keeps the
// shared part when it can) and streams the model's answer.
func (c *chatLoop) turn(ctx context.Context, user string) error {
	msgs := append(slices.Clone(c.msgs), chat.Message{Role: chat.RoleUser, Content: user})
	all := msgs
	if c.system != "" {
		all = append([]chat.Message{{Role: chat.RoleSystem, Content: c.system}}, msgs...)
	}
	ids, err := c.codec.render(ctx, all)
	if err != nil {
		return err
	}
	if err := c.s.Resume(ctx, ids, nil); err != nil {
		return err
	}
	var answer strings.Builder
	st, err := c.s.Generate(ctx, c.gen, func(t engine.Token) error {
		answer.WriteString(t.Text)
		_, err := io.WriteString(c.env.Stdout, t.Text)
		return err
	})
	c.msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: strings.TrimSpace(answer.String())})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.env.Stdout)
	if st.Stopped == "context" {
		fmt.Fprintf(c.env.Stdout, "(the answer reached the end of the model's context: /reset to start over)\n")
	}
	if c.stats {
		fmt.Fprintf(c.env.Stderr, "[%d prompt tokens, %d generated (%s), %d calls, %d/%d drafts accepted, ttft %.1f ms, %.1f tok/s%s]\n",
			st.PrefillTokens, st.Tokens, st.Stopped, st.TargetCalls, st.Accepted, st.Drafted, st.TTFTms, st.DecodeTokS, draftNote(st))
	}
	return nil
}

// chatCodec renders conversations with the model's chat template.
type chatCodec interface {
	render(ctx context.Context, msgs []chat.Message) ([]int32, error)
	stops() []int32
	stream() engine.TextStream
}
