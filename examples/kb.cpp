// rapidqa-kb: looks after a knowledge store from the command line.
//
//   rapidqa-kb --store sqlite:faq.db import faq.jsonl
//   rapidqa-kb --store sqlite:faq.db export backup.jsonl
//   rapidqa-kb --store sqlite:faq.db history reset-password
//   rapidqa-kb --store sqlite:faq.db rollback reset-password 3
//   rapidqa-kb --store sqlite:faq.db stats
//   rapidqa-kb --store postgresql://user@db-host/faq import faq.jsonl
//
// export, history and stats open the store read-only, so they work beside
// a running engine; import and rollback write it: a SQLite file refuses
// them (naming the process) while an engine holds it, a PostgreSQL store
// takes them and the engines on it follow.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <rapidqa/knowledge_store.h>
#include "tool_support.h"

namespace {

void print_usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-kb --store URI COMMAND [ARGS]\n"
               "  --store URI             the knowledge store: sqlite:PATH (created by import when missing), or\n"
               "                          postgresql://USER@HOST:PORT/DATABASE (any libpq connection URI)\n"
               "commands:\n"
               "  import FILE [--skip-invalid-lines]\n"
               "                          make the store's entries those of a JSONL file, in one transaction:\n"
               "                          new ids added, changed ones given a new version, missing ones\n"
               "                          removed; a file with a bad line is refused whole\n"
               "  export FILE             write the current entries to a JSONL file\n"
               "  history ID              every version of an entry, one JSON object per line\n"
               "  rollback ID VERSION     make a new version of the entry equal to VERSION\n"
               "  stats                   entries, versions, stored vectors and size of the store, as JSON\n");
}

int fail(const rapidqa::Status& s) {
  std::fprintf(stderr, "rapidqa-kb: %s\n", s.to_string().c_str());
  return 1;
}

nlohmann::json version_json(const rapidqa::EntryVersion& v) {
  nlohmann::json j = {{"version", v.version}, {"removed", v.removed}, {"committed_at_ms", v.committed_at_ms}};
  if (!v.removed) j["entry"] = nlohmann::json::parse(rapidqa::knowledge_entry_to_json(v.entry));
  return j;
}

int tool_main(int argc, char** argv) {
  std::string uri;
  std::vector<std::string> words;
  bool skip_invalid_lines = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      return 0;
    } else if (arg == "--store") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "rapidqa-kb: --store needs a value\n");
        return 2;
      }
      uri = argv[++i];
    } else if (arg == "--skip-invalid-lines") {
      skip_invalid_lines = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "rapidqa-kb: unknown option '%s'\n", arg.c_str());
      print_usage(stderr);
      return 2;
    } else {
      words.push_back(arg);
    }
  }
  if (uri.empty() || words.empty()) {
    std::fprintf(stderr, "rapidqa-kb: %s\n", uri.empty() ? "--store is required" : "a command is required");
    print_usage(stderr);
    return 2;
  }
  const std::string command = words[0];
  const std::size_t want = command == "import" || command == "export" || command == "history" ? 2
                           : command == "rollback"                                            ? 3
                           : command == "stats"                                               ? 1
                                                                                              : 0;
  if (want == 0 || words.size() != want) {
    std::fprintf(stderr, want == 0 ? "rapidqa-kb: unknown command '%s'\n" : "rapidqa-kb: wrong arguments for '%s'\n",
                 command.c_str());
    print_usage(stderr);
    return 2;
  }
  std::uint64_t version = 0;
  if (command == "rollback") {
    char* end = nullptr;
    version = std::strtoull(words[2].c_str(), &end, 10);
    if (words[2].empty() || *end != '\0' || version == 0) {
      std::fprintf(stderr, "rapidqa-kb: VERSION must be a positive whole number, not '%s'\n", words[2].c_str());
      return 2;
    }
  }

  rapidqa::KnowledgeStoreOptions store_options;
  store_options.read_only = command == "export" || command == "history" || command == "stats";
  auto store = rapidqa::KnowledgeStore::open(uri, store_options);
  if (!store) return fail(store.status());

  if (command == "import") {
    rapidqa::KnowledgeFileOptions file_options;
    file_options.skip_invalid_lines = skip_invalid_lines;
    auto report = rapidqa::import_knowledge_file(**store, words[1], file_options,
                                                 [](std::size_t done, std::size_t total) {
                                                   std::fprintf(stderr, "importing: %zu/%zu changes\n", done, total);
                                                 });
    if (!report) return fail(report.status());
    for (const auto& bad : report->skipped) {
      std::fprintf(stderr, "rapidqa-kb: %s line %zu skipped: %s\n", words[1].c_str(), bad.line, bad.message.c_str());
    }
    std::printf("imported %s: %zu added, %zu updated, %zu unchanged, %zu removed\n", words[1].c_str(),
                report->added, report->updated, report->unchanged, report->removed);
  } else if (command == "export") {
    auto written = rapidqa::export_knowledge_file(**store, words[1]);
    if (!written) return fail(written.status());
    std::printf("exported %zu entries to %s\n", *written, words[1].c_str());
  } else if (command == "history") {
    auto history = (*store)->history(words[1]);
    if (!history) return fail(history.status());
    for (const auto& v : *history) std::cout << rapidqa::tools::json_line(version_json(v)) << "\n";
  } else if (command == "rollback") {
    auto change = rapidqa::rollback_change(**store, words[1], version);
    if (!change) return fail(change.status());
    auto committed = (*store)->commit({*change});
    if (!committed) return fail(committed.status());
    const rapidqa::CommittedVersion& now = committed->front();
    std::printf("entry %s is now version %llu (%s version %llu)\n", now.entry_id.c_str(),
                static_cast<unsigned long long>(now.version), now.removed ? "removed, as" : "equal to",
                static_cast<unsigned long long>(version));
  } else {
    auto stats = (*store)->stats();
    if (!stats) return fail(stats.status());
    std::cout << rapidqa::tools::json_line({{"store", stats->uri},
                                            {"current_entries", stats->current_entries},
                                            {"versions", stats->versions},
                                            {"schema_version", stats->schema_version},
                                            {"stored_vectors", stats->stored_vectors},
                                            {"bytes", stats->bytes}})
              << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-kb", [&] { return tool_main(argc, argv); });
}
