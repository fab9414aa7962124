// The smallest C++ service that embeds rapidqa: load a FAQ, ask a question.
// Usage: rapidqa-embed FAQ.jsonl "question"
#include <cstdio>
#include <cstring>

#include <rapidqa/qa_engine.h>

#include "tool_support.h"

int tool_main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("usage: %s FAQ.jsonl QUESTION\n", argv[0]);
    return 0;
  }
  // It takes no options: a leading "--" is a mistyped one, not a file name.
  if (argc > 1 && std::strncmp(argv[1], "--", 2) == 0) {
    std::fprintf(stderr, "rapidqa-embed: unknown option '%s'\nusage: %s FAQ.jsonl QUESTION\n", argv[1], argv[0]);
    return 2;
  }
  if (argc != 3) {
    std::fprintf(stderr, "rapidqa-embed: expected 2 arguments, got %d\nusage: %s FAQ.jsonl QUESTION\n", argc - 1,
                 argv[0]);
    return 2;
  }
  auto engine = rapidqa::QAEngine::create();
  if (!engine) {
    std::fprintf(stderr, "error: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  auto loaded = (*engine)->load_knowledge(argv[1]);
  if (!loaded) {
    std::fprintf(stderr, "error: %s\n", loaded.status().to_string().c_str());
    return 1;
  }
  auto answer = (*engine)->ask(argv[2]);
  if (!answer) {
    std::fprintf(stderr, "error: %s\n", answer.status().to_string().c_str());
    return 1;
  }
  std::printf("%s\n[%s, entry %s, score %.3f]\n", answer->text.c_str(), rapidqa::answer_tier_name(answer->tier),
              answer->entry_id().c_str(), static_cast<double>(answer->score));
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-embed", [&] { return tool_main(argc, argv); });
}
