// dump_json (json_text.hpp): nlohmann's layout, with bytes that are not UTF-8 escaped as
// \udcXX instead of an exception.
#include "pipeline/json_text.hpp"

#include <cstddef>
#include <cstdint>

namespace sluice {

namespace {

// The length of the valid UTF-8 sequence that starts at text[i], or 0 when there is none: the
// well-formed sequences of the Unicode standard (table 3-7), so no overlong form, no surrogate
// and nothing past U+10FFFF, which is also what Python's decoder accepts.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(text[k]); };
  const std::uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  std::uint8_t lo = 0x80;
  std::uint8_t hi = 0xbf;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;  // no overlong three-byte form
    if (b0 == 0xed) hi = 0x9f;  // no surrogate
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;  // no overlong four-byte form
    if (b0 == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return n;
}

constexpr char kHex[] = "0123456789abcdef";

void newline(std::string& out, int indent, int level) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
}

template <class Json>
void write(std::string& out, const Json& value, int indent, int level) {
  if (value.is_object()) {
    if (value.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (!first) out += ',';
      first = false;
      newline(out, indent, level + 1);
      append_json_string(out, it.key());
      out += indent < 0 ? ":" : ": ";
      write(out, it.value(), indent, level + 1);
    }
    newline(out, indent, level);
    out += '}';
  } else if (value.is_array()) {
    if (value.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    bool first = true;
    for (const auto& element : value) {
      if (!first) out += ',';
      first = false;
      newline(out, indent, level + 1);
      write(out, element, indent, level + 1);
    }
    newline(out, indent, level);
    out += ']';
  } else if (value.is_string()) {
    append_json_string(out, value.template get_ref<const std::string&>());
  } else {
    out += value.dump();  // numbers, booleans and null exactly as nlohmann writes them
  }
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const std::size_t n = utf8_sequence(text, i);
    if (n == 0) {
      const auto b = static_cast<std::uint8_t>(c);
      out += "\\udc";
      out += kHex[b >> 4];
      out += kHex[b & 15];
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(text.substr(i, n));
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\b') {
      out += "\\b";
    } else if (c == '\f') {
      out += "\\f";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<std::uint8_t>(c) < 0x20) {
      out += "\\u00";
      out += kHex[static_cast<std::uint8_t>(c) >> 4];
      out += kHex[static_cast<std::uint8_t>(c) & 15];
    } else {
      out += c;
    }
    i += n;
  }
  out += '"';
}

std::string without_byte_escapes(std::string_view text) {
  const auto hex4 = [&](std::size_t at) -> int {  // the value of the 4 hex digits at `at`, or -1
    if (at + 4 > text.size()) return -1;
    int v = 0;
    for (std::size_t k = at; k < at + 4; ++k) {
      const char c = text[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  };
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  bool after_high_surrogate = false;  // the previous escape was \ud800..\udbff
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!in_string) {
      in_string = c == '"';
      out += c;
      continue;
    }
    if (c == '"') {
      in_string = false;
      after_high_surrogate = false;
      out += c;
      continue;
    }
    if (c != '\\' || i + 1 >= text.size()) {
      after_high_surrogate = false;
      out += c;
      continue;
    }
    const int code = text[i + 1] == 'u' ? hex4(i + 2) : -1;
    if (code >= 0xdc80 && code <= 0xdcff && !after_high_surrogate) {
      out += "\\ufffd";
    } else {
      out.append(text.substr(i, code >= 0 ? 6 : 2));
    }
    after_high_surrogate = code >= 0xd800 && code <= 0xdbff;
    i += code >= 0 ? 5 : 1;
  }
  return out;
}

std::string dump_json(const nlohmann::json& value, int indent) {
  std::string out;
  write(out, value, indent, 0);
  return out;
}

std::string dump_json(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  write(out, value, indent, 0);
  return out;
}

}  // namespace sluice
