#!/usr/bin/env python3
"""A loopback model server for the real-agent tests (host/tests/cli/agents_real.rs).

usage: agent_model.py MODE COMMAND LOG

MODE is the wire format: `responses` (OpenAI Responses API, SSE: Codex), `gemini`
(Gemini `streamGenerateContent?alt=sse` and `generateContent`: Gemini CLI), `chat`
(Chat Completions SSE: Copilot CLI, OpenCode). A request that offers a shell tool and
carries no tool result yet is answered with a call of that tool running COMMAND; every
other request with a final text. Each request is appended to LOG as one JSON line
(`path`, `body`). The first line on stdout is the port it listens on (127.0.0.1).
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, COMMAND, LOG = sys.argv[1], sys.argv[2], sys.argv[3]
LOCK = threading.Lock()
SHELL_TOOLS = ("exec_command", "shell", "run_shell_command", "bash")


def sse(events):
    out = []
    for name, data in events:
        if name:
            out.append("event: %s\n" % name)
        out.append("data: %s\n\n" % (data if isinstance(data, str) else json.dumps(data)))
    return "".join(out).encode()


def tool_names(body):
    names = []
    for tool in body.get("tools") or []:
        names.append(tool.get("name") or (tool.get("function") or {}).get("name"))
        for decl in tool.get("functionDeclarations") or []:
            names.append(decl.get("name"))
    return [n for n in names if n]


def shell_tool(body):
    offered = tool_names(body)
    return next((t for t in SHELL_TOOLS if t in offered), None)


def responses(body):
    """OpenAI Responses API (Codex)."""
    done = any(i.get("type") == "function_call_output" for i in body.get("input") or [] if isinstance(i, dict))
    tool = shell_tool(body)
    if tool and not done:
        args = {"cmd": COMMAND} if tool == "exec_command" else {"command": COMMAND}
        if tool == "shell":
            args = {"command": ["bash", "-lc", COMMAND]}
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": tool,
                "arguments": json.dumps(args)}
    else:
        item = {"type": "message", "role": "assistant", "id": "msg_1",
                "content": [{"type": "output_text", "text": "done", "annotations": []}]}
    usage = {"input_tokens": 1, "input_tokens_details": None, "output_tokens": 1,
             "output_tokens_details": None, "total_tokens": 2}
    return "text/event-stream", sse([
        ("response.created", {"type": "response.created", "response": {"id": "resp_1"}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": {"id": "resp_1", "usage": usage}}),
    ])


def gemini(path, body):
    """Gemini API (Gemini CLI)."""
    if ":countTokens" in path:
        return "application/json", json.dumps({"totalTokens": 1}).encode()
    contents = body.get("contents") or []
    done = any("functionResponse" in p for c in contents for p in c.get("parts") or [])
    tool = shell_tool(body)
    if tool and not done:
        part = {"functionCall": {"name": tool, "args": {"command": COMMAND}}}
    else:
        part = {"text": "done"}
    reply = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}}
    if "alt=sse" in path:
        return "text/event-stream", sse([(None, reply)])
    if not tool:
        # A side call (a JSON answer the CLI asks for): a neutral object.
        reply["candidates"][0]["content"]["parts"] = [{"text": "{}"}]
    return "application/json", json.dumps(reply).encode()


def chat(body):
    """Chat Completions (Copilot CLI, OpenCode)."""
    done = any(m.get("role") == "tool" for m in body.get("messages") or [])
    tool = shell_tool(body)
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model", "m")}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    if tool and not done:
        call = {"index": 0, "id": "call_1", "type": "function",
                "function": {"name": tool, "arguments": json.dumps({"command": COMMAND, "description": "run it"})}}
        chunks = [dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}, "finish_reason": None}]),
                  dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], usage=usage)]
    else:
        chunks = [dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": "done"}, "finish_reason": None}]),
                  dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}], usage=usage)]
    if body.get("stream") is False:
        message = {"role": "assistant", "content": "done"}
        return "application/json", json.dumps({"id": "c1", "object": "chat.completion", "created": 0,
            "model": base["model"], "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage}).encode()
    return "text/event-stream", sse([(None, c) for c in chunks] + [(None, "[DONE]")])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, kind, data):
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        # Model lists and the like: an empty list.
        self.answer(200, "application/json", b'{"data": [], "models": []}')

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        with LOCK, open(LOG, "a") as log:
            log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        if MODE == "responses":
            kind, data = responses(body)
        elif MODE == "gemini":
            kind, data = gemini(self.path, body)
        else:
            kind, data = chat(body)
        self.answer(200, kind, data)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
