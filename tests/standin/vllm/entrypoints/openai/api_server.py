"""A stand-in for vLLM's OpenAI server (no GPU here): same module path, flags, health and chat routes.

It records what it was given - its command line (argv.json) and every chat request body
(requests.jsonl) - under STANDIN_RECORD, so a test checks what perseval sent, not what this echoes.
Every chat answer is the same fixed JSON. It fails at start-up when STANDIN_FAIL is set.
"""
import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--model")
ap.add_argument("--host")
ap.add_argument("--port", type=int)
ap.add_argument("--served-model-name")
args, _ = ap.parse_known_args()
RECORD = os.environ.get("STANDIN_RECORD")
if RECORD:
    with open(os.path.join(RECORD, "argv.json"), "w") as fh:
        json.dump(sys.argv[1:], fh)

if os.environ.get("STANDIN_FAIL"):
    print("RuntimeError: CUDA out of memory (stand-in failure)", flush=True)
    sys.exit(3)
time.sleep(float(os.environ.get("STANDIN_DELAY", "0.5")))  # health must be polled, not assumed


class Handler(BaseHTTPRequestHandler):
    def _json(self, obj, code=200):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self._json({})
        elif self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": args.served_model_name, "object": "model"}]})
        else:
            self._json({"error": "not found"}, 404)

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        req = json.loads(body)
        if RECORD:
            with open(os.path.join(RECORD, "requests.jsonl"), "ab") as fh:
                fh.write(body + b"\n")
        self._json({"id": "x", "object": "chat.completion", "created": 0, "model": req["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": '{"verdict": true}'}}],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})

    def log_message(self, *a):
        pass


print(f"serving {args.model} as {args.served_model_name} on {args.host}:{args.port}", flush=True)
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
