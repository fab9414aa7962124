#!/usr/bin/env python3
"""A stand-in for an LLM engine: the OpenAI chat completions API as vLLM,
TGI and llama.cpp server serve it, for tests and benchmarks that cannot run
a real model here.

It streams exactly what the API documents for "stream": true: server-sent
events, each "data: " followed by a chat.completion.chunk object (the
first carrying the assistant role, then one piece of content per chunk,
then one with the finish reason and an empty delta), a usage chunk with
empty choices when stream_options.include_usage is set, and "data: [DONE]".
Without "stream" it answers one chat.completion object. Errors are the
API's error bodies ({"error": {"message", "type", "param", "code"}}).

What it writes is deterministic, so tests can check that the answer is
grounded: "From [1]: " and the first "Answer: " line of the user message,
split into pieces of one word each.

The model name picks the behaviour (several may be joined with '+'):
  any name               a normal answer
  slow-first-token-MS    waits MS milliseconds before the first piece
  token-delay-MS         waits MS milliseconds before every piece
  total-MS               spreads MS milliseconds over the pieces (a slow model)
  stall-after-N          sends N pieces, then nothing (the connection stays open)
  reset-after-N          sends N pieces, then resets the connection (TCP RST)
  malformed-after-N      sends N pieces, then a chunk that is not JSON
  error-after-N          sends N pieces, then an error object in the stream
  status-429             429 with Retry-After: 1 and the rate-limit error body
  status-500             500 with a server_error body
  status-400             400 with an invalid_request_error body
  no-usage               leaves the usage chunk out even when asked for it

GET /stats answers {"requests": N, "by_model": {...}} (N counts chat
requests); POST /stats:reset zeroes it. It prints "listening PORT" once
ready. Run with --help for the options.
"""

import argparse
import json
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATS_LOCK = threading.Lock()
STATS = {"requests": 0, "by_model": {}}


def behaviour_of(model):
    """The fault settings a model name asks for."""
    b = {"slow_first_token_ms": 0, "token_delay_ms": 0, "total_ms": 0, "stall_after": None,
         "reset_after": None, "malformed_after": None, "error_after": None, "status": 200, "usage": True}
    for part in model.split("+"):
        for prefix, key in (("slow-first-token-", "slow_first_token_ms"), ("token-delay-", "token_delay_ms"),
                            ("total-", "total_ms"), ("stall-after-", "stall_after"), ("reset-after-", "reset_after"),
                            ("malformed-after-", "malformed_after"), ("error-after-", "error_after"),
                            ("status-", "status")):
            if part.startswith(prefix) and part[len(prefix):].isdigit():
                b[key] = int(part[len(prefix):])
        if part == "no-usage":
            b["usage"] = False
    return b


def grounded_reply(messages):
    """The answer: the first source's answer, as a generation would use it."""
    user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
    source = ""
    for line in str(user).splitlines():
        if line.startswith("Answer: "):
            source = line[len("Answer: "):]
            break
    text = "From [1]: " + source if source else "I do not know."
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def count_tokens(text):
    return max(1, len(text.split()))


def error_body(message, kind, code=None):
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "chat-completions-test/1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("chat-server: " + (fmt % args) + "\n")

    def send_json(self, status, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/stats":
            with STATS_LOCK:
                body = json.dumps(STATS).encode()
            self.send_json(200, body)
        elif self.path == "/v1/models":
            self.send_json(200, json.dumps({"object": "list", "data": [
                {"id": "test-model", "object": "model", "created": 0, "owned_by": "rapidqa-tests"}]}).encode())
        else:
            self.send_json(404, error_body("no route " + self.path, "invalid_request_error"))

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length > 0 else b""
        if self.path == "/stats:reset":
            with STATS_LOCK:
                STATS["requests"] = 0
                STATS["by_model"] = {}
            self.send_json(200, b"{}")
            return
        if self.path != "/v1/chat/completions":
            self.send_json(404, error_body("no route " + self.path, "invalid_request_error"))
            return
        auth = self.server.token
        if auth and self.headers.get("Authorization", "") != "Bearer " + auth:
            self.send_json(401, error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"))
            return
        try:
            request = json.loads(raw)
            model = request["model"]
            messages = request["messages"]
            if not isinstance(model, str) or not isinstance(messages, list) or not messages:
                raise ValueError("model must be a string and messages a non-empty list")
        except (ValueError, KeyError, TypeError) as e:
            self.send_json(400, error_body("invalid request: %s" % e, "invalid_request_error"))
            return
        with STATS_LOCK:
            STATS["requests"] += 1
            STATS["by_model"][model] = STATS["by_model"].get(model, 0) + 1
        b = behaviour_of(model)
        if b["status"] == 429:
            self.send_json(429, error_body("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
                           [("Retry-After", "1")])
            return
        if b["status"] == 400:
            self.send_json(400, error_body("This model's maximum context length is exceeded.",
                                           "invalid_request_error", "context_length_exceeded"))
            return
        if b["status"] >= 500:
            self.send_json(b["status"], error_body("The server had an error while processing your request.",
                                                   "server_error"))
            return
        pieces = grounded_reply(messages)
        max_tokens = request.get("max_tokens")
        finish = "stop"
        if isinstance(max_tokens, int) and 0 < max_tokens < len(pieces):
            pieces = pieces[:max_tokens]
            finish = "length"
        prompt_tokens = sum(count_tokens(str(m.get("content", ""))) for m in messages)
        created = int(time.time())
        completion_id = "chatcmpl-%d" % (STATS["requests"])
        if not request.get("stream"):
            time.sleep((b["slow_first_token_ms"] + b["total_ms"]) / 1000.0)
            text = "".join(pieces)
            self.send_json(200, json.dumps({
                "id": completion_id, "object": "chat.completion", "created": created, "model": model,
                "system_fingerprint": "fp_rapidqa_test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                             "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces),
                          "total_tokens": prompt_tokens + len(pieces)}}).encode())
            return
        include_usage = bool((request.get("stream_options") or {}).get("include_usage")) and b["usage"]
        self.stream(b, model, completion_id, created, pieces, finish, prompt_tokens, include_usage)

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, obj):
        self.write_chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

    def stream(self, b, model, completion_id, created, pieces, finish, prompt_tokens, include_usage):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(delta, finish_reason=None):
            c = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                 "system_fingerprint": "fp_rapidqa_test",
                 "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
            if include_usage:
                c["usage"] = None
            return c

        try:
            self.event(chunk({"role": "assistant", "content": ""}))
            per_piece = b["total_ms"] / 1000.0 / max(1, len(pieces))
            for i, piece in enumerate(pieces):
                if i == b["stall_after"]:
                    # Silent, with the connection open, until the client leaves.
                    self.connection.settimeout(None)
                    while self.connection.recv(1):
                        pass
                    return
                if i == b["reset_after"]:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                if i == b["malformed_after"]:
                    self.write_chunk(b'data: {"id":"' + completion_id.encode() + b'","choices":[{"delta":\n\n')
                    self.write_chunk(b"data: [DONE]\n\n")
                    self.write_chunk(b"")
                    return
                if i == b["error_after"]:
                    self.event({"error": {"message": "The engine ran out of memory.", "type": "server_error",
                                          "param": None, "code": None}})
                    self.write_chunk(b"data: [DONE]\n\n")
                    self.write_chunk(b"")
                    return
                delay = per_piece + b["token_delay_ms"] / 1000.0 + (b["slow_first_token_ms"] / 1000.0 if i == 0 else 0)
                if delay > 0:
                    time.sleep(delay)
                self.event(chunk({"content": piece}))
            self.event(chunk({}, finish))
            if include_usage:
                self.event({"id": completion_id, "object": "chat.completion.chunk", "created": created,
                            "model": model, "system_fingerprint": "fp_rapidqa_test", "choices": [],
                            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces),
                                      "total_tokens": prompt_tokens + len(pieces)}})
            self.write_chunk(b"data: [DONE]\n\n")
            self.write_chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True


def main():
    parser = argparse.ArgumentParser(description="A test stand-in for an OpenAI-compatible chat completions "
                                     "engine; the model name picks faults (see the file's opening comment).")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--token", default="", help="require 'Authorization: Bearer TOKEN'")
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    args = parser.parse_args()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

        def handle_error(self, request, client_address):
            # Clients that hang up (timeouts, resets) are part of the tests.
            if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", args.port), Handler)
    server.token = args.token
    server.verbose = args.verbose
    print("listening %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
