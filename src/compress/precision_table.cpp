#include "compress/precision_table.h"

#include <fnmatch.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace rapidqa::compress {
namespace {

constexpr const char* kPracticeTable = R"(# The practice's table: embeddings INT8 (max-abs scales per row), attention
# at higher precision (FP32 on the CPU), FFN INT8 with moving-average
# ranges and bias correction.
embeddings.*                  int8  observer=max-abs
encoder.layer.*.attention.*   fp32
encoder.layer.*.intermediate  int8  observer=moving-average  bias-correction
encoder.layer.*.output        int8  observer=moving-average  bias-correction
)";

constexpr const char* kAutoTable = R"(# Every encoder layer INT8 unless it loses more than the accuracy budget
# or runs slower for its shape.
embeddings.*     int8  observer=max-abs
encoder.layer.*  auto  observer=moving-average  bias-correction
)";

constexpr const char* kInt8Table = R"(# Every layer INT8.
embeddings.*     int8  observer=max-abs
encoder.layer.*  int8  observer=moving-average  bias-correction
pooler           int8  observer=moving-average
)";

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kInt8: return "int8";
    case Precision::kAuto: return "auto";
  }
  return "?";
}

Result<PrecisionTable> PrecisionTable::parse(const std::string& text, const std::string& source) {
  PrecisionTable table;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string pattern, precision;
    if (!(words >> pattern)) continue;
    auto bad = [&](const std::string& why) {
      return Status::invalid_argument(fmt::format("{}:{}: {}", source, number, why));
    };
    if (!(words >> precision)) return bad(fmt::format("'{}' needs a precision (int8, fp32 or auto)", pattern));
    PrecisionRule rule;
    rule.pattern = pattern;
    if (precision == "int8") {
      rule.layer.precision = Precision::kInt8;
    } else if (precision == "fp32") {
      rule.layer.precision = Precision::kFp32;
    } else if (precision == "auto") {
      rule.layer.precision = Precision::kAuto;
    } else {
      return bad(fmt::format("unknown precision '{}'; expected int8, fp32 or auto", precision));
    }
    for (std::string option; words >> option;) {
      if (option == "bias-correction") {
        rule.layer.bias_correction = true;
      } else if (option.rfind("observer=", 0) == 0) {
        auto observer = parse_observer(option.substr(9));
        if (!observer) return bad(observer.status().message());
        rule.layer.observer = observer.value();
      } else {
        return bad(fmt::format("unknown option '{}'; expected observer=NAME or bias-correction", option));
      }
    }
    table.rules_.push_back(std::move(rule));
  }
  if (table.rules_.empty()) return Status::invalid_argument(fmt::format("{}: the table has no rules", source));
  return table;
}

Result<PrecisionTable> PrecisionTable::named_or_file(const std::string& name) {
  if (name.empty() || name == "default") return parse(kPracticeTable, "default table");
  if (name == "auto") return parse(kAutoTable, "auto table");
  if (name == "int8") return parse(kInt8Table, "int8 table");
  std::ifstream file(name);
  if (!file) {
    return Status::not_found(
        fmt::format("precision table '{}': no such file (or use default, auto or int8)", name));
  }
  std::stringstream text;
  text << file.rdbuf();
  return parse(text.str(), name);
}

LayerPrecision PrecisionTable::lookup(const std::string& layer_name) const {
  for (const PrecisionRule& rule : rules_) {
    if (fnmatch(rule.pattern.c_str(), layer_name.c_str(), 0) == 0) return rule.layer;
  }
  return {};
}

std::string PrecisionTable::to_text() const {
  std::string out;
  for (const PrecisionRule& r : rules_) {
    out += fmt::format("{}  {}", r.pattern, precision_name(r.layer.precision));
    if (r.layer.precision != Precision::kFp32) out += fmt::format("  observer={}", observer_name(r.layer.observer));
    if (r.layer.bias_correction) out += "  bias-correction";
    out += "\n";
  }
  return out;
}

}  // namespace rapidqa::compress
