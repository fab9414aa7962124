#include <cstdio>

#include <rapidqa/qa_engine.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto engine = rapidqa::QAEngine::create();
  if (!engine || !(*engine)->load_knowledge(argv[1])) return 1;
  auto answer = (*engine)->ask("How do I reset my password?");
  if (!answer) return 1;
  std::printf("cpp consumer: %s\n", answer->entry_id().c_str());
  return answer->entry_id() == "shop-en-reset-password" ? 0 : 1;
}
