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
import type { Attachment, TokenEvent, Turn } from "../types";
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
  async send(text: string, title = text) {
    const first = this.core.state.conversations.thread?.messages.length === 0;
    const id = this.core.state.conversations.current;
    if (id !== null) await this.conversations.draftSending(id);
    const ok = await this.turn((id) => this.core.api.chat.send(id, text));
    if (ok && id !== null) this.conversations.draftSent(id);
    const c = this.core.state.conversations.thread?.conversation;
    if (ok && first && c && c.title === UNTITLED && titleFrom(title)) await this.conversations.rename(titleFrom(title));
    return ok;
  }

  /**
   * Reads file for the open conversation's next message: the Go side
   * extracts its text (a PDF's too) and sizes it with the conversation's
   * model; a refusal (past the context, not text, a damaged PDF) is the
   * chat page's notice and the result is undefined.
   */
  async attach(file: File): Promise<Attachment | undefined> {
    const id = this.core.state.conversations.current;
    if (id === null) return undefined;
    return this.core.attempt("chat", async () =>
      this.core.api.chat.attachDocument(id, file.name, await fileBase64(file)),
    );
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

/** The bytes of file, base64 (how the Go side takes them). */
function fileBase64(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => {
      const url = typeof r.result === "string" ? r.result : "";
      resolve(url.slice(url.indexOf(",") + 1)); // after "data:...;base64,"
    };
    r.onerror = () => reject(new Error(`${file.name}: the file could not be read`));
    r.readAsDataURL(file);
  });
}

/**
 * The message that carries attachments: each document's block, then the
 * question, as Go documents.Format puts one document and a question.
 */
export function withDocuments(blocks: string[], question: string): string {
  const q = question.trim();
  return blocks.join("\n") + (q ? "\n" + q : "");
}
