// rapidqa-store-writer: an engine on a knowledge store in its own process,
// for the store tests that need a process to die or to hit a limit.
//
//   rapidqa-store-writer write STORE_URI FIRST
//     Opens an engine on the store, prints "ready", then makes the numbered
//     changes FIRST, FIRST+1, ... forever (until killed). Change n writes
//     slot (n % 25): "n put slotK" (add or update, every field carrying n)
//     or, for n % 10 == 9 when the slot exists, "n remove slotK". Each line
//     is printed and flushed only after the call returned: a printed change
//     was acknowledged.
//
//   rapidqa-store-writer full-disk STORE_URI LIMIT_BYTES
//     Opens an engine on the store (which must hold slot0), asks slot0's
//     question, then limits every file it writes to LIMIT_BYTES
//     (RLIMIT_FSIZE) and updates slot0 with a large answer. Prints one JSON
//     line: the update's status, then slot0's version and the answer to
//     the same question before and after.
//
//   rapidqa-store-writer open STORE_URI AS_UID
//     Opens an engine on the store, first giving up root for AS_UID when
//     run as root (root writes files whatever their mode, so a read-only
//     file is only read-only to another user). Prints the status as JSON.
//
// Exit code 2 for bad usage, 1 when the engine cannot be opened.
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "rapidqa/qa_engine.h"

namespace {

using json = nlohmann::json;

constexpr int kSlots = 25;

// Entry n of the numbered changes: every field names n, so a version whose
// fields disagree would be a half-applied change.
rapidqa::KnowledgeEntry numbered_entry(unsigned long long n) {
  rapidqa::KnowledgeEntry e;
  e.id = "slot" + std::to_string(n % kSlots);
  e.question = "what does change " + std::to_string(n) + " say";
  e.alternates = {"change " + std::to_string(n) + " first phrasing", "change " + std::to_string(n) + " second phrasing"};
  e.answer = "answer " + std::to_string(n);
  e.tags = {"change-" + std::to_string(n)};
  return e;
}

rapidqa::Result<std::unique_ptr<rapidqa::QAEngine>> open_engine(const std::string& uri) {
  rapidqa::EngineOptions options;
  options.knowledge_store = uri;
  options.rebuild_workers = 0;  // no background asks racing the kill
  return rapidqa::QAEngine::create(std::move(options));
}

int write_forever(const std::string& uri, unsigned long long first) {
  auto engine = open_engine(uri);
  if (!engine) {
    std::cerr << "rapidqa-store-writer: " << engine.status().to_string() << "\n";
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (unsigned long long n = first;; ++n) {
    rapidqa::KnowledgeEntry e = numbered_entry(n);
    const bool exists = (*engine)->entry(e.id).is_ok();
    rapidqa::Status s;
    const char* kind = "put";
    if (n % 10 == 9 && exists) {
      kind = "remove";
      s = (*engine)->remove_entry(e.id);
    } else {
      s = exists ? (*engine)->update_entry(e) : (*engine)->add_entry(e);
    }
    if (!s.is_ok()) {
      std::cerr << "rapidqa-store-writer: change " << n << ": " << s.to_string() << "\n";
      return 1;
    }
    std::printf("%llu %s %s\n", n, kind, e.id.c_str());
    std::fflush(stdout);
  }
}

int fill_the_disk(const std::string& uri, unsigned long long limit_bytes) {
  auto engine = open_engine(uri);
  if (!engine) {
    std::cerr << "rapidqa-store-writer: " << engine.status().to_string() << "\n";
    return 1;
  }
  auto before = (*engine)->entry("slot0");
  if (!before) {
    std::cerr << "rapidqa-store-writer: the store has no slot0\n";
    return 1;
  }
  auto answer_before = (*engine)->ask(before->question);
  // Past the limit write() fails with EFBIG instead of the process being
  // stopped by SIGXFSZ: what a full disk looks like to SQLite.
  std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit {};
  limit.rlim_cur = limit_bytes;
  limit.rlim_max = RLIM_INFINITY;
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) {
    std::cerr << "rapidqa-store-writer: setrlimit failed\n";
    return 1;
  }
  rapidqa::KnowledgeEntry bigger = *before;
  bigger.answer = std::string(4u << 20, 'x');
  const rapidqa::Status update = (*engine)->update_entry(bigger);
  auto after = (*engine)->entry("slot0");
  auto answer_after = (*engine)->ask(before->question);
  json report = {
      {"update_ok", update.is_ok()},
      {"update_code", rapidqa::status_code_name(update.code())},
      {"update_message", update.message()},
      {"version_before", before->version},
      {"version_after", after ? after->version : 0},
      {"answer_before", answer_before ? answer_before->text : ""},
      {"answer_after", answer_after ? answer_after->text : ""},
      {"tier_after", answer_after ? rapidqa::answer_tier_name(answer_after->tier) : ""},
  };
  std::cout << report.dump() << std::endl;
  return 0;
}

int open_as(const std::string& uri, unsigned long long uid) {
  if (::geteuid() == 0 && ::setuid(static_cast<uid_t>(uid)) != 0) {
    std::cerr << "rapidqa-store-writer: cannot become uid " << uid << "\n";
    return 1;
  }
  auto engine = open_engine(uri);
  const rapidqa::Status s = engine ? rapidqa::Status::ok() : engine.status();
  std::cout << json{{"ok", s.is_ok()}, {"code", rapidqa::status_code_name(s.code())}, {"message", s.message()}}.dump()
            << std::endl;
  return 0;
}

constexpr const char* kUsage =
    "usage: rapidqa-store-writer write STORE_URI FIRST\n"
    "       rapidqa-store-writer full-disk STORE_URI LIMIT_BYTES\n"
    "       rapidqa-store-writer open STORE_URI AS_UID\n";

int usage(const std::string& problem) {
  std::cerr << "rapidqa-store-writer: " << problem << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--help") {
    std::cout << kUsage;
    return 0;
  }
  if (argc > 1 && argv[1][0] == '-') return usage(std::string("unknown option '") + argv[1] + "'");
  if (argc != 4) return usage("expected three arguments");
  const std::string mode = argv[1];
  const std::string uri = argv[2];
  char* end = nullptr;
  const unsigned long long number = std::strtoull(argv[3], &end, 10);
  if (!end || *end != '\0') return usage(std::string("not a number: ") + argv[3]);
  if (mode == "write") return write_forever(uri, number);
  if (mode == "full-disk") return fill_the_disk(uri, number);
  if (mode == "open") return open_as(uri, number);
  return usage("unknown mode '" + mode + "'");
}
