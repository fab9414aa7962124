// The encoder flags rapidqa-demo and rapidqa-server share: --model DIR
// [--bf16] for a transformer in this process, or --remote-encoder URL for a
// model served by another engine (OpenAI embeddings or KServe v2: vLLM,
// text-embeddings-inference, llama.cpp server, Triton, another
// rapidqa-server); neither gives the built-in hashing encoder.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <tuple>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <rapidqa/encoder.h>
#include <rapidqa/generator.h>
#include <rapidqa/qa_engine.h>
#include <rapidqa/remote_encoder.h>
#include <rapidqa/version.h>
#if RAPIDQA_HAS_MODELS
#include <rapidqa/transformer_encoder.h>
#endif

namespace rapidqa::tools {

// Reads one flag's value: argv[i + 1], with the tool's error when missing
// or out of range.
struct FlagValues {
  const char* tool;
  int argc;
  char** argv;
  int& i;

  const char* text() {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", tool, argv[i]);
      return nullptr;
    }
    ++i;
    return argv[i];
  }
  bool number(std::size_t& out) {
    const char* flag = argv[i];
    const char* v = text();
    if (!v) return false;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (*v == '-' || !end || *end || n == 0 || n > 1000000) {
      std::fprintf(stderr, "%s: %s must be a whole number from 1 to 1000000, not '%s'\n", tool, flag, v);
      return false;
    }
    out = static_cast<std::size_t>(n);
    return true;
  }
  bool milliseconds(std::chrono::milliseconds& out) {
    std::size_t ms = 0;
    if (!number(ms)) return false;
    out = std::chrono::milliseconds(ms);
    return true;
  }
};

// A bearer token from a file (its first line), else from an environment
// variable; false after printing why when the file gives none.
inline bool read_token(const char* tool, const char* flag, const std::string& file, const char* env_name,
                       std::string& token) {
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in || !std::getline(in, token) || token.empty()) {
      std::fprintf(stderr, "%s: %s: cannot read a token from '%s'\n", tool, flag, file.c_str());
      return false;
    }
  } else if (const char* env = std::getenv(env_name); env && *env) {
    token = env;
  }
  return true;
}

struct EncoderFlags {
  std::string model_dir;
  bool bf16 = false;
  std::string pooling;                // "" = the model directory's
  std::optional<std::string> prompt;  // unset = the model directory's query prompt
  RemoteEncoderOptions remote;  // used when remote.endpoints is not empty
  std::string remote_token_file;

  static constexpr const char* kUsage =
      "  --model DIR              encode with this BERT-family model directory (default: hashing encoder)\n"
      "  --bf16                   run that model in bfloat16 (CPUs with AVX512-BF16 or AMX only)\n"
      "  --pooling MODE           cls, mean, max, mean_sqrt_len, weightedmean or lasttoken (default: what\n"
      "                           the directory's sentence-transformers files say, else mean)\n"
      "  --prompt TEXT            put before every question (default: the directory's \"query\" prompt)\n"
      "  --remote-encoder URL     encode with a model another engine serves; repeat for more endpoints\n"
      "                           of the same model (http://host:port or https://...)\n"
      "  --remote-protocol P      openai (POST /v1/embeddings, the default), kserve (KServe v2 infer over\n"
      "                           HTTP) or kserve-grpc (KServe v2 ModelInfer over gRPC: Triton's gRPC port)\n"
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
    FlagValues value{tool, argc, argv, i};
    const char* v = nullptr;
    if (arg == "--model") {
      if (!(v = value.text())) return -1;
      model_dir = v;
    } else if (arg == "--bf16") {
      bf16 = true;
    } else if (arg == "--pooling") {
      if (!(v = value.text())) return -1;
      pooling = v;
    } else if (arg == "--prompt") {
      if (!(v = value.text())) return -1;
      prompt = v;
    } else if (arg == "--remote-encoder") {
      if (!(v = value.text())) return -1;
      remote.endpoints.emplace_back(v);
    } else if (arg == "--remote-protocol") {
      if (!(v = value.text())) return -1;
      const auto protocol = remote_protocol_from_name(v);
      if (!protocol) {
        std::fprintf(stderr, "%s: --remote-protocol must be openai, kserve or kserve-grpc, not '%s'\n", tool, v);
        return -1;
      }
      remote.protocol = *protocol;
    } else if (arg == "--remote-model") {
      if (!(v = value.text())) return -1;
      remote.model = v;
    } else if (arg == "--remote-dimension") {
      if (!value.number(remote.dimension)) return -1;
    } else if (arg == "--remote-http2") {
      remote.http_version = RemoteHttpVersion::kHttp2;
    } else if (arg == "--remote-token-file") {
      if (!(v = value.text())) return -1;
      remote_token_file = v;
    } else if (arg == "--remote-ca-file") {
      if (!(v = value.text())) return -1;
      remote.ca_file = v;
    } else if (arg == "--remote-timeout-ms") {
      if (!value.milliseconds(remote.request_timeout)) return -1;
    } else {
      return 0;
    }
    return 1;
  }

  // The encoder the flags ask for into engine.encoder (null: the built-in
  // one), with batching suited to a remote one. Returns 0, or an exit code
  // after printing why.
  int make(const char* tool, EngineOptions& engine) {
    std::shared_ptr<Encoder>& out = engine.encoder;
    out.reset();
    if (!model_dir.empty() && !remote.endpoints.empty()) {
      std::fprintf(stderr, "%s: --model and --remote-encoder exclude each other\n", tool);
      return 2;
    }
    if (model_dir.empty() && (!pooling.empty() || prompt)) {
      std::fprintf(stderr, "%s: --pooling and --prompt apply to a --model\n", tool);
      return 2;
    }
    if (!remote.endpoints.empty()) {
      if (!read_token(tool, "--remote-token-file", remote_token_file, "RAPIDQA_REMOTE_TOKEN", remote.bearer_token)) {
        return 2;
      }
      auto encoder = RemoteEncoder::create(remote);
      if (!encoder) {
        std::fprintf(stderr, "%s: --remote-encoder: %s\n", tool, encoder.status().to_string().c_str());
        return encoder.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
      }
      out = std::move(encoder).value();
      engine.encoder_batching = remote_encoder_batching();
      return 0;
    }
    if (model_dir.empty()) return 0;
#if RAPIDQA_HAS_MODELS
    TransformerEncoderOptions options;
    options.model_dir = model_dir;
    options.bf16 = bf16;
    options.prompt = prompt;
    if (!pooling.empty()) {
      auto mode = pooling_from_name(pooling);
      if (!mode) {
        std::fprintf(stderr, "%s: --pooling: %s\n", tool, mode.status().message().c_str());
        return 2;
      }
      options.pooling = mode.value();
    }
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

// The generator flags: --generator URL for answers written by an LLM
// another engine serves over the OpenAI chat completions API (vLLM, TGI,
// llama.cpp server) from the entries retrieval finds.
struct GeneratorFlags {
  RemoteGeneratorOptions options;  // used when options.endpoints is not empty
  std::string token_file, prompt_file, system_file;
  std::size_t sources = 3;

  static constexpr const char* kUsage =
      "  --generator URL          answer with text an LLM writes from the best entries (OpenAI chat\n"
      "                           completions, streamed); repeat for more endpoints of the same model\n"
      "  --generator-model NAME   the model's name at that engine (required with --generator)\n"
      "  --generator-sources N    best entries given to it (default 3)\n"
      "  --generator-max-tokens N most tokens an answer may have (default 256)\n"
      "  --generator-prompt-file FILE  the user message, with {question} and {sources} (default: built in)\n"
      "  --generator-system-file FILE  the system message (default: answer only from the knowledge given)\n"
      "  --generator-token-file FILE   bearer token for that engine (else RAPIDQA_GENERATOR_TOKEN, if set)\n"
      "  --generator-ca-file FILE certificates to trust for https:// engines (default: the system's)\n"
      "  --generator-http2        HTTP/2 on http:// too (h2c, prior knowledge)\n"
      "  --generator-timeout-ms N budget of an ask without a deadline of its own (default 60000)\n"
      "  --generator-stall-ms N   give up on a stream silent this long (default 10000)\n";

  // As EncoderFlags::parse.
  int parse(const char* tool, int argc, char** argv, int& i) {
    const std::string arg = argv[i];
    FlagValues value{tool, argc, argv, i};
    const char* v = nullptr;
    if (arg == "--generator") {
      if (!(v = value.text())) return -1;
      options.endpoints.emplace_back(v);
    } else if (arg == "--generator-model") {
      if (!(v = value.text())) return -1;
      options.model = v;
    } else if (arg == "--generator-sources") {
      if (!value.number(sources)) return -1;
    } else if (arg == "--generator-max-tokens") {
      if (!value.number(options.max_tokens)) return -1;
    } else if (arg == "--generator-prompt-file") {
      if (!(v = value.text())) return -1;
      prompt_file = v;
    } else if (arg == "--generator-system-file") {
      if (!(v = value.text())) return -1;
      system_file = v;
    } else if (arg == "--generator-token-file") {
      if (!(v = value.text())) return -1;
      token_file = v;
    } else if (arg == "--generator-ca-file") {
      if (!(v = value.text())) return -1;
      options.ca_file = v;
    } else if (arg == "--generator-http2") {
      options.http_version = RemoteHttpVersion::kHttp2;
    } else if (arg == "--generator-timeout-ms") {
      if (!value.milliseconds(options.request_timeout)) return -1;
    } else if (arg == "--generator-stall-ms") {
      if (!value.milliseconds(options.stall_timeout)) return -1;
    } else {
      return 0;
    }
    return 1;
  }

  // Sets the engine's generator when --generator was given. Returns 0, or
  // an exit code after printing why.
  int make(const char* tool, std::shared_ptr<Generator>& out, std::size_t& source_count) {
    out.reset();
    if (options.endpoints.empty()) {
      if (!options.model.empty()) {
        std::fprintf(stderr, "%s: --generator-model needs --generator\n", tool);
        return 2;
      }
      return 0;
    }
    if (!read_token(tool, "--generator-token-file", token_file, "RAPIDQA_GENERATOR_TOKEN", options.bearer_token)) {
      return 2;
    }
    for (auto [flag, file, text] : {std::tuple{"--generator-prompt-file", &prompt_file, &options.prompt_template},
                                    std::tuple{"--generator-system-file", &system_file, &options.system_prompt}}) {
      if (file->empty()) continue;
      std::ifstream in(*file, std::ios::binary);
      std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in && !in.eof()) {
        std::fprintf(stderr, "%s: %s: cannot read '%s'\n", tool, flag, file->c_str());
        return 2;
      }
      *text = std::move(content);
    }
    auto generator = RemoteGenerator::create(options);
    if (!generator) {
      std::fprintf(stderr, "%s: --generator: %s\n", tool, generator.status().to_string().c_str());
      return 2;
    }
    out = std::move(generator).value();
    source_count = sources;
    return 0;
  }
};

}  // namespace rapidqa::tools
