#!/usr/bin/env python3
"""rapidqa-server's gRPC services driven by Python grpcio with stubs made
from the .proto files the package installs (proto/), plus the standard
health and reflection services.

    grpc_test.py CASE     # one case, as ctest runs them
    grpc_test.py --list   # the cases

Environment as server_protocols_test.py, and RAPIDQA_PROTO_DIR (proto/).
"""
import importlib
import shutil
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_protocols_test import (QUESTION, TOKEN, WORK, Failure, Server, check, curl, run_cases)  # noqa: E402

import grpc  # noqa: E402

PROTO_DIR = os.environ.get("RAPIDQA_PROTO_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "proto"))
PYTHON_PLUGIN = shutil.which("grpc_python_plugin") or "/usr/bin/grpc_python_plugin"
TEST_PROTOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "protos")


def load_stubs():
    """Python stubs made by protoc and gRPC's Python plugin from the installed protos and the
    standard health and reflection protos (tests/server/protos/; their
    modules are top-level so that they do not clash with grpcio's own
    "grpc" package)."""
    out = os.path.join(WORK, "stubs")
    os.makedirs(out, exist_ok=True)
    for root, name in ((PROTO_DIR, "rapidqa/v1/rapidqa.proto"), (PROTO_DIR, "kserve/grpc_predict_v2.proto"),
                       (TEST_PROTOS, "health.proto"), (TEST_PROTOS, "reflection.proto")):
        result = subprocess.run(["protoc", "-I" + root, "--python_out=" + out, "--grpc_python_out=" + out,
                                 "--plugin=protoc-gen-grpc_python=" + PYTHON_PLUGIN, os.path.join(root, name)],
                                capture_output=True, text=True)
        check(result.returncode == 0, "protoc %s: %s" % (name, result.stderr))
    sys.path.insert(0, out)

    class Stubs:
        pass

    s = Stubs()
    s.qa = importlib.import_module("rapidqa.v1.rapidqa_pb2")
    s.qa_grpc = importlib.import_module("rapidqa.v1.rapidqa_pb2_grpc")
    s.kserve = importlib.import_module("kserve.grpc_predict_v2_pb2")
    s.kserve_grpc = importlib.import_module("kserve.grpc_predict_v2_pb2_grpc")
    s.health = importlib.import_module("health_pb2")
    s.health_grpc = importlib.import_module("health_pb2_grpc")
    s.reflection = importlib.import_module("reflection_pb2")
    s.reflection_grpc = importlib.import_module("reflection_pb2_grpc")
    return s


AUTH = (("authorization", "Bearer " + TOKEN),)


def channel(server):
    return grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port)


def expect_code(call, code, what):
    try:
        call()
    except grpc.RpcError as error:
        check(error.code() == code, "%s: %s %s" % (what, error.code(), error.details()))
        return error
    raise Failure("%s: succeeded, expected %s" % (what, code))


# ---------------------------------------------------------------- cases

def case_grpc_ask_unary_and_errors():
    s_ = load_stubs()
    with Server("--grpc-port", "0") as server:
        qa = s_.qa_grpc.QAStub(channel(server))
        answer, call = qa.Ask.with_call(s_.qa.AskRequest(question=QUESTION, tenant="g"),
                                        metadata=(("x-request-id", "grpc-trace-1"),), timeout=10)
        check(answer.entry_id == "shop-en-reset-password" and answer.tier == "knowledge", str(answer))
        check(answer.matches[0].version == 1 and answer.stage_us["total"] > 0, str(answer))
        check(("x-request-id", "grpc-trace-1") in call.initial_metadata(), str(call.initial_metadata()))
        again = qa.Ask(s_.qa.AskRequest(question=QUESTION, tenant="g"), timeout=10)
        check(again.tier == "result_cache", again.tier)
        expect_code(lambda: qa.Ask(s_.qa.AskRequest(question=""), timeout=10), grpc.StatusCode.INVALID_ARGUMENT,
                    "empty question")
        expect_code(lambda: qa.Ask(s_.qa.AskRequest(question=QUESTION, top_k=0), timeout=10),
                    grpc.StatusCode.INVALID_ARGUMENT, "top_k 0")
        # A short deadline is the engine's budget; the hashing encoder meets it.
        quick = qa.Ask(s_.qa.AskRequest(question="When are you open?"), timeout=0.5)
        check(quick.answer, "deadline answer")
        # The calibrated confidence, a threshold on it and the fallback's reason.
        check(answer.confidence == 1.0 or 0.0 <= answer.confidence <= 1.0, str(answer))
        paraphrase = "I can't remember the password of my account, what now?"
        strict = qa.Ask(s_.qa.AskRequest(question=paraphrase, min_answer_confidence=0.9999), timeout=10)
        check(strict.tier == "fallback" and "min_answer_confidence" in strict.fallback_reason, str(strict))
        short = qa.Ask(s_.qa.AskRequest(question="q"), timeout=10)
        check(short.tier == "fallback" and "too little to match" in short.fallback_reason, str(short))
        strict_batch = qa.AskBatch(s_.qa.AskBatchRequest(questions=[paraphrase], min_answer_confidence=0.9999),
                                   timeout=10)
        check(strict_batch.answers[0].answer.tier == "fallback", str(strict_batch))
        batch = qa.AskBatch(s_.qa.AskBatchRequest(questions=[QUESTION, "", "When are you open?"]), timeout=10)
        check(len(batch.answers) == 3 and batch.answers[0].answer.entry_id == "shop-en-reset-password", str(batch))
        check(batch.answers[1].error.code == "invalid_argument", str(batch.answers[1]))
        lines = [json.loads(l) for l in open(os.path.join(server.work, "access.log")) if l.strip()]
        check(any(l["request_id"] == "grpc-trace-1" and l["protocol"] == "gRPC" and l["tier"] == "knowledge"
                  for l in lines), "access log: %s" % lines[:3])


def case_grpc_stream_answers_in_order():
    s_ = load_stubs()
    with Server("--grpc-port", "0", "--max-stream-in-flight", "4", "--workers", "2") as server:
        qa = s_.qa_grpc.QAStub(channel(server))
        questions = []
        for i in range(60):
            if i % 10 == 7:
                questions.append(s_.qa.AskRequest(question=""))  # refused, the stream goes on
            else:
                questions.append(s_.qa.AskRequest(question="stream question %d about delivery" % i, use_cache=False))
        replies = list(qa.AskStream(iter(questions), timeout=60))
        check(len(replies) == 60, "%d replies" % len(replies))
        for i, reply in enumerate(replies):
            if i % 10 == 7:
                check(reply.error.code == "invalid_argument", "reply %d: %s" % (i, reply))
            else:
                check(reply.answer.answer and not reply.error.code, "reply %d: %s" % (i, reply))
        # Order: each answer belongs to its own question (the result cache
        # answers the same question again with the same entry).
        firsts = list(qa.AskStream(iter([s_.qa.AskRequest(question=QUESTION), s_.qa.AskRequest(
            question="When are you open?"), s_.qa.AskRequest(question=QUESTION)]), timeout=20))
        check(firsts[0].answer.entry_id == firsts[2].answer.entry_id == "shop-en-reset-password", str(firsts))
        check(firsts[1].answer.entry_id != "shop-en-reset-password", str(firsts[1]))


def case_grpc_streams_generated_answers():
    from server_protocols_test import ChatEngine
    s_ = load_stubs()
    with ChatEngine() as chat, Server("--grpc-port", "0", "--generator", chat.url, "--generator-model",
                                      "token-delay-5") as server:
        qa = s_.qa_grpc.QAStub(channel(server))
        pieces = list(qa.AskStreamed(s_.qa.AskRequest(question=QUESTION), timeout=20))
        check(len(pieces) > 10 and pieces[-1].HasField("answer"), "%d pieces" % len(pieces))
        answer = pieces[-1].answer
        check(answer.generated and not answer.degraded and answer.tier == "knowledge", str(answer))
        check("".join(p.text for p in pieces[:-1]) == answer.answer, str(answer))
        check(answer.matches[0].entry_id == "shop-en-reset-password", str(answer))
        again = list(qa.AskStreamed(s_.qa.AskRequest(question=QUESTION), timeout=20))
        check(len(again) == 2 and again[0].text == answer.answer and again[1].answer.tier == "result_cache",
              str(again))
        check(qa.Ask(s_.qa.AskRequest(question=QUESTION), timeout=10).generated, "unary Ask")
        expect_code(lambda: list(qa.AskStreamed(s_.qa.AskRequest(question=""), timeout=10)),
                    grpc.StatusCode.INVALID_ARGUMENT, "empty question")
    with ChatEngine() as chat, Server("--grpc-port", "0", "--generator", chat.url, "--generator-model",
                                      "reset-after-3") as server:
        qa = s_.qa_grpc.QAStub(channel(server))
        got = []

        def read():
            for piece in qa.AskStreamed(s_.qa.AskRequest(question=QUESTION), timeout=20):
                got.append(piece)
        expect_code(read, grpc.StatusCode.UNAVAILABLE, "a generation broken after it began")
        check(len(got) == 3 and all(p.text for p in got), str(got))


def case_grpc_administration_needs_the_token():
    s_ = load_stubs()
    with Server("--grpc-port", "0") as server:
        qa = s_.qa_grpc.QAStub(channel(server))
        entry = s_.qa.Entry(id="grpc-entry", question="Can I pay with grpc coins?", answer="No, only euros.")
        expect_code(lambda: qa.PutEntry(entry, timeout=10), grpc.StatusCode.UNAUTHENTICATED, "PutEntry without token")
        expect_code(lambda: qa.PutEntry(entry, metadata=(("authorization", "Bearer wrong"),), timeout=10),
                    grpc.StatusCode.UNAUTHENTICATED, "PutEntry with a wrong token")
        change = qa.PutEntry(entry, metadata=AUTH, timeout=10)
        check(change.created and change.version == 1, str(change))
        change = qa.PutEntry(s_.qa.Entry(id="grpc-entry", question="Can I pay with grpc coins?", answer="Yes now."),
                             metadata=AUTH, timeout=10)
        check(not change.created and change.version == 2, str(change))
        got = qa.GetEntry(s_.qa.EntryId(id="grpc-entry"), metadata=AUTH, timeout=10)
        check(got.answer == "Yes now." and got.version == 2, str(got))
        check(qa.Ask(s_.qa.AskRequest(question="Can I pay with grpc coins?"), timeout=10).entry_id == "grpc-entry",
              "ask finds the new entry")
        corrected = qa.CorrectCachedAnswer(s_.qa.CachedAnswerCorrection(question="Can I pay with grpc coins?",
                                                                        answer="Corrected."), metadata=AUTH, timeout=10)
        check(corrected.corrected, str(corrected))
        check(qa.Ask(s_.qa.AskRequest(question="Can I pay with grpc coins?"), timeout=10).answer == "Corrected.",
              "corrected answer served")
        dropped = qa.DeleteCachedAnswer(s_.qa.CachedQuestion(question="Can I pay with grpc coins?"), metadata=AUTH,
                                        timeout=10)
        check(dropped.dropped >= 1, str(dropped))
        qa.InvalidateEntry(s_.qa.EntryId(id="grpc-entry"), metadata=AUTH, timeout=10)
        imported = qa.ImportEntries(s_.qa.ImportRequest(jsonl=json.dumps(
            {"id": "grpc-imp", "question": "Is there a grpc import?", "answer": "Yes."}) + "\n"), metadata=AUTH,
            timeout=10)
        check(imported.added == 1, str(imported))
        deleted = qa.DeleteEntry(s_.qa.EntryId(id="grpc-entry"), metadata=AUTH, timeout=10)
        check(deleted.deleted == "grpc-entry", str(deleted))
        expect_code(lambda: qa.GetEntry(s_.qa.EntryId(id="grpc-entry"), metadata=AUTH, timeout=10),
                    grpc.StatusCode.NOT_FOUND, "GetEntry after delete")
        expect_code(lambda: qa.PutEntry(s_.qa.Entry(id="bad", question="", answer="x"), metadata=AUTH, timeout=10),
                    grpc.StatusCode.INVALID_ARGUMENT, "PutEntry of a bad entry")


def case_grpc_health_and_reflection():
    s_ = load_stubs()
    with Server("--grpc-port", "0") as server:
        ch = channel(server)
        health = s_.health_grpc.HealthStub(ch)
        for service in ("", "rapidqa.v1.QA", "inference.GRPCInferenceService"):
            reply = health.Check(s_.health.HealthCheckRequest(service=service), timeout=10)
            check(reply.status == s_.health.HealthCheckResponse.SERVING, "%r: %s" % (service, reply))
        reflection = s_.reflection_grpc.ServerReflectionStub(ch)
        replies = list(reflection.ServerReflectionInfo(iter([
            s_.reflection.ServerReflectionRequest(list_services=""),
            s_.reflection.ServerReflectionRequest(file_containing_symbol="rapidqa.v1.QA")]), timeout=10))
        names = {svc.name for svc in replies[0].list_services_response.service}
        check({"rapidqa.v1.QA", "inference.GRPCInferenceService", "grpc.health.v1.Health"} <= names, str(names))
        check(replies[1].file_descriptor_response.file_descriptor_proto, "no descriptor for rapidqa.v1.QA")
        # Draining: health says NOT_SERVING to load balancers.
        server.process.send_signal(signal.SIGTERM)
        check(server.process.wait(timeout=30) == 0, "exit code")


def case_grpc_kserve_inference():
    s_ = load_stubs()
    with Server("--grpc-port", "0") as server:
        k = s_.kserve_grpc.GRPCInferenceServiceStub(channel(server))
        check(k.ServerLive(s_.kserve.ServerLiveRequest(), timeout=10).live, "live")
        check(k.ServerReady(s_.kserve.ServerReadyRequest(), timeout=10).ready, "ready")
        check(k.ModelReady(s_.kserve.ModelReadyRequest(name="rapidqa-encoder"), timeout=10).ready, "model ready")
        meta = k.ModelMetadata(s_.kserve.ModelMetadataRequest(name="rapidqa-encoder"), timeout=10)
        dim = meta.outputs[0].shape[1]
        check(meta.inputs[0].datatype == "BYTES" and dim > 0, str(meta))
        check(k.ServerMetadata(s_.kserve.ServerMetadataRequest(), timeout=10).name == "rapidqa", "server metadata")
        texts = [b"reset my password", "営業時間".encode()]
        tensor = s_.kserve.ModelInferRequest.InferInputTensor(name="text", datatype="BYTES", shape=[2])
        tensor.contents.bytes_contents.extend(texts)
        reply = k.ModelInfer(s_.kserve.ModelInferRequest(model_name="rapidqa-encoder", id="k1", inputs=[tensor]),
                             timeout=10)
        check(reply.id == "k1" and list(reply.outputs[0].shape) == [2, dim], str(reply.outputs))
        vectors = struct.unpack("<%df" % (2 * dim), reply.raw_output_contents[0])
        # The same texts in raw form give the same vectors.
        raw = b"".join(struct.pack("<I", len(t)) + t for t in texts)
        raw_tensor = s_.kserve.ModelInferRequest.InferInputTensor(name="text", datatype="BYTES", shape=[2])
        again = k.ModelInfer(s_.kserve.ModelInferRequest(model_name="rapidqa-encoder", inputs=[raw_tensor],
                                                         raw_input_contents=[raw]), timeout=10)
        check(again.raw_output_contents[0] == reply.raw_output_contents[0], "raw and typed inputs differ")
        # And the HTTP routes agree.
        status, _, body = curl(server.url("/v1/embeddings"), data=json.dumps({"input": "reset my password"}))
        http_vector = json.loads(body)["data"][0]["embedding"]
        check(max(abs(a - b) for a, b in zip(http_vector, vectors[:dim])) < 1e-6, "gRPC and HTTP vectors differ")
        expect_code(lambda: k.ModelInfer(s_.kserve.ModelInferRequest(model_name="other", inputs=[tensor]), timeout=10),
                    grpc.StatusCode.NOT_FOUND, "unknown model")
        bad = s_.kserve.ModelInferRequest.InferInputTensor(name="text", datatype="FP32", shape=[1])
        expect_code(lambda: k.ModelInfer(s_.kserve.ModelInferRequest(model_name="rapidqa-encoder", inputs=[bad]),
                                         timeout=10), grpc.StatusCode.INVALID_ARGUMENT, "FP32 input")
        wrong_shape = s_.kserve.ModelInferRequest.InferInputTensor(name="text", datatype="BYTES", shape=[3])
        wrong_shape.contents.bytes_contents.extend(texts)
        expect_code(lambda: k.ModelInfer(s_.kserve.ModelInferRequest(model_name="rapidqa-encoder",
                                                                      inputs=[wrong_shape]), timeout=10),
                    grpc.StatusCode.INVALID_ARGUMENT, "shape mismatch")
        cut = s_.kserve.ModelInferRequest.InferInputTensor(name="text", datatype="BYTES", shape=[1])
        expect_code(lambda: k.ModelInfer(s_.kserve.ModelInferRequest(model_name="rapidqa-encoder", inputs=[cut],
                                                                      raw_input_contents=[b"\xff\x00\x00\x00ab"]),
                                         timeout=10), grpc.StatusCode.INVALID_ARGUMENT, "raw element cut short")


def case_grpc_over_tls():
    s_ = load_stubs()
    with Server("--grpc-port", "0", tls=True) as server:
        with open(server.cert, "rb") as f:
            root = f.read()
        credentials = grpc.ssl_channel_credentials(root_certificates=root)
        ch = grpc.secure_channel("127.0.0.1:%d" % server.grpc_port, credentials,
                                 options=(("grpc.ssl_target_name_override", "cert"),))
        qa = s_.qa_grpc.QAStub(ch)
        check(qa.Ask(s_.qa.AskRequest(question=QUESTION), timeout=10).entry_id == "shop-en-reset-password", "TLS ask")
        plain = s_.qa_grpc.QAStub(channel(server))
        expect_code(lambda: plain.Ask(s_.qa.AskRequest(question=QUESTION), timeout=5), grpc.StatusCode.UNAVAILABLE,
                    "plain gRPC to the TLS port")


def case_grpc_overload_and_drain():
    s_ = load_stubs()
    with Server("--grpc-port", "0", "--workers", "1", "--max-pending", "1", "--max-batch", "5000",
                "--drain-grace-s", "20") as server:
        qa = s_.qa_grpc.QAStub(channel(server))
        big = s_.qa.AskBatchRequest(questions=["overload question %d about refunds" % i for i in range(2000)],
                                    use_cache=False)
        results = []

        def run():
            try:
                qa.AskBatch(big, timeout=60)
                results.append("ok")
            except grpc.RpcError as error:
                results.append(error)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused = [r for r in results if r != "ok"]
        check(refused and "ok" in results, "results %s" % results)
        check(all(r.code() == grpc.StatusCode.RESOURCE_EXHAUSTED for r in refused), str(refused[0]))
        check(("retry-after", "1") in refused[0].trailing_metadata(), str(refused[0].trailing_metadata()))
        # SIGTERM while a batch runs: it is answered, then the server exits 0.
        done = []
        t = threading.Thread(target=lambda: done.append(qa.AskBatch(big, timeout=60)))
        t.start()
        time.sleep(0.3)
        server.process.send_signal(signal.SIGTERM)
        t.join()
        check(len(done) == 1 and len(done[0].answers) == 2000, "the call in flight was not answered")
        check(server.process.wait(timeout=30) == 0, "exit code after drain")


def case_load_tool_drives_grpc_and_websocket():
    load = os.environ.get("RAPIDQA_LOAD")
    if not load:
        print("SKIP: rapidqa-load is built with the benchmarks (models component)")
        return
    with Server("--grpc-port", "0") as server:
        for command, port in (("grpc", server.grpc_port), ("websocket", server.port)):
            for rate in ("0", "200"):
                result = subprocess.run([load, command, "--target", "127.0.0.1:%d" % port, "--duration", "1",
                                         "--warmup", "0.2", "--rate", rate, "--connections", "2", "--in-flight", "4"],
                                        capture_output=True, text=True, timeout=60)
                check(result.returncode == 0, "%s: %s" % (command, result.stderr))
                row = dict(zip(*[line.split(",") for line in result.stdout.strip().splitlines()[-2:]]))
                check(int(row["answered"]) > 50 and row["errors"] == "0", "%s rate %s: %s" % (command, rate, row))
                if rate != "0":
                    check(abs(float(row["answers_per_s"]) - 200) < 40, "paced %s: %s" % (command, row))


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}

if __name__ == "__main__":
    sys.exit(run_cases(CASES, sys.argv, __doc__))
