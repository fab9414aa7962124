/* The smallest C program that embeds rapidqa through its C ABI.
 * Usage: rapidqa-c-client FAQ.jsonl "question" */
#include <stdio.h>
#include <string.h>

#include <rapidqa/rapidqa.h>

int main(int argc, char** argv) {
  rqa_engine* engine = NULL;
  rqa_answer* answer = NULL;
  size_t entries = 0;
  int rc = 1;
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: %s FAQ.jsonl QUESTION\n", argv[0]);
    return 0;
  }
  /* It takes no options: a leading "--" is a mistyped one, not a file name. */
  if (argc > 1 && strncmp(argv[1], "--", 2) == 0) {
    fprintf(stderr, "rapidqa-c-client: unknown option '%s'\nusage: %s FAQ.jsonl QUESTION\n", argv[1], argv[0]);
    return 2;
  }
  if (argc != 3) {
    fprintf(stderr, "rapidqa-c-client: expected 2 arguments, got %d\nusage: %s FAQ.jsonl QUESTION\n", argc - 1,
            argv[0]);
    return 2;
  }
  if (rqa_engine_create(NULL, &engine) != RQA_OK) {
    fprintf(stderr, "create: %s\n", rqa_last_error());
    return 1;
  }
  if (rqa_engine_load_knowledge(engine, argv[1], &entries) != RQA_OK) {
    fprintf(stderr, "load: %s\n", rqa_last_error());
    goto done;
  }
  if (rqa_engine_ask(engine, argv[2], &answer) != RQA_OK) {
    fprintf(stderr, "ask: %s\n", rqa_last_error());
    goto done;
  }
  printf("%s\n[%s, entry %s, score %.3f, %zu entries, rapidqa %s]\n", rqa_answer_text(answer),
         rqa_tier_name(rqa_answer_tier(answer)), rqa_answer_entry_id(answer), (double)rqa_answer_score(answer),
         entries, rqa_version());
  rc = 0;
done:
  rqa_answer_destroy(answer);
  rqa_engine_destroy(engine);
  return rc;
}
