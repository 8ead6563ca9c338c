"""Drives a running `anechat serve` with the official openai Python client's
function calling. cli/serve_clients_test.go serves stories260K with Qwen
2.5's chat template and runs this script with the venv that
build/scripts/deps-openai.sh installs:

    python openai_tools.py BASE_URL TOKEN

stories260K knows nothing of tools: tool_choice "required" makes it call one
(constrained decoding). It prints one JSON object of what the client saw;
the Go test checks it.
"""

import json
import sys

from openai import OpenAI

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
                   "required": ["city"], "additionalProperties": False}}}


def calls_of(message):
    return [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]


def main():
    base, token = sys.argv[1:3]
    client = OpenAI(base_url=base, api_key=token, max_retries=0)
    model = client.models.list().data[0].id
    msgs = [{"role": "user", "content": "Once upon a time"}]
    args = dict(model=model, tools=[WEATHER], temperature=0, max_tokens=200)
    out = {}

    r = client.chat.completions.create(messages=msgs, tool_choice="required", **args)
    m = r.choices[0].message
    out["call"] = {"calls": calls_of(m), "finish": r.choices[0].finish_reason, "prompt": r.usage.prompt_tokens}

    # The tool's result goes back with the assistant's message as the client
    # returned it; the model answers in text.
    history = msgs + [m.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": json.dumps({"sky": "sunny"})}]
    r2 = client.chat.completions.create(messages=history, **args)
    out["answer"] = {"content": r2.choices[0].message.content, "calls": calls_of(r2.choices[0].message),
                     "finish": r2.choices[0].finish_reason, "prompt": r2.usage.prompt_tokens}

    # Streamed: the client's stream helper reassembles the delta.tool_calls.
    named = {"type": "function", "function": {"name": "get_weather"}}
    with client.chat.completions.stream(messages=msgs, tool_choice=named, **args) as s:
        content = "".join(e.delta for e in s if e.type == "content.delta")
        final = s.get_final_completion()
    out["stream"] = {"content": content, "calls": calls_of(final.choices[0].message),
                     "finish": final.choices[0].finish_reason}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
