#include "workload/trace_reader.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace servesweep::workload {
namespace {

bool ParseUint(const std::string& text, uint32_t* out) {
  if (text.empty() || text.size() > 9) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  *out = value;
  return true;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

Status ReadAzure(std::istream& in, const std::string& path, size_t max_requests,
                 std::vector<TraceRequest>* out) {
  std::string line;
  size_t line_number = 1;
  if (!std::getline(in, line) || Trim(line) != "TIMESTAMP,ContextTokens,GeneratedTokens") {
    return Status::InvalidArgument(
        fmt::format("{}:1: expected the header TIMESTAMP,ContextTokens,GeneratedTokens, found '{}'",
                    path, Trim(line)));
  }
  int64_t first_ns = 0;
  while (std::getline(in, line) && (max_requests == 0 || out->size() < max_requests)) {
    ++line_number;
    line = Trim(line);
    if (line.empty()) continue;
    std::stringstream cells(line);
    std::string timestamp, input, output;
    std::getline(cells, timestamp, ',');
    std::getline(cells, input, ',');
    std::getline(cells, output, ',');
    TraceRequest request;
    int64_t at_ns = 0;
    if (!ParseTimestampNs(timestamp, &at_ns) || !ParseUint(input, &request.input_len_tok) ||
        !ParseUint(output, &request.output_len_tok)) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: expected 'YYYY-MM-DD HH:MM:SS.fraction,<context tokens>,<generated tokens>', "
          "found '{}'",
          path, line_number, line));
    }
    if (out->empty()) first_ns = at_ns;
    request.offset_ns = at_ns - first_ns;
    if (request.offset_ns < 0) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: expected timestamps in order, found {} before the "
                      "first request",
                      path, line_number, timestamp));
    }
    out->push_back(std::move(request));
  }
  return Status::Ok();
}

constexpr int64_t kMaxTimestampMs = 9'000'000'000'000;  // x 1e6 ns still fits in int64

// A JSON number that is a whole number in [min, max]. Found by fuzzing: converting an
// out-of-range number (1e300, or a huge unsigned) to int64 is undefined behaviour.
bool JsonInteger(const nlohmann::json& v, int64_t min, int64_t max, int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) return false;
    *out = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    *out = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d >= static_cast<double>(min) && d <= static_cast<double>(max)) || d != std::floor(d)) {
      return false;
    }
    *out = static_cast<int64_t>(d);
  } else {
    return false;
  }
  return *out >= min && *out <= max;
}

Status ReadMooncake(std::istream& in, const std::string& path, size_t max_requests,
                    std::vector<TraceRequest>* out) {
  std::string line;
  size_t line_number = 0;
  int64_t first_ms = 0;
  while (std::getline(in, line) && (max_requests == 0 || out->size() < max_requests)) {
    ++line_number;
    if (Trim(line).empty()) continue;
    TraceRequest request;
    int64_t at_ms = 0;
    try {
      const auto j = nlohmann::json::parse(line);
      // Offsets are kept in ns: milliseconds past ~year 2255 (or before 1970) would overflow.
      int64_t input = 0, output = 0;
      if (!JsonInteger(j.at("timestamp"), 0, kMaxTimestampMs, &at_ms) ||
          !JsonInteger(j.at("input_length"), 0, UINT32_MAX, &input) ||
          !JsonInteger(j.at("output_length"), 0, UINT32_MAX, &output)) {
        return Status::InvalidArgument(fmt::format(
            "{}:{}: expected timestamp (ms, 0 to {}), input_length and output_length (0 to {}) "
            "as whole numbers, found '{}'",
            path, line_number, kMaxTimestampMs, UINT32_MAX, line.substr(0, 120)));
      }
      request.input_len_tok = static_cast<uint32_t>(input);
      request.output_len_tok = static_cast<uint32_t>(output);
      if (j.contains("hash_ids")) {
        for (const auto& id : j.at("hash_ids")) {
          if (!id.is_number_unsigned()) {
            return Status::InvalidArgument(
                fmt::format("{}:{}: expected hash_ids of unsigned integers, found {}", path,
                            line_number, id.dump()));
          }
          request.hash_ids.push_back(id.get<uint64_t>());
        }
      }
      if (j.contains("adapter")) {
        if (!j.at("adapter").is_string()) {
          return Status::InvalidArgument(fmt::format(
              "{}:{}: expected adapter to be a LoRA adapter's name (a string), found {}", path,
              line_number, j.at("adapter").dump()));
        }
        request.adapter = j.at("adapter").get<std::string>();
      }
    } catch (const nlohmann::json::exception& e) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: expected a JSON object with timestamp, input_length and output_length, found "
          "'{}' ({})",
          path, line_number, line.substr(0, 120), e.what()));
    }
    if (out->empty()) first_ms = at_ms;
    request.offset_ns = (at_ms - first_ms) * 1'000'000;
    if (request.offset_ns < 0) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: expected timestamps in order, found {} ms before "
                      "the first request",
                      path, line_number, first_ms - at_ms));
    }
    out->push_back(std::move(request));
  }
  return Status::Ok();
}

}  // namespace

bool ParseTimestampNs(const std::string& text, int64_t* out_ns) {
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  char fraction[16] = {};
  const int fields = std::sscanf(text.c_str(), "%4d-%2d-%2d %2d:%2d:%2d.%15[0-9]", &year, &month,
                                 &day, &hour, &minute, &second, fraction);
  // Years 1970-2200 keep nanoseconds since the epoch, and differences of two, within int64
  // (found by fuzzing: year 9999 overflowed).
  if (fields < 6 || year < 1970 || year > 2200 || month < 1 || month > 12 || day < 1 || day > 31 ||
      hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) {
    return false;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  int64_t ns = 0, scale = 100'000'000;
  for (const char* c = fraction; *c != '\0' && scale > 0; ++c, scale /= 10)
    ns += (*c - '0') * scale;
  *out_ns = static_cast<int64_t>(timegm(&tm)) * 1'000'000'000 + ns;
  return true;
}

Status ParseTraceFormat(const std::string& name, const std::string& path, TraceFormat* out) {
  const std::string chosen = !name.empty()              ? name
                             : path.ends_with(".csv")   ? "azure"
                             : path.ends_with(".jsonl") ? "mooncake"
                                                        : "";
  if (chosen == "azure") {
    *out = TraceFormat::kAzureCsv;
  } else if (chosen == "mooncake") {
    *out = TraceFormat::kMooncakeJsonl;
  } else {
    return Status::InvalidArgument(
        fmt::format("{}: expected trace_format azure or mooncake (or a .csv / "
                    ".jsonl file), found '{}'",
                    path, name));
  }
  return Status::Ok();
}

Status ReadTrace(const std::string& path, TraceFormat format, size_t max_requests,
                 std::vector<TraceRequest>* out) {
  out->clear();
  std::ifstream in(path);
  if (!in)
    return Status::NotFound(fmt::format("{}: expected a readable trace file, found none", path));
  Status status = format == TraceFormat::kAzureCsv ? ReadAzure(in, path, max_requests, out)
                                                   : ReadMooncake(in, path, max_requests, out);
  if (status.ok() && out->empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: expected at least one request, found none", path));
  }
  return status;
}

}  // namespace servesweep::workload
