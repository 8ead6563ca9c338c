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
	"anechat/internal/sessions"
)

func runChat(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "chat", "[--model PATH] [--system TEXT] [--max-tokens N] [--width K] [--temperature T] [--seed S] [--compute-units U] [--data-dir DIR] [--no-cache] [--stats]")
	g := addGenFlags(fs, 512)
	system := fs.String("system", "", "system prompt")
	stats := fs.Bool("stats", false, "print per-turn statistics to stderr")
	dataDir := fs.String("data-dir", "", "data directory whose default model chat runs without --model, and which keeps the KV snapshots and the speculative decoder's measured call costs (default $ANECHAT_HOME or the OS default)")
	noCache := noCacheFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := g.validate(); err != nil {
		return badFlag(env, "chat", err)
	}
	if err := g.useDefaultModel(ctx, *dataDir, cliLogger(env)); err != nil {
		return err
	}
	log := cliLogger(env)
	// As for generate: the data directory keeps the KV snapshots (each
	// answered turn's, which generate, the app and the API resume from too)
	// and the measured call costs per model and kernel set, so only the
	// first speculative run measures them.
	run, closeRun := openSessions(ctx, *dataDir, *noCache, *g.units, log)
	defer closeRun()
	var arch string
	var ctxLen int
	if err := run.Do(ctx, *g.model, func(m *sessions.Model) error {
		arch, ctxLen = m.Backend().Config().Arch, m.Backend().Config().ContextLen
		return nil
	}); err != nil {
		return modelError(*g.model, err)
	}
	c := &chatLoop{env: env, mgr: run, path: *g.model, log: log, gen: g.options(), stats: *stats, system: *system, ctxLen: ctxLen}
	fmt.Fprintf(env.Stdout, "anechat chat with %s (%s). Type a message; Ctrl-C stops an answer; /reset starts over; /quit, Ctrl-C at the prompt or end of input leaves.\n", *g.model, arch)
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
			if err := c.reset(ctx); err != nil {
				return err
			}
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

// chatLoop is the state of an interactive chat: the conversation, and the
// manager whose chat session holds its tokens and KV.
type chatLoop struct {
	env    *Env
	mgr    *sessions.Manager
	path   string // the model
	log    *slog.Logger
	gen    engine.GenerateOptions
	system string         // the system prompt ("" for none)
	msgs   []chat.Message // the conversation after the system prompt
	stats  bool
	ctxLen int // the model's context length
}

// reset starts the conversation over: the chat session forgets its tokens.
func (c *chatLoop) reset(ctx context.Context) error {
	return c.mgr.Do(ctx, c.path, func(m *sessions.Model) error {
		s, err := m.Session(sessions.Chat)
		if err == nil {
			s.Reset()
		}
		return err
	})
}

// turn adds the user's message and answers it as the app and the API do
// (sessions.Model.Reply): it prefills what the session does not hold yet
// (where the rendered history does not extend it, because the answer
// re-encodes differently, it keeps the shared part when it can, else
// resumes from the longest stored snapshot), streams the model's answer,
// and stores the turn's snapshot.
func (c *chatLoop) turn(ctx context.Context, user string) error {
	msgs := append(slices.Clone(c.msgs), chat.Message{Role: chat.RoleUser, Content: user})
	all := msgs
	if c.system != "" {
		all = append([]chat.Message{{Role: chat.RoleSystem, Content: c.system}}, msgs...)
	}
	var answer strings.Builder
	var st engine.Stats
	err := c.mgr.Do(ctx, c.path, func(m *sessions.Model) error {
		ids, err := m.Render(ctx, all)
		if err != nil {
			return err
		}
		learn := make([]string, len(all))
		for i, cm := range all {
			learn[i] = cm.Content
		}
		st, err = m.Reply(ctx, sessions.Request{Mode: sessions.Chat, Prompt: ids, Learn: learn, Options: c.gen,
			Emit: func(t engine.Token) error {
				answer.WriteString(t.Text)
				_, err := io.WriteString(c.env.Stdout, t.Text)
				return err
			}})
		// An answer cut short is kept (its text was shown); a prompt that
		// failed before any text leaves the conversation as it was.
		if answer.Len() > 0 || err == nil {
			c.msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: strings.TrimSpace(answer.String())})
		}
		if err != nil {
			return err
		}
		// A failed save only costs a prefill next time.
		if s, err := m.Session(sessions.Chat); err == nil {
			if _, err := s.SaveRun(context.WithoutCancel(ctx)); err != nil {
				c.log.Warn("kv snapshot not saved", "err", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.env.Stdout)
	if st.Stopped == "context" {
		fmt.Fprintf(c.env.Stdout, "(the answer reached the end of the model's context: /reset to start over)\n")
	}
	if c.stats {
		fmt.Fprintf(c.env.Stderr, "[%d prompt tokens, %d generated (%s), %d calls, drafted %d, accepted %d, ttft %.1f ms, %.1f tok/s%s]\n",
			st.PrefillTokens, st.Tokens, st.Stopped, st.TargetCalls, st.Drafted, st.Accepted, st.TTFTms, st.DecodeTokS, draftNote(st))
	}
	return nil
}
