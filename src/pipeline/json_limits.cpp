// The JSON spec's bounds: a pre-parse scan of the text and bounded descriptions of values.
#include "pipeline/json_limits.hpp"

#include "sluice/core/error.hpp"

namespace sluice::json_limits {

namespace {

[[noreturn]] void refuse(const std::string& what, std::size_t offset) {
  throw Error(ErrorCode::kInvalidArgument, "spec: " + what + " (at byte " + std::to_string(offset) + ")");
}

// Cuts `text` to `max_chars` plus "...", backing off to a UTF-8 sequence boundary.
std::string cut(std::string text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  std::size_t at = max_chars;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  text.resize(at);
  return text + "...";
}

std::string dump_scalar(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Appends the value's JSON text (compact, as dump() writes it) until `out` holds more than
// `limit` characters. Recursion is bounded by kMaxDepth (check_text ran first; values built in code nest no deeper).
void append(const nlohmann::json& v, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  if (v.is_array() || v.is_object()) {
    const bool object = v.is_object();
    out += object ? '{' : '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
      if (!first) out += ",";
      first = false;
      if (object) out += dump_scalar(nlohmann::json(it.key())) + ":";
      append(*it, out, limit);
    }
    if (out.size() <= limit) out += object ? '}' : ']';
    return;
  }
  if (v.is_string()) {
    // Only the shown prefix of a long string is serialised.
    const std::string& s = v.get_ref<const std::string&>();
    out += dump_scalar(nlohmann::json(s.size() > limit ? s.substr(0, limit + 1) : s));
    return;
  }
  out += dump_scalar(v);
}

}  // namespace

void check_text(std::string_view text) {
  if (text.size() > kMaxSpecBytes) {
    refuse("the text is " + std::to_string(text.size()) + " bytes, more than the " +
               std::to_string(kMaxSpecBytes >> 20) + " MiB a spec may have",
           kMaxSpecBytes);
  }
  int depth = 0;
  bool in_string = false;
  std::size_t string_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character (a \u escape's hex digits need no care)
      } else if (c == '"') {
        in_string = false;
      }
      if (in_string && i - string_start > kMaxStringBytes) {
        refuse("a string longer than " + std::to_string(kMaxStringBytes) + " bytes", string_start);
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      string_start = i;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) refuse("nested deeper than " + std::to_string(kMaxDepth) + " levels", i);
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is the parser's to report
    }
  }
}

std::string clip(std::string text, std::size_t max_chars) { return cut(std::move(text), max_chars); }

std::string describe(const nlohmann::json& value, std::size_t max_chars) {
  std::string out;
  append(value, out, max_chars);
  return cut(std::move(out), max_chars);
}

std::string quote(const std::string& text, std::size_t max_chars) {
  return "\"" + cut(text, max_chars) + "\"";
}

}  // namespace sluice::json_limits
