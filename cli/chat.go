package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"anechat/engine"
	"anechat/engine/chat"
)

func runChat(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "chat", "--model PATH [--system TEXT] [--max-tokens N] [--width K] [--temperature T] [--seed S]")
	g := addGenFlags(fs, 512)
	system := fs.String("system", "", "system prompt")
	stats := fs.Bool("stats", false, "print per-turn statistics to stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *g.model == "" {
		fmt.Fprintln(env.Stderr, "chat needs --model")
		fs.Usage()
		return errUsage
	}
	if err := g.validate(); err != nil {
		return badFlag(env, "chat", err)
	}
	m, err := openModel(*g.model)
	if err != nil {
		return modelError(*g.model, err)
	}
	defer m.Close()
	codec, ok := m.codec.(chatCodec)
	if !ok {
		return errors.New("chat needs a tokenizer and chat template for the model")
	}
	s, err := engine.NewSession(m.backend, engine.SessionOptions{Text: m.textStream(), Decoder: g.decoder()})
	if err != nil {
		return err
	}
	c := &chatLoop{env: env, codec: codec, s: s, gen: g.options(), stats: *stats}
	if *system != "" {
		c.msgs = append(c.msgs, chat.Message{Role: chat.RoleSystem, Content: *system})
	}
	c.gen.Stop = codec.stops()
	fmt.Fprintf(env.Stdout, "anechat chat with %s (%s). Type a message; /reset starts over, /quit or end of input leaves.\n", *g.model, m.backend.Config().Arch)
	in := bufio.NewScanner(env.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for {
		fmt.Fprint(env.Stdout, "\n> ")
		if !in.Scan() {
			fmt.Fprintln(env.Stdout)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch line {
		case "":
			continue
		case "/quit", "/exit":
			return nil
		case "/reset":
			c.msgs = c.msgs[:0]
			if *system != "" {
				c.msgs = append(c.msgs, chat.Message{Role: chat.RoleSystem, Content: *system})
			}
			s.Reset()
			fmt.Fprintln(env.Stdout, "(conversation reset)")
			continue
		}
		// Ctrl-C stops the answer, not the chat.
		turnCtx, stop := interruptible(ctx)
		err := c.turn(turnCtx, line)
		stop()
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			fmt.Fprintln(env.Stdout, "\n(stopped)")
			continue
		}
		if errors.Is(err, engine.ErrContextFull) {
			// The conversation outgrew the context: say so and keep the
			// chat open; the message was not added.
			fmt.Fprintf(env.Stdout, "(the conversation no longer fits in the model's context of %d tokens: /reset to start over)\n", m.backend.Config().ContextLen)
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
	env   *Env
	codec chatCodec
	s     *engine.Session
	gen   engine.GenerateOptions
	msgs  []chat.Message
	stats bool
}

// turn adds the user's message, prefills what the session does not hold yet
// and streams the model's answer.
func (c *chatLoop) turn(ctx context.Context, user string) error {
	msgs := append(slices.Clone(c.msgs), chat.Message{Role: chat.RoleUser, Content: user})
	ids, err := c.codec.render(msgs)
	if err != nil {
		return err
	}
	have := c.s.Tokens()
	if len(have) > len(ids) || !slices.Equal(have, ids[:len(have)]) {
		// The rendered history does not extend what the session holds (the
		// answer re-encodes differently): start the sequence over.
		c.s.Reset()
		have = nil
	}
	if err := c.s.Prefill(ctx, ids[len(have):], nil); err != nil {
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
		fmt.Fprintf(c.env.Stderr, "[%d prompt tokens, %d generated (%s), %d calls, %d/%d drafts accepted, ttft %.1f ms, %.1f tok/s]\n",
			st.PrefillTokens, st.Tokens, st.Stopped, st.TargetCalls, st.Accepted, st.Drafted, st.TTFTms, st.DecodeTokS)
	}
	return nil
}

// chatCodec renders conversations with the model's chat template.
type chatCodec interface {
	render(msgs []chat.Message) ([]int32, error)
	stops() []int32
	stream() engine.TextStream
}
