// Warming the caches at start: asking a list of hot questions through the
// engine's public ask(), so every tier fills exactly as live traffic would.
#include "rapidqa/qa_engine.h"

#include <fstream>

#include <fmt/format.h>

#include "common/line_reader.h"

namespace rapidqa {

PreloadReport QAEngine::preload_questions(const std::vector<std::string>& questions, const AskOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress) {
  PreloadReport report;
  for (std::size_t i = 0; i < questions.size(); ++i) {
    auto answer = ask(questions[i], options);
    ++report.questions;
    if (!answer) {
      report.rejected.push_back({i + 1, answer.status().message()});
    } else if (answer->tier == AnswerTier::kFallback) {
      ++report.fallbacks;
    } else if (answer->degraded) {
      ++report.degraded;
    } else {
      ++report.cached;
    }
    if (progress && ((i + 1) % 1000 == 0 || i + 1 == questions.size())) progress(i + 1, questions.size());
  }
  return report;
}

Result<PreloadReport> QAEngine::preload_questions_file(const std::string& path, const AskOptions& options,
                                                       const std::function<void(std::size_t, std::size_t)>& progress) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(fmt::format("question file '{}' cannot be opened (missing or unreadable)", path));
  std::vector<std::string> questions;
  std::vector<std::size_t> line_of;  // question index -> line in the file
  std::string line;
  for (std::size_t number = 1;; ++number) {
    const detail::LineRead read = detail::read_bounded_line(in, line);
    if (read == detail::LineRead::kEnd) break;
    if (read == detail::LineRead::kTooLong) {
      return Status::out_of_range(fmt::format("{}: line {} is longer than {} bytes: not a file of questions", path,
                                              number, detail::kDefaultMaxLineBytes));
    }
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    questions.push_back(line);
    line_of.push_back(number);
  }
  if (in.bad()) return Status::io_error(fmt::format("{}: read failed", path));
  PreloadReport report = preload_questions(questions, options, progress);
  for (auto& bad : report.rejected) bad.line = line_of[bad.line - 1];
  return report;
}

}  // namespace rapidqa
