// The encoder flags rapidqa-demo and rapidqa-server share: --model DIR
// [--bf16] for a transformer in this process, or --remote-encoder URL for a
// model served by another engine (OpenAI embeddings or KServe v2: vLLM,
// text-embeddings-inference, llama.cpp server, Triton, another
// rapidqa-server); neither gives the built-in hashing encoder.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <rapidqa/encoder.h>
#include <rapidqa/remote_encoder.h>
#include <rapidqa/version.h>
#if RAPIDQA_HAS_MODELS
#include <rapidqa/transformer_encoder.h>
#endif

namespace rapidqa::tools {

struct EncoderFlags {
  std::string model_dir;
  bool bf16 = false;
  RemoteEncoderOptions remote;  // used when remote.endpoints is not empty
  std::string remote_token_file;

  static constexpr const char* kUsage =
      "  --model DIR              encode with this BERT-family model directory (default: hashing encoder)\n"
      "  --bf16                   run that model in bfloat16 (CPUs with AVX512-BF16 or AMX only)\n"
      "  --remote-encoder URL     encode with a model another engine serves; repeat for more endpoints\n"
      "                           of the same model (http://host:port or https://...)\n"
      "  --remote-protocol P      openai (POST /v1/embeddings, the default) or kserve (KServe v2 infer)\n"
      "  --remote-model NAME      the model's name at that engine (required with --remote-encoder)\n"
      "  --remote-dimension N     refuse to start unless its vectors have N values (default: any)\n"
      "  --remote-http2           HTTP/2 on http:// too (h2c, prior knowledge); https:// negotiates it\n"
      "  --remote-token-file FILE bearer token for that engine (else RAPIDQA_REMOTE_TOKEN, if set)\n"
      "  --remote-ca-file FILE    certificates to trust for https:// engines (default: the system's)\n"
      "  --remote-timeout-ms N    budget of a call without a deadline of its own (default 10000)\n";

  // Takes argv[i] (and its value) when it is an encoder flag. Returns 1 when
  // taken, 0 when it is not one of these, -1 after printing an error.
  int parse(const char* tool, int argc, char** argv, int& i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", tool, arg.c_str());
        return nullptr;
      }
      return argv[++i];
    };
    const auto number = [&](std::size_t& out) -> bool {
      const char* v = value();
      if (!v) return false;
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v, &end, 10);
      if (*v == '-' || !end || *end || n == 0 || n > 1000000) {
        std::fprintf(stderr, "%s: %s must be a whole number from 1 to 1000000, not '%s'\n", tool, arg.c_str(), v);
        return false;
      }
      out = static_cast<std::size_t>(n);
      return true;
    };
    const char* v = nullptr;
    if (arg == "--model") {
      if (!(v = value())) return -1;
      model_dir = v;
    } else if (arg == "--bf16") {
      bf16 = true;
    } else if (arg == "--remote-encoder") {
      if (!(v = value())) return -1;
      remote.endpoints.emplace_back(v);
    } else if (arg == "--remote-protocol") {
      if (!(v = value())) return -1;
      const std::string p = v;
      if (p == "openai") {
        remote.protocol = RemoteProtocol::kOpenAIEmbeddings;
      } else if (p == "kserve") {
        remote.protocol = RemoteProtocol::kKServeV2;
      } else {
        std::fprintf(stderr, "%s: --remote-protocol must be openai or kserve, not '%s'\n", tool, v);
        return -1;
      }
    } else if (arg == "--remote-model") {
      if (!(v = value())) return -1;
      remote.model = v;
    } else if (arg == "--remote-dimension") {
      if (!number(remote.dimension)) return -1;
    } else if (arg == "--remote-http2") {
      remote.http_version = RemoteHttpVersion::kHttp2;
    } else if (arg == "--remote-token-file") {
      if (!(v = value())) return -1;
      remote_token_file = v;
    } else if (arg == "--remote-ca-file") {
      if (!(v = value())) return -1;
      remote.ca_file = v;
    } else if (arg == "--remote-timeout-ms") {
      std::size_t ms = 0;
      if (!number(ms)) return -1;
      remote.request_timeout = std::chrono::milliseconds(ms);
    } else {
      return 0;
    }
    return 1;
  }

  // The encoder the flags ask for into `out` (null: the built-in one).
  // Returns 0, or an exit code after printing why.
  int make(const char* tool, std::shared_ptr<Encoder>& out) {
    out.reset();
    if (!model_dir.empty() && !remote.endpoints.empty()) {
      std::fprintf(stderr, "%s: --model and --remote-encoder exclude each other\n", tool);
      return 2;
    }
    if (!remote.endpoints.empty()) {
      if (!remote_token_file.empty()) {
        std::ifstream in(remote_token_file);
        if (!in || !std::getline(in, remote.bearer_token) || remote.bearer_token.empty()) {
          std::fprintf(stderr, "%s: --remote-token-file: cannot read a token from '%s'\n", tool,
                       remote_token_file.c_str());
          return 2;
        }
      } else if (const char* env = std::getenv("RAPIDQA_REMOTE_TOKEN"); env && *env) {
        remote.bearer_token = env;
      }
      auto encoder = RemoteEncoder::create(remote);
      if (!encoder) {
        std::fprintf(stderr, "%s: --remote-encoder: %s\n", tool, encoder.status().to_string().c_str());
        return encoder.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
      }
      out = std::move(encoder).value();
      return 0;
    }
    if (model_dir.empty()) return 0;
#if RAPIDQA_HAS_MODELS
    TransformerEncoderOptions options;
    options.model_dir = model_dir;
    options.bf16 = bf16;
    auto encoder = TransformerEncoder::load(options);
    if (!encoder) {
      std::fprintf(stderr, "%s: --model: %s\n", tool, encoder.status().to_string().c_str());
      return 1;
    }
    out = std::move(encoder).value();
    return 0;
#else
    std::fprintf(stderr, "%s: --model needs the models component (-DRAPIDQA_WITH_MODELS=ON)\n", tool);
    return 2;
#endif
  }
};

}  // namespace rapidqa::tools
