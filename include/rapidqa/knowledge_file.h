// Reading a knowledge base from JSONL: one JSON object per line with the
// fields id, question, answer (required strings), alternates and tags
// (optional arrays of strings), context (optional string) and
// cache_ttl_seconds (optional positive number). Blank lines
// and lines starting with '#' are skipped.
//
// A file with a bad line is rejected whole by default, so a typo never
// silently drops part of the knowledge: every bad line is reported with its
// line number and field. With skip_invalid_lines the good lines are kept and
// the bad ones are listed in the report.
//
// Thread safety: free functions; thread-safe.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <vector>

#include "rapidqa/export.h"
#include "rapidqa/knowledge_entry.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct KnowledgeFileOptions {
  bool skip_invalid_lines = false;  // keep the good lines of a file with bad ones
  std::size_t max_errors_reported = 20;  // the message lists at most this many bad lines
  // The longest line read (16 MiB): a longer one refuses the whole file
  // with kOutOfRange, so an endless line (/dev/zero) cannot exhaust memory.
  std::size_t max_line_bytes = std::size_t{16} << 20;
};

struct KnowledgeLineError {
  std::size_t line = 0;   // 1-based line number
  std::string message;    // "field 'answer': expected a non-empty string"
};

struct KnowledgeFile {
  std::vector<KnowledgeEntry> entries;      // in file order
  std::vector<KnowledgeLineError> skipped;  // bad lines (only with skip_invalid_lines)
};

// Parses JSONL text already in memory; source names it in messages.
RAPIDQA_EXPORT Result<KnowledgeFile> parse_knowledge_jsonl(std::istream& in, const std::string& source,
                                                           const KnowledgeFileOptions& options = {});
// Reads and parses a file. kNotFound / kIoError when it cannot be read.
RAPIDQA_EXPORT Result<KnowledgeFile> read_knowledge_file(const std::string& path,
                                                         const KnowledgeFileOptions& options = {});
// Parses one entry from a JSON object in the same format as a file line.
RAPIDQA_EXPORT Result<KnowledgeEntry> parse_knowledge_entry_json(const std::string& json_object);
// The entry as one JSON object in the same format (version not included).
RAPIDQA_EXPORT std::string knowledge_entry_to_json(const KnowledgeEntry& entry);
// Checks one entry's fields (used for run-time adds and updates too).
RAPIDQA_EXPORT Status validate_entry(const KnowledgeEntry& entry);

}  // namespace rapidqa
