#include <stdio.h>
#include <string.h>

#include <rapidqa/rapidqa.h>

int main(int argc, char** argv) {
  rqa_engine* engine = NULL;
  rqa_answer* answer = NULL;
  int ok = 0;
  if (argc != 2) return 2;
  printf("c consumer: rapidqa %s with %s\n", rqa_version(), rqa_components());
  if (rqa_engine_create(NULL, &engine) == RQA_OK && rqa_engine_load_knowledge(engine, argv[1], NULL) == RQA_OK &&
      rqa_engine_ask(engine, "如何重置密码？", &answer) == RQA_OK) {
    printf("c consumer: %s\n", rqa_answer_entry_id(answer));
    ok = strcmp(rqa_answer_entry_id(answer), "shop-zh-reset-password") == 0;
  } else {
    fprintf(stderr, "c consumer: %s\n", rqa_last_error());
  }
  rqa_answer_destroy(answer);
  rqa_engine_destroy(engine);
  return ok ? 0 : 1;
}
