#!/usr/bin/env python3
"""An OpenAI-compatible chat endpoint on 127.0.0.1 that answers every request after
a fixed delay, for measuring how a stage's schedule behaves when each model call
waits on a remote model (the wall time is then the number of calls in a row times
the delay, whatever the machine). Not a model: the answers are canned. A Play2Prompt
tool-play prompt gets empty arguments (so every play fails and is retried, as the
1.5B embedded model's did on BFCL's `names` setting), a critique says "ok", any other
editor prompt gets a short text, and an agent request gets a plain answer with no
tool call.

  python3 scripts/latency-server.py --port 8931 --delay 1.0 &
  OTB_LLM_BASE_URL=http://127.0.0.1:8931/v1 OTB_LLM_API_KEY=x otb run EXP
  (EXP's models: openai:<any name>)
"""
import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer(body):
    msgs = body.get("messages", [])
    last = next((m.get("content") or "" for m in reversed(msgs) if m.get("role") == "user"), "")
    if isinstance(last, list):
        last = " ".join(p.get("text", "") for p in last if isinstance(p, dict))
    if body.get("tools"):
        return "I cannot tell which call to make."
    if last.startswith("You are testing a tool"):
        return '{"arguments": {}}'
    if last.startswith("A tool was called"):
        return '{"status": "ok", "reflection": "it needs its arguments"}'
    return '{"description": "a tool", "query": "q", "answer": "a", "score": 1, "feedback": "f"}'


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay = 1.0

    def log_message(self, *args):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        time.sleep(self.delay)
        text = answer(body)
        out = json.dumps({
            "id": "chatcmpl-latency",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "latency"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8931)
    ap.add_argument("--delay", type=float, default=1.0, help="seconds per request")
    a = ap.parse_args()
    Handler.delay = a.delay
    ThreadingHTTPServer(("127.0.0.1", a.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
