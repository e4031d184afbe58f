#include "perfmodel/error_bands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/file_text.h"
#include "common/yaml_reader.h"
#include "perfmodel/profiles.h"

namespace servesweep::perfmodel {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kShippedPath = "profiles/error_bands.yaml";

std::vector<std::string> KindNames() {
  std::vector<std::string> names;
  for (int k = 0; k < kExtrapolationKinds; ++k) {
    names.push_back(ExtrapolationKindName(static_cast<ExtrapolationKind>(k)));
  }
  return names;
}

}  // namespace

ErrorBands::ErrorBands() {
  for (KindBand& b : bands) b.low_pct = b.high_pct = kNaN;
}

Status ParseErrorBands(std::string_view yaml, const std::string& origin, ErrorBands* out) {
  YamlDocument document(origin, yaml, "the error bands");
  if (!document.ok()) return document.status();
  YamlReader& reader = document.reader();
  YamlMap& root = document.root();
  ErrorBands parsed;
  root.ReadText("measured_by", &parsed.measured_by, YamlMap::kRequired);
  root.ReadText("measured_at", &parsed.measured_at, YamlMap::kRequired);
  const YAML::Node list = root.Required("bands");
  root.Finish();
  if (!reader.ok()) return reader.status();
  if (!list.IsSequence()) {
    reader.Fail(list,
                fmt::format("expected 'bands' to be a list, found {}", DescribeYamlNode(list)));
    return reader.status();
  }
  const std::vector<std::string> kinds = KindNames();
  std::vector<bool> listed(kinds.size(), false);
  for (const YAML::Node& node : list) {
    YamlMap b(reader, node, "a band");
    const std::string kind = reader.Choice(b.Required("kind"), "kind", kinds);
    KindBand band;
    int figures = 0, cases = 0;
    b.ReadInt("figures", &figures, 0, YamlMap::kRequired);
    b.ReadInt("cases", &cases, 0, YamlMap::kRequired);
    band.figures = static_cast<size_t>(figures);
    band.cases = static_cast<size_t>(cases);
    // Errors are predicted / measured - 1: never below -100%.
    band.low_pct = band.high_pct = kNaN;
    if (figures > 0) {
      b.ReadNumber("low_pct", &band.low_pct, -100, YamlMap::kRequired);
      b.ReadNumber("high_pct", &band.high_pct, -100, YamlMap::kRequired);
      if (reader.ok() && band.high_pct < band.low_pct) {
        reader.Fail(node, fmt::format("expected low_pct <= high_pct, found {} > {}", band.low_pct,
                                      band.high_pct));
      }
    }
    b.Finish();
    if (!reader.ok()) return reader.status();
    const auto k = static_cast<size_t>(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin());
    if (listed[k]) {
      reader.Fail(node, fmt::format("expected each kind once, found '{}' again", kind));
      return reader.status();
    }
    listed[k] = true;
    parsed.bands[k] = band;
  }
  *out = parsed;
  return Status::Ok();
}

Status LoadErrorBands(const std::string& path, ErrorBands* out) {
  std::string text;
  if (Status s = ReadWholeFile(path, "the error bands for reading", &text); !s.ok()) return s;
  return ParseErrorBands(text, path, out);
}

std::string ErrorBandsYaml(const ErrorBands& e, const std::string& header_comment) {
  std::string out;
  for (size_t start = 0; start < header_comment.size();) {
    const size_t end = header_comment.find('\n', start);
    out += "# " + header_comment.substr(start, end - start) + "\n";
    start = end == std::string::npos ? header_comment.size() : end + 1;
  }
  out += fmt::format("measured_by: \"{}\"\nmeasured_at: {}\n", e.measured_by, e.measured_at);
  out += "bands:  # predicted / measured - 1, %: 80% of the held-out figures of the kind\n";
  for (int k = 0; k < kExtrapolationKinds; ++k) {
    const KindBand& b = e.bands[k];
    out +=
        fmt::format("  - {{kind: {}, ", ExtrapolationKindName(static_cast<ExtrapolationKind>(k)));
    if (b.figures > 0) {
      out += fmt::format("low_pct: {:.1f}, high_pct: {:.1f}, ", b.low_pct, b.high_pct);
    }
    out += fmt::format("figures: {}, cases: {}}}\n", b.figures, b.cases);
  }
  return out;
}

const ErrorBands& ShippedErrorBands() {
  static const ErrorBands bands = [] {
    ErrorBands parsed;
    const std::string_view text = EmbeddedProfile(kShippedPath);
    if (!text.empty() &&
        !ParseErrorBands(text, std::string(kShippedPath) + " (embedded)", &parsed).ok()) {
      parsed = ErrorBands();  // a broken shipped file fails its test, never a run
    }
    return parsed;
  }();
  return bands;
}

}  // namespace servesweep::perfmodel
