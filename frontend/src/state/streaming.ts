// Streaming: sending a message (or an edit, or asking for another reply)
// starts a reply that streams in over the chat events; its pieces are
// applied once per animation frame, so a fast reply re-renders once per
// frame, not once per token.
import {
  frameBatcher,
  streamCleared,
  streamDone,
  streamError,
  streamProgress,
  streamStarted,
  streamTokens,
  titleFrom,
  UNTITLED,
  type Frames,
} from "../logic";
import type { TokenEvent, Turn } from "../types";
import type { Conversations } from "./conversations";
import type { Core } from "./core";

/** The replies' actions and the chat events that carry them. */
export class Streaming {
  constructor(
    private readonly core: Core,
    private readonly conversations: Conversations,
    private readonly frames: Frames,
  ) {}

  /** Listens to the chat events; the last function returned drops the pieces still waiting for a frame. */
  listen(): (() => void)[] {
    const { events } = this.core.api;
    const tokens = frameBatcher<TokenEvent>(this.frames, (es) => {
      this.core.set((s) => ({ streams: streamTokens(s.streams, es) }));
    });
    return [
      events.onToken((e) => {
        tokens.add(e);
      }),
      // The end of a stream comes after its tokens: those still waiting for a frame go first.
      events.onDone((e) => {
        tokens.flushNow();
        this.core.set((s) => ({ streams: streamDone(s.streams, e) }));
        if (e.conversationId === this.core.state.conversations.current) void this.conversations.loadThread();
        void this.conversations.reloadList();
      }),
      events.onError((e) => {
        tokens.flushNow();
        this.core.set((s) => ({ streams: streamError(s.streams, e) }));
      }),
      events.onProgress((e) => {
        this.core.set((s) => ({ streams: streamProgress(s.streams, e) }));
      }),
      () => {
        tokens.stop();
      },
    ];
  }

  private async turn(f: (id: number) => Promise<Turn>): Promise<boolean> {
    const id = this.core.state.conversations.current;
    if (id === null) return false;
    this.core.set((s) => ({ streams: streamCleared(s.streams, id) }));
    const turn = await this.core.attempt("chat", () => f(id));
    if (!turn) return false;
    this.core.set((s) => ({ streams: streamStarted(s.streams, id, turn.user.id) }));
    await this.conversations.loadThread();
    void this.conversations.reloadList(); // the first message titles it
    return true;
  }

  /**
   * Sends text in the open conversation; false if it was refused. The first
   * message titles a conversation still called "New chat" at once (unless
   * the Go side titled it already).
   */
  async send(text: string) {
    const first = this.core.state.conversations.thread?.messages.length === 0;
    const id = this.core.state.conversations.current;
    if (id !== null) await this.conversations.draftSending(id);
    const ok = await this.turn((id) => this.core.api.chat.send(id, text));
    if (ok && id !== null) this.conversations.draftSent(id);
    const c = this.core.state.conversations.thread?.conversation;
    if (ok && first && c && c.title === UNTITLED && titleFrom(text)) await this.conversations.rename(titleFrom(text));
    return ok;
  }

  /** Replaces user message messageId by text, on a new branch. */
  edit(messageId: number, text: string) {
    return this.turn(() => this.core.api.chat.edit(messageId, text));
  }

  /** Asks for another version of reply messageId. */
  regenerate(messageId: number) {
    return this.turn(() => this.core.api.chat.regenerate(messageId));
  }

  /** Stops the open conversation's reply; false if none was running. */
  async stop(): Promise<boolean> {
    const id = this.core.state.conversations.current;
    if (id === null || !this.core.state.streams[id]?.running) return false;
    await this.core.attempt("chat", () => this.core.api.chat.cancel(id));
    return true;
  }
}
