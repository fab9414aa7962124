#!/usr/bin/env python3
"""rapidqa-server driven by clients written by others: curl (HTTP/1.1,
HTTP/2 with prior knowledge, h2 over TLS by ALPN), nghttp (HTTP/2 frames),
Python websockets, and raw sockets for what no polite client does (slow
clients, oversized headers, half-written requests).

    server_protocols_test.py CASE     # one case, as ctest runs them
    server_protocols_test.py --list   # the cases

Environment: RAPIDQA_SERVER (the binary), RAPIDQA_FAQ (the bundled FAQ),
RAPIDQA_TEST_WORK (a folder for certificates and logs).
"""
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SERVER = os.environ.get("RAPIDQA_SERVER", "build/examples/rapidqa-server")
FAQ = os.environ.get("RAPIDQA_FAQ", "examples/data/faq.jsonl")
BASE = os.environ.get("RAPIDQA_TEST_WORK", tempfile.gettempdir())
os.makedirs(BASE, exist_ok=True)
WORK = tempfile.mkdtemp(prefix="server-test-", dir=BASE)  # this run's own: cases run in parallel
TOKEN = "server-test-token-0123456789"
QUESTION = "How do I reset my password?"


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Server:
    """A rapidqa-server on free loopback ports, stopped (and its exit code
    kept) when the block ends."""

    def __init__(self, *args, tls=False, env=None, certificate=None):
        self.args = list(args)
        self.tls = tls or certificate is not None
        self.certificate = certificate  # (cert, key) to reuse across restarts
        self.env = env
        self.stderr_path = None

    def __enter__(self):
        work = tempfile.mkdtemp(prefix="server-", dir=WORK)
        self.work = work
        token_file = os.path.join(work, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        args = [SERVER, "--port", "0", "--token-file", token_file, "--access-log", os.path.join(work, "access.log")]
        if self.tls:
            self.cert, self.key = self.certificate or make_certificate(work)
            args += ["--tls-cert", self.cert, "--tls-key", self.key]
        else:
            args += ["--plain"]
        args += ["--h2-port", "0"]
        self.stderr_path = os.path.join(work, "stderr.log")
        self.stderr = open(self.stderr_path, "w")
        self.process = subprocess.Popen(args + self.args, stderr=self.stderr, stdout=subprocess.DEVNULL,
                                        env=self.env)
        self.port = self.h2_port = self.grpc_port = None
        deadline = time.time() + 30
        while time.time() < deadline:
            text = self.log()
            ports = re.findall(r"listening on (?:https?://)?[^:]+:(\d+) \(([^)]*)\)", text)
            for port, what in ports:
                if what.startswith("gRPC"):
                    self.grpc_port = int(port)
                elif what.startswith("HTTP/2"):
                    self.h2_port = int(port)
                else:
                    self.port = int(port)
            if self.port and self.h2_port and "ready:" in text:
                return self
            if self.process.poll() is not None:
                raise Failure("the server exited at start: " + text)
            time.sleep(0.05)
        raise Failure("the server did not get ready: " + self.log())

    def log(self):
        with open(self.stderr_path) as f:
            return f.read()

    def access_log(self):
        path = os.path.join(self.work, "access.log")
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def url(self, path, h2=False):
        scheme = "https" if self.tls else "http"
        return "%s://127.0.0.1:%d%s" % (scheme, self.h2_port if h2 else self.port, path)

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise Failure("the server did not stop within %ds after %s" % (timeout, sig))

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


def make_certificate(work, name="cert"):
    cert = os.path.join(work, name + ".pem")
    key = os.path.join(work, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=" + name,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:" + name], check=True, capture_output=True)
    return cert, key


CHAT_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "chat_completions_server.py")


class ChatEngine:
    """The stand-in LLM engine (tests/support/chat_completions_server.py)
    on a free loopback port, or on a given one to come back after kill()."""

    def __init__(self, port=0):
        self.wanted_port = port

    def __enter__(self):
        self.process = subprocess.Popen([sys.executable, CHAT_SERVER, "--port", str(self.wanted_port)],
                                        stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        check(line.startswith("listening "), "the chat engine did not start: %r" % line)
        self.port = int(line.split()[1])
        self.url = "http://127.0.0.1:%d" % self.port
        return self

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def __exit__(self, *exc):
        self.kill()
        self.process.stdout.close()


def server_sent_events(text):
    """[(event, data as JSON)] of an event stream."""
    events = []
    for block in text.split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[len("event:"):].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:"):].lstrip(" "))
        if data:
            events.append((name, json.loads("\n".join(data))))
    return events


def curl(*args, data=None, timeout=20):
    """(status, headers dict, body) of one request made by curl."""
    command = ["curl", "-sS", "-k", "-D", "-", "--max-time", str(timeout)] + list(args)
    if data is not None:
        command += ["--data-binary", "@-"]
    result = subprocess.run(command, input=data.encode() if isinstance(data, str) else data, capture_output=True)
    check(result.returncode == 0, "curl %s failed (%d): %s" % (args, result.returncode, result.stderr.decode()))
    raw = result.stdout.decode("utf-8", "replace")
    # Skip interim responses (101 from an h2c upgrade, 100 Continue).
    while True:
        head, _, rest = raw.partition("\r\n\r\n")
        status_line = head.split("\r\n")[0]
        status = int(status_line.split()[1])
        if status >= 200:
            break
        raw = rest
    headers = {}
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, rest


def body_file(text):
    """A request body in a file of this run's folder (h2load reads bodies from files)."""
    path = os.path.join(WORK, "body-%d.json" % (abs(hash(text)) % 10**8))
    with open(path, "w") as f:
        f.write(text)
    return path


def ask_body(question=QUESTION, **options):
    options["question"] = question
    return json.dumps(options)


# ---------------------------------------------------------------- cases

def case_http1_keepalive_and_http2_prior_knowledge():
    with Server() as s:
        # Two requests on one HTTP/1.1 connection (curl reuses it).
        result = subprocess.run(["curl", "-sS", "--http1.1", "-w", "%{num_connects}\\n", "-o", "/dev/null",
                                 s.url("/healthz"), "-o", "/dev/null", s.url("/healthz")],
                                capture_output=True, text=True)
        check(result.stdout.split() == ["1", "0"], "HTTP/1.1 keep-alive: connections made %r" % result.stdout)
        for h2, flag in ((False, "--http1.1"), (True, "--http2-prior-knowledge")):
            status, headers, body = curl(flag, s.url("/v1/ask", h2=h2), "-H", "x-request-id: rid-" + flag,
                                         data=ask_body())
            check(status == 200, "%s: status %d %s" % (flag, status, body))
            answer = json.loads(body)
            check(answer["entry_id"] == "shop-en-reset-password", "%s: %s" % (flag, body))
            check(headers.get("content-type") == "application/json", str(headers))
        # Many requests with bodies at once on one HTTP/2 connection.
        result = subprocess.run(["h2load", "-n", "500", "-c", "2", "-m", "32", "-d", body_file(ask_body()),
                                 s.url("/v1/ask", h2=True)], capture_output=True, text=True, timeout=60)
        check("500 succeeded" in result.stdout, "multiplexed h2c: %s" % result.stdout[-400:])
        # The h2c upgrade from HTTP/1.1 on the main port works too.
        status, _, body = curl("--http2", s.url("/readyz"))
        check(status == 200 and json.loads(body)["status"] == "ready", body)
        protocols = {line["protocol"] for line in s.access_log()}
        check({"HTTP/1.1", "HTTP/2"} <= protocols, "access log protocols %s" % protocols)
        check(s.stop() == 0, "exit code")


def case_tls_h2_and_http1_by_alpn():
    with Server(tls=True) as s:
        result = subprocess.run(["curl", "-sS", "-k", "--http2", "-o", "/dev/null", "-w", "%{http_version}",
                                 s.url("/healthz", h2=True)], capture_output=True, text=True)
        check(result.stdout == "2", "ALPN h2: http_version %r %s" % (result.stdout, result.stderr))
        result = subprocess.run(["curl", "-sS", "-k", "--http2", "-o", "/dev/null", "-w", "%{http_version}",
                                 s.url("/healthz")], capture_output=True, text=True)
        check(result.stdout == "1.1", "the main port offers ALPN http/1.1: %r" % result.stdout)
        status, _, body = curl("--http2", s.url("/v1/ask", h2=True), data=ask_body())
        check(status == 200 and json.loads(body)["entry_id"] == "shop-en-reset-password", body)
        # Several requests with bodies at once on one TLS connection.
        result = subprocess.run(["h2load", "-n", "200", "-c", "1", "-m", "16", "-d", body_file(ask_body()),
                                 s.url("/v1/ask", h2=True)], capture_output=True, text=True, timeout=60)
        check("200 succeeded" in result.stdout, "multiplexed h2 over TLS: %s" % result.stdout[-400:])
        # A client that cannot speak HTTP/2 is refused at the handshake on the HTTP/2 port.
        result = subprocess.run(["curl", "-sS", "-k", "--http1.1", s.url("/healthz", h2=True)], capture_output=True)
        check(result.returncode != 0, "HTTP/1.1 was served on the HTTP/2 port")
        # Plain HTTP to the TLS port gets nothing served.
        plain = subprocess.run(["curl", "-sS", "--max-time", "5", "http://127.0.0.1:%d/healthz" % s.port],
                               capture_output=True)
        check(plain.returncode != 0 or b"ok" not in plain.stdout, "plain HTTP answered on the TLS port")
        check(s.stop() == 0, "exit code")


def case_plain_needs_to_be_asked_for():
    result = subprocess.run([SERVER, "--port", "0"], capture_output=True, text=True, timeout=60)
    check(result.returncode == 2 and "--plain" in result.stderr, "started without TLS or --plain: %r" % result.stderr)
    result = subprocess.run([SERVER, "--port", "0", "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"],
                            capture_output=True, text=True, timeout=60)
    check(result.returncode != 0 and "certificate" in result.stderr, "unreadable certificate: %r" % result.stderr)


def case_answer_quality_flags():
    """--min-answer-confidence, --semantic-target-error-rate and
    --word-dictionary reach the engine; out-of-range values are refused."""
    for flag, value in (("--min-answer-confidence", "1.5"), ("--semantic-target-error-rate", "0"),
                        ("--semantic-target-error-rate", "x")):
        result = subprocess.run([SERVER, "--plain", "--port", "0", flag, value], capture_output=True, text=True,
                                timeout=60)
        check(result.returncode == 2 and flag in result.stderr, "%s %s: %r" % (flag, value, result.stderr))
    words = os.path.join(WORK, "words.txt")
    with open(words, "w", encoding="utf-8") as f:
        f.write("密码 100 n\n重置 80 v\n")
    with Server("--min-answer-confidence", "0.9999", "--semantic-target-error-rate", "0.02",
                "--word-dictionary", words) as s:
        status, _, body = curl(s.url("/v1/ask"), data=ask_body("I can't remember the password of my account, what now?"))
        answer = json.loads(body)
        check(status == 200 and answer["tier"] == "fallback", body)
        check("min_answer_confidence" in answer["fallback_reason"], body)
        status, _, body = curl(s.url("/v1/ask"), data=ask_body("I forgot my password"))
        answer = json.loads(body)
        check(answer["tier"] == "knowledge" and answer["confidence"] == 1.0, body)
        # A request's own threshold overrides the server's.
        status, _, body = curl(s.url("/v1/ask"), data=ask_body("I can't remember the password of my account, what now?",
                                                               min_answer_confidence=0))
        check(json.loads(body)["tier"] == "knowledge", body)
        status, _, body = curl(s.url("/v1/ask"), data=ask_body("I forgot the password"))
        check(json.loads(body)["cache_decision"] != "", body)
        status, _, metrics = curl(s.url("/metrics"), "-H", "Authorization: Bearer " + TOKEN)
        check("rapidqa_semantic_outcomes_total" in metrics, metrics[-400:])
        check(s.stop() == 0, "exit code")


def case_token_protects_administration():
    with Server() as s:
        status, _, body = curl(s.url("/v1/entries/shop-en-reset-password"))
        check(status == 401 and json.loads(body)["error"]["code"] == "unauthenticated", body)
        status, _, _ = curl(s.url("/v1/entries/shop-en-reset-password"), "-H", "Authorization: Bearer nope")
        check(status == 401, "wrong token: %d" % status)
        auth = "Authorization: Bearer " + TOKEN
        entry = json.dumps({"question": "Is there a student discount?", "answer": "Yes, 10 percent."})
        status, _, body = curl("-X", "PUT", s.url("/v1/entries/student"), "-H", auth, data=entry)
        check(status == 201, "PUT: %d %s" % (status, body))
        status, _, body = curl("--http2-prior-knowledge", s.url("/v1/ask", h2=True),
                               data=ask_body("Is there a student discount?"))
        check(json.loads(body)["entry_id"] == "student", body)
        status, _, body = curl("-X", "DELETE", s.url("/v1/entries/student"), "-H", auth)
        check(status == 200, "DELETE: %d" % status)
        status, _, _ = curl(s.url("/v1/entries/student"), "-H", auth)
        check(status == 404, "after DELETE: %d" % status)
        with open(os.path.join(WORK, "import.jsonl"), "w") as f:
            f.write(json.dumps({"id": "imp", "question": "Do you ship abroad?", "answer": "To 30 countries."}) + "\n")
        status, _, body = curl(s.url("/v1/entries:import"), "-H", auth, "--data-binary",
                               "@" + os.path.join(WORK, "import.jsonl"))
        check(status == 200 and json.loads(body)["added"] == 1, body)
        status, _, body = curl(s.url("/v1/cache:invalidate"), "-H", auth, data=json.dumps({"entry_id": "imp"}))
        check(status == 200, body)


def case_protect_ask_covers_websocket():
    import websockets

    async def run(port):
        try:
            async with websockets.connect("ws://127.0.0.1:%d/v1/ws" % port):
                raise Failure("an unauthenticated WebSocket was accepted with --protect-ask")
        except (websockets.exceptions.InvalidStatusCode, websockets.exceptions.InvalidMessage):
            pass  # libwebsockets answers the refused upgrade in HTTP/1.0, which this client reads as invalid
        async with websockets.connect("ws://127.0.0.1:%d/v1/ws" % port,
                                      extra_headers={"Authorization": "Bearer " + TOKEN}) as ws:
            await ws.send(json.dumps({"id": 1, "question": QUESTION}))
            reply = json.loads(await ws.recv())
            check(reply["status"] == 200, str(reply))

    with Server("--protect-ask") as s:
        status, _, _ = curl(s.url("/v1/ask"), data=ask_body())
        check(status == 401, "ask without the token under --protect-ask: %d" % status)
        upgrade = ["--http1.1", "-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H",
                   "Sec-WebSocket-Version: 13", "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]
        status, _, body = curl(*upgrade, s.url("/v1/ws"))
        check(status == 401 and "Bearer" in body, "refused upgrade: %d %s" % (status, body))
        status, _, body = curl(*upgrade, s.url("/v1/elsewhere"), "-H", "Authorization: Bearer " + TOKEN)
        check(status == 404, "upgrade elsewhere: %d" % status)
        asyncio.run(run(s.port))


def case_websocket_session():
    import websockets

    async def run(port):
        async with websockets.connect("ws://127.0.0.1:%d/v1/ws" % port) as ws:
            for i in range(20):
                await ws.send(json.dumps({"id": i, "question": QUESTION if i % 2 else "When are you open?"}))
            replies = [json.loads(await ws.recv()) for _ in range(20)]
            check(sorted(r["id"] for r in replies) == list(range(20)), "ids %s" % [r["id"] for r in replies])
            check(all(r["status"] == 200 for r in replies), str(replies[0]))
            odd = [r for r in replies if r["id"] % 2]
            check(all(r["entry_id"] == "shop-en-reset-password" for r in odd), str(odd[0]))
            await ws.send("{broken")
            reply = json.loads(await ws.recv())
            check(reply["status"] == 400 and reply["error"]["code"] == "invalid_argument", str(reply))
            await ws.send(json.dumps({"id": "t", "question": QUESTION, "nonsense": 1}))
            reply = json.loads(await ws.recv())
            check(reply["id"] == "t" and reply["status"] == 400 and "nonsense" in reply["error"]["message"], str(reply))
            await ws.send(b"\x00binary")
            reply = json.loads(await ws.recv())
            check(reply["status"] == 400, str(reply))
            pong = await ws.ping()
            await asyncio.wait_for(pong, 5)
        # Another path is not a WebSocket endpoint.
        try:
            async with websockets.connect("ws://127.0.0.1:%d/elsewhere" % port):
                raise Failure("a WebSocket opened on /elsewhere")
        except (websockets.exceptions.InvalidStatusCode, websockets.exceptions.InvalidMessage):
            pass

    with Server() as s:
        asyncio.run(run(s.port))


def case_websocket_limits():
    import websockets

    async def run(port):
        async with websockets.connect("ws://127.0.0.1:%d/v1/ws" % port, max_size=None) as ws:
            # 30 questions sent at once with at most 2 in flight: some are
            # refused one by one, each with its id, and the rest answered.
            for i in range(30):
                await ws.send(json.dumps({"id": i, "question": "question number %d about opening hours" % i,
                                          "use_cache": False}))
            replies = [json.loads(await ws.recv()) for _ in range(30)]
            refused = [r for r in replies if r.get("error", {}).get("code") == "resource_exhausted"]
            answered = [r for r in replies if r["status"] == 200]
            check(len(refused) + len(answered) == 30, str(replies))
            check(refused and answered, "refused %d answered %d" % (len(refused), len(answered)))
            check(sorted(r["id"] for r in replies) == list(range(30)), "every id answered once")
        async with websockets.connect("ws://127.0.0.1:%d/v1/ws" % port) as ws:
            await ws.send(json.dumps({"id": 1, "question": "x" * 5000}))
            try:
                await ws.recv()
                raise Failure("a message over --max-ws-message-bytes was answered")
            except websockets.exceptions.ConnectionClosed as closed:
                check(closed.code == 1009, "close code %s" % closed.code)

    with Server("--max-ws-in-flight", "2", "--max-ws-message-bytes", "1024", "--workers", "1") as s:
        asyncio.run(run(s.port))
        status, _, _ = curl(s.url("/healthz"))
        check(status == 200, "still serving")


def case_body_and_header_limits():
    with Server("--max-body-bytes", "2048", "--max-header-bytes", "2048") as s:
        big = ask_body("x" * 4000)
        for flag, h2 in (("--http1.1", False), ("--http2-prior-knowledge", True)):
            status, headers, body = curl(flag, s.url("/v1/ask", h2=h2), data=big)
            check(status == 413 and "2048" in json.loads(body)["error"]["message"], "%s: %d %s" % (flag, status, body))
        # Headers past the limit: the request is refused, the server goes on.
        result = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                                 "-H", "x-padding: " + "p" * 4000, s.url("/healthz")], capture_output=True, text=True)
        check(result.stdout != "200", "oversized headers were served: %r" % result.stdout)
        status, _, _ = curl(s.url("/healthz"))
        check(status == 200, "still serving")


def case_slow_client_is_cut_off():
    with Server("--client-timeout-s", "2") as s:
        started = time.time()
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\n")  # and then nothing: slowloris
        sock.settimeout(15)
        try:
            data = sock.recv(1024)
            while data:
                data = sock.recv(1024)
        except (ConnectionResetError, socket.timeout):
            pass
        elapsed = time.time() - started
        check(elapsed < 10, "a silent client held its connection for %.1f s" % elapsed)
        # A body that stops half way is cut off the same way.
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"question\"")
        sock.settimeout(15)
        started = time.time()
        try:
            while sock.recv(1024):
                pass
        except (ConnectionResetError, socket.timeout):
            pass
        check(time.time() - started < 10, "a half-sent body held its connection")
        status, _, _ = curl(s.url("/healthz"))
        check(status == 200, "still serving")


def case_slow_answer_is_not_a_slow_client():
    # The client timeout cuts off silent clients, not requests the server
    # is still working on: a batch that takes longer than the timeout is
    # answered on every protocol.
    # Sized to take several times the timeout on a fast machine (a fresh
    # machine answered 36,000 in 1.5 s).
    with Server("--client-timeout-s", "1", "--max-batch", "100000", "--max-body-bytes", "8000000", "--workers",
                "1") as s:
        questions = ["slow answer question %d about parcels" % i for i in range(90000)]
        path = body_file(json.dumps({"questions": questions, "use_cache": False}))
        for flag, h2 in (("--http1.1", False), ("--http2-prior-knowledge", True)):
            started = time.time()
            result = subprocess.run(["curl", "-sS", flag, "-o", "/dev/null", "-w", "%{http_code}", "--data-binary",
                                     "@" + path, s.url("/v1/ask:batch", h2=h2)], capture_output=True, text=True,
                                    timeout=120)
            elapsed = time.time() - started
            check(result.stdout == "200", "%s: %r %s after %.1f s" % (flag, result.stdout, result.stderr, elapsed))
            check(elapsed > 1.5, "the batch took %.1f s: too quick to show anything" % elapsed)


def case_connection_limit():
    with Server("--max-connections", "2") as s:
        held = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(2)]
        time.sleep(0.3)
        status, headers, body = curl("--http1.1", s.url("/healthz"))
        check(status == 503 and json.loads(body)["error"]["code"] == "resource_exhausted", "%d %s" % (status, body))
        check("retry-after" in headers, str(headers))
        for sock in held:
            sock.close()
        time.sleep(0.3)
        status, _, _ = curl(s.url("/healthz"))
        check(status == 200, "served again once connections closed: %d" % status)


def case_overload_answers_503_with_retry_after():
    # One worker and a queue of one: a burst of batches fills both; the rest
    # are refused at once instead of queued.
    with Server("--workers", "1", "--max-pending", "1") as s:
        questions = ["slow question %d about delivery times" % i for i in range(200)]
        body = json.dumps({"questions": questions, "use_cache": False})
        path = os.path.join(WORK, "batch.json")
        with open(path, "w") as f:
            f.write(body)
        procs = [subprocess.Popen(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@" + path,
                                   s.url("/v1/ask:batch")], stdout=subprocess.PIPE, text=True) for _ in range(8)]
        codes = [p.communicate()[0] for p in procs]
        check("503" in codes and "200" in codes, "codes %s" % codes)
        status, headers, body = curl(s.url("/healthz"))
        check(status in (200, 503), "healthz %d" % status)


def case_deadline_header_reaches_the_engine():
    with Server() as s:
        status, _, body = curl(s.url("/v1/ask"), "-H", "x-request-timeout-ms: 250", data=ask_body())
        check(status == 200, body)
        status, _, body = curl(s.url("/v1/ask"), "-H", "x-request-timeout-ms: soon", data=ask_body())
        check(status == 400 and "x-request-timeout-ms" in body, body)


def case_malformed_requests_leave_the_server_serving():
    with Server() as s:
        cases = [
            ("POST", "/v1/ask", "{not json", 400),
            ("POST", "/v1/ask", "[]", 400),
            ("POST", "/v1/ask", json.dumps({"question": QUESTION, "extra": 1}), 400),
            ("POST", "/v1/ask", json.dumps({"question": ["list"]}), 400),
            ("POST", "/v1/ask", b'{"question": "\xff\xfe bad utf-8"}', 400),
            ("POST", "/v1/ask", "", 400),
            ("GET", "/v1/ask", None, 405),
            ("POST", "/nowhere", "{}", 404),
            ("PATCH", "/v1/entries/x", "{}", 401),
        ]
        for method, path, data, expected in cases:
            for flag, h2 in (("--http1.1", False), ("--http2-prior-knowledge", True)):
                status, _, body = curl(flag, "-X", method, s.url(path, h2=h2), data=data)
                check(status == expected, "%s %s %r over %s: %d %s" % (method, path, data, flag, status, body))
                check("error" in json.loads(body), body)
        # A request line that is not HTTP, and a connection closed half way.
        for junk in (b"HELLO\r\n\r\n", b"GET /healthz HTTP/1.1\r\nHost"):
            sock = socket.create_connection(("127.0.0.1", s.port))
            sock.sendall(junk)
            sock.close()
        # HTTP/2 protocol errors: a bad preface, a frame on stream 0 that
        # must not be there, a stream half-closed by the client and reset.
        for junk in (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x04\x01\x00\x00\x00\x00\x00garbage",
                     b"not a preface at all"):
            sock = socket.create_connection(("127.0.0.1", s.h2_port))
            sock.sendall(junk)
            sock.settimeout(5)
            try:
                sock.recv(1024)
            except OSError:
                pass
            sock.close()
        # A stream the client half-closes with its headers: a POST with no
        # body is answered at once (an empty body is not an ask).
        started = time.time()
        result = subprocess.run(["nghttp", "-v", "-H", ":method: POST", s.url("/v1/ask", h2=True)],
                                capture_output=True, text=True, timeout=20)
        check(":status: 400" in result.stdout and "not valid JSON" in result.stdout,
              "nghttp POST without a body: %s" % result.stdout[-500:])
        check(time.time() - started < 5, "the half-closed stream waited %.1f s" % (time.time() - started))
        status, _, body = curl("--http2-prior-knowledge", s.url("/v1/ask", h2=True), data=ask_body())
        check(status == 200, "still serving over h2c: %d" % status)
        status, _, body = curl(s.url("/v1/ask"), data=ask_body())
        check(status == 200, "still serving over HTTP/1.1: %d" % status)


def case_embeddings_and_kserve_over_http():
    with Server() as s:
        status, _, body = curl("--http2-prior-knowledge", s.url("/v1/embeddings", h2=True),
                               data=json.dumps({"input": ["reset my password", "hours"], "model": "rapidqa-encoder"}))
        check(status == 200, body)
        data = json.loads(body)["data"]
        check(len(data) == 2 and len(data[0]["embedding"]) > 0, body[:200])
        status, _, body = curl(s.url("/v2/models/rapidqa-encoder/infer"), data=json.dumps(
            {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["reset my password"]}]}))
        check(status == 200, body)
        out = json.loads(body)["outputs"][0]
        check(out["shape"][0] == 1 and len(out["data"]) == out["shape"][1], str(out)[:200])
        check(abs(out["data"][0] - data[0]["embedding"][0]) < 1e-6, "KServe and OpenAI routes agree")
        status, _, body = curl(s.url("/metrics"))
        check(status == 200 and "# TYPE" in body, body[:200])


def case_remote_encoder_through_another_server():
    """A server whose encoder is another rapidqa-server (over TLS, with its
    token): answers through it, degrades while the host is down, recovers
    when it is back."""
    work = tempfile.mkdtemp(prefix="remote-", dir=WORK)
    certificate = make_certificate(work, "host")
    token_file = os.path.join(work, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    host = Server("--protect-ask", certificate=certificate).__enter__()
    host_port = host.port
    try:
        with Server("--remote-encoder", "https://127.0.0.1:%d" % host_port, "--remote-model", "rapidqa-encoder",
                    "--remote-ca-file", certificate[0], "--remote-token-file", token_file) as s:
            fresh = ask_body("How can I reset my password", use_cache=False)
            status, _, body = curl(s.url("/v1/ask"), "-H", "x-request-timeout-ms: 2000", data=fresh)
            answer = json.loads(body)
            check(status == 200 and not answer["degraded"] and answer["tier"] == "knowledge", body)
            status, _, metrics = curl(s.url("/metrics"))
            check('rapidqa_remote_requests_total{engine="remote-openai:rapidqa-encoder",endpoint="https://127.0.0.1:%d",'
                  'outcome="ok"}' % host_port in metrics, metrics[-2000:])
            host.process.kill()
            host.process.wait()
            for _ in range(6):
                status, _, body = curl(s.url("/v1/ask"), "-H", "x-request-timeout-ms: 1000", data=fresh)
                down = json.loads(body)
                check(status == 200 and down["degraded"], body)
                check(down["matches"][0]["entry_id"] == answer["matches"][0]["entry_id"], body)
            status, _, metrics = curl(s.url("/metrics"))
            check('rapidqa_remote_breaker_state{engine="remote-openai:rapidqa-encoder"} 1' in metrics,
                  "the breaker is open: " + metrics[-2000:])
            host.__exit__(None, None, None)
            host = Server("--protect-ask", "--port", str(host_port), certificate=certificate).__enter__()
            deadline = time.time() + 15
            while True:
                status, _, body = curl(s.url("/v1/ask"), "-H", "x-request-timeout-ms: 2000", data=fresh)
                if status == 200 and not json.loads(body)["degraded"]:
                    break
                check(time.time() < deadline, "no answer from the model after the host came back: " + body)
                time.sleep(0.2)
    finally:
        host.__exit__(None, None, None)


def case_generated_answers_stream_over_http_and_websocket():
    """A server whose answers an LLM engine writes: server-sent events over
    HTTP/1.1 and both HTTP/2 listeners, WebSocket pieces, the generation
    cached like any answer, and its metrics."""
    import websockets

    with ChatEngine() as chat, Server("--generator", chat.url, "--generator-model", "token-delay-5") as s:
        sse = ("-N", "-H", "Accept: text/event-stream")
        for url, extra in ((s.url("/v1/ask"), ()), (s.url("/v1/ask", h2=True), ("--http2-prior-knowledge",))):
            status, headers, body = curl(url, *sse, *extra, data=ask_body(use_cache=False))
            check(status == 200 and headers.get("content-type") == "text/event-stream", "%d %s" % (status, headers))
            events = server_sent_events(body)
            tokens = [d["text"] for e, d in events if e == "token"]
            check(len(tokens) > 10 and events[-1][0] == "answer", body[-800:])
            answer = events[-1][1]
            check(answer["generated"] and not answer["degraded"] and answer["tier"] == "knowledge", str(answer))
            check("".join(tokens) == answer["answer"] and answer["answer"].startswith("From [1]: To reset"),
                  str(answer))
            check(answer["matches"][0]["entry_id"] == "shop-en-reset-password", str(answer))
        # Cached: the same generation, whole, in one token event; plain JSON without the header.
        status, _, body = curl(s.url("/v1/ask"), *sse, data=ask_body())
        status, _, body = curl(s.url("/v1/ask"), *sse, data=ask_body())
        events = server_sent_events(body)
        check([e for e, _ in events] == ["token", "answer"] and events[1][1]["tier"] == "result_cache", body[:600])
        check(events[1][1]["generated"] and events[0][1]["text"] == events[1][1]["answer"], body[:600])
        status, _, body = curl(s.url("/v1/ask"), data=ask_body())
        check(status == 200 and json.loads(body)["generated"], body)
        # A refusal before any piece keeps its own status.
        status, headers, body = curl(s.url("/v1/ask"), *sse, data=ask_body(question=""))
        check(status == 400 and "application/json" in headers.get("content-type", ""), "%d %s" % (status, body))

        async def websocket(port):
            async with websockets.connect("ws://127.0.0.1:%d/v1/ws" % port) as ws:
                await ws.send(json.dumps({"id": 7, "question": "When are you open?", "stream": True,
                                          "use_cache": False}))
                pieces = []
                while True:
                    message = json.loads(await ws.recv())
                    check(message["id"] == 7, str(message))
                    if "token" in message:
                        pieces.append(message["token"])
                        continue
                    check(message["status"] == 200 and message["generated"], str(message))
                    check("".join(pieces) == message["answer"] and len(pieces) > 3, str(message))
                    break
                await ws.send(json.dumps({"id": 8, "question": QUESTION, "stream": "yes"}))
                message = json.loads(await ws.recv())
                check(message["status"] == 400 and "stream" in message["error"]["message"], str(message))

        asyncio.run(websocket(s.port))
        _, _, metrics = curl(s.url("/metrics"))
        check('rapidqa_generations_total{outcome="ok"} 4' in metrics, metrics[-3000:])
        check("rapidqa_generation_time_to_first_token_seconds_count 4" in metrics, metrics[-3000:])
        check('rapidqa_generation_tokens_total{kind="completion"}' in metrics, metrics[-3000:])


def case_generator_faults_reach_clients_as_the_api_says():
    """After the first piece a failed generation ends the event stream with
    an error event (and nothing is cached); before it, the FAQ answer comes,
    marked degraded; with the engine killed the breaker opens, and answers
    are generated again once it is back."""
    with ChatEngine() as chat:
        with Server("--generator", chat.url, "--generator-model", "reset-after-3") as s:
            for _ in range(2):  # the second is not served from a cache
                status, _, body = curl(s.url("/v1/ask"), "-N", "-H", "Accept: text/event-stream", data=ask_body())
                events = server_sent_events(body)
                check(status == 200 and [e for e, _ in events] == ["token"] * 3 + ["error"], body)
                check(events[-1][1]["status"] == 503 and "after it began" in events[-1][1]["error"]["message"], body)
            status, _, body = curl(s.url("/v1/ask"), data=ask_body())
            check(status == 503 and "after it began" in body, "%d %s" % (status, body))
        with Server("--generator", chat.url, "--generator-model", "status-500") as s:
            status, _, body = curl(s.url("/v1/ask"), "-N", "-H", "Accept: text/event-stream", data=ask_body())
            events = server_sent_events(body)
            check([e for e, _ in events] == ["token", "answer"], body)
            answer = events[1][1]
            check(answer["degraded"] and not answer["generated"] and answer["answer"].startswith("To reset"), body)
    with ChatEngine() as chat:
        port = chat.port
        with Server("--generator", chat.url, "--generator-model", "test-model") as s:
            fresh = ask_body(use_cache=False)
            status, _, body = curl(s.url("/v1/ask"), data=fresh)
            check(status == 200 and json.loads(body)["generated"], body)
            chat.kill()
            for _ in range(8):
                status, _, body = curl(s.url("/v1/ask"), "-H", "x-request-timeout-ms: 2000", data=fresh)
                check(status == 200 and json.loads(body)["degraded"], body)
            _, _, metrics = curl(s.url("/metrics"))
            check('rapidqa_remote_breaker_state{engine="remote-chat:test-model"} 1' in metrics, metrics[-3000:])
            with ChatEngine(port):
                deadline = time.time() + 15
                while True:
                    status, _, body = curl(s.url("/v1/ask"), data=fresh)
                    if status == 200 and json.loads(body)["generated"]:
                        break
                    check(time.time() < deadline, "no generation after the engine came back: " + body)
                    time.sleep(0.2)


def case_sigterm_drains_requests_in_flight():
    with Server("--workers", "1", "--drain-grace-s", "20", "--max-batch", "5000") as s:
        questions = ["drain question %d about returns" % i for i in range(3000)]
        path = os.path.join(WORK, "drain.json")
        with open(path, "w") as f:
            json.dump({"questions": questions, "use_cache": False}, f)
        slow = subprocess.Popen(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@" + path,
                                 s.url("/v1/ask:batch")], stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)  # the batch is at the worker
        s.process.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        refused = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
                                  s.url("/healthz")], capture_output=True, text=True)
        code = slow.communicate(timeout=60)[0]
        check(code == "200", "the request in flight got %r" % code)
        check(refused.stdout != "200", "a new connection was served while draining: %r" % refused.stdout)
        check(s.process.wait(timeout=30) == 0, "exit code after drain")
        check("draining" in s.log(), s.log())


def case_sighup_reloads_knowledge_and_certificate():
    kb = os.path.join(WORK, "reload-kb.jsonl")
    with open(FAQ) as f:
        original = f.read()
    with open(kb, "w") as f:
        f.write(original)
    with Server("--kb", kb, tls=True) as s:
        import ssl

        def certificate_subject():
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            with socket.create_connection(("127.0.0.1", s.port)) as raw:
                with context.wrap_socket(raw) as tls:
                    der = tls.getpeercert(binary_form=True)
            result = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject"], input=der,
                                    capture_output=True)
            return result.stdout.decode()

        check("CN = cert" in certificate_subject(), "first certificate")
        # A keep-alive connection opened before the reload stays usable.
        with open(kb, "a") as f:
            f.write(json.dumps({"id": "reloaded", "question": "Is the reload test entry there?",
                                "answer": "Yes, after SIGHUP."}) + "\n")
        new_cert, new_key = make_certificate(s.work, "renewed")
        os.replace(new_cert, s.cert)
        os.replace(new_key, s.key)
        s.process.send_signal(signal.SIGHUP)
        deadline = time.time() + 20
        while time.time() < deadline and s.log().count("ready:") < 2:
            time.sleep(0.1)
        check(s.log().count("ready:") >= 2, s.log())
        status, _, body = curl("--http2", s.url("/v1/ask"), data=ask_body("Is the reload test entry there?"))
        check(json.loads(body)["entry_id"] == "reloaded", body)
        check("CN = renewed" in certificate_subject(), "the certificate was not reloaded: " + s.log())
        check(s.stop() == 0, "exit code")


def case_request_ids_and_access_log():
    with Server() as s:
        status, headers, _ = curl(s.url("/v1/ask"), "-H", "x-request-id: trace-42", data=ask_body(tenant="acme"))
        check(headers.get("x-request-id") == "trace-42", str(headers))
        status, headers, _ = curl(s.url("/v1/ask"), data=ask_body())
        check(headers.get("x-request-id"), "a request id is made when none is sent")
        status, headers, _ = curl(s.url("/healthz"), "-H", "x-request-id: " + "bad id\"")
        check(headers.get("x-request-id") != "bad id\"", "an unusable id is replaced")
        s.stop()
        lines = s.access_log()
        traced = [l for l in lines if l["request_id"] == "trace-42"]
        check(len(traced) == 1, "the traced request is logged once: %s" % lines)
        line = traced[0]
        check(line["tenant"] == "acme" and line["tier"] == "knowledge" and line["status"] == 200, str(line))
        check(line["latency_us"] > 0 and line["path"] == "/v1/ask" and line["method"] == "POST", str(line))


def run_cases(cases, argv, doc):
    """The command line both server test scripts share: one case by name, or --list."""
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(doc)
        return 0 if len(argv) == 2 else 2
    if argv[1] == "--list":
        print("\n".join(cases))
        return 0
    name = argv[1]
    if name not in cases:
        print("unknown case %s" % name, file=sys.stderr)
        return 2
    try:
        cases[name]()
    except Failure as failure:
        print("FAIL %s: %s" % (name, failure), file=sys.stderr)
        return 1
    print("PASS %s" % name)
    shutil.rmtree(WORK, ignore_errors=True)  # kept when a case fails, for its logs
    return 0


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}

if __name__ == "__main__":
    sys.exit(run_cases(CASES, sys.argv, __doc__))
