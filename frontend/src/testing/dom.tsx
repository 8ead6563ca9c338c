// The DOM side of the component tests, shared by every *.test.tsx: a root to
// render into, ways to let the window settle after an action, and the
// actions themselves (click, type, a key, a submit), each run inside act()
// and followed by a settle so the test reads the window as the user would
// see it next.
//
// Vitest loads this module afresh for each test file, so `root` and the
// settle mode belong to the file that imports them.
import { render, type ComponentChild } from "preact";
import { act } from "preact/test-utils";
import { expect } from "vitest";
import { App } from "../App";
import type { Bridge } from "../bridge";
import type { Theme } from "../types";
import { manualFrames } from "./fake";

/** The element the current test rendered into (set by mount). */
export let root: HTMLElement;

/**
 * How the window settles: "microtasks" runs the pending promise callbacks
 * (enough for the fake bridge, whose answers are promises), "timers" also
 * lets timer callbacks run (FileReader reports through them in jsdom).
 */
let mode: "microtasks" | "timers" = "microtasks";

/** Makes the actions of this test file settle through timers too (see mode). */
export function settleThroughTimers() {
  mode = "timers";
}

/** Lets the window settle: promise callbacks (and timers, see mode) run, in act(). */
export const flush = () =>
  act(async () => {
    if (mode === "timers") {
      for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 0));
    } else {
      for (let i = 0; i < 30; i++) await Promise.resolve();
    }
  });

/** Renders node into a fresh root in the document and lets it settle. */
export async function mountNode(node: ComponentChild) {
  root = document.createElement("div");
  document.body.append(root);
  await act(() => {
    render(node, root);
  });
  await flush();
}

/**
 * Renders the whole window against bridge (animation frames run by hand, the
 * theme the page starts with) and lets it settle. It returns the frames, for
 * the tests that animate a stream.
 */
export async function mountApp(bridge: Bridge, theme: Theme = "system") {
  const frames = manualFrames();
  await mountNode(<App bridge={bridge} frames={frames.frames} theme={theme} />);
  return frames;
}

/** Takes the window down (call it in afterEach). */
export function unmount() {
  render(null, root);
  root.remove();
}

/** The first element under root that matches sel. */
export const q = <T extends Element = HTMLElement>(sel: string) => root.querySelector<T>(sel);
/** The first element with data-testid id. */
export const testid = <T extends Element = HTMLElement>(id: string) => q<T>(`[data-testid="${id}"]`);
/** Every element with data-testid id. */
export const all = <T extends Element = HTMLElement>(id: string) => [
  ...root.querySelectorAll<T>(`[data-testid="${id}"]`),
];

/** Clicks el (which must exist) and lets the window settle. */
export const click = async (el: Element | null | undefined) => {
  expect(el).toBeTruthy();
  await act(() => {
    (el as HTMLElement).click();
  });
  await flush();
};

/** Types value into el (which must exist) as one input event, and lets the window settle. */
export const type = async (el: HTMLInputElement | HTMLTextAreaElement | null, value: string) => {
  expect(el).toBeTruthy();
  await act(() => {
    el!.value = value;
    el!.dispatchEvent(new Event("input", { bubbles: true }));
  });
  await flush();
};

/** Presses a key (a keydown on target) and lets the window settle. */
export const key = async (init: KeyboardEventInit, target: EventTarget = document.body) => {
  await act(() => {
    target.dispatchEvent(new KeyboardEvent("keydown", { bubbles: true, cancelable: true, ...init }));
  });
  await flush();
};

/** Submits the form el (which must exist) and lets the window settle. */
export const submit = async (el: Element | null | undefined) => {
  expect(el).toBeTruthy();
  await act(() => {
    (el as HTMLFormElement).requestSubmit();
  });
  await flush();
};
