// ListObjectsV2 XML: keys, truncation and the continuation token.
#include "stages/remote/s3_listing.hpp"

#include <charconv>

#include "sluice/core/error.hpp"

namespace sluice::stages::remote {

namespace {

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(ErrorCode::kCorruptData, "S3 listing: " + what);
}

// The text between <tag> and </tag> at or after `from`; npos-positioned when absent.
std::string_view element(std::string_view xml, std::string_view tag, std::size_t from, std::size_t* end) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const std::size_t start = xml.find(open, from);
  if (start == std::string_view::npos) {
    *end = std::string_view::npos;
    return {};
  }
  const std::size_t body = start + open.size();
  const std::size_t stop = xml.find(close, body);
  if (stop == std::string_view::npos) corrupt("<" + std::string(tag) + "> is not closed");
  *end = stop + close.size();
  return xml.substr(body, stop - body);
}

void append_utf8(std::uint32_t cp, std::string& out) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) corrupt("a character reference outside Unicode");
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string xml_unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    const std::size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) corrupt("an '&' that starts no entity");
    const std::string_view name = text.substr(i + 1, semi - i - 1);
    if (name == "amp") out += '&';
    else if (name == "lt") out += '<';
    else if (name == "gt") out += '>';
    else if (name == "quot") out += '"';
    else if (name == "apos") out += '\'';
    else if (name.size() >= 2 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      const std::string_view digits = name.substr(hex ? 2 : 1);
      std::uint32_t cp = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) corrupt("a bad character reference");
      append_utf8(cp, out);
    } else {
      corrupt("an unknown entity &" + std::string(name) + ";");
    }
    i = semi;
  }
  return out;
}

ListPage parse_list_objects_v2(std::string_view xml) {
  std::size_t end = 0;
  if (xml.find("<Error>") != std::string_view::npos) {
    const std::string code = xml_unescape(element(xml, "Code", 0, &end));
    const std::string message = xml_unescape(element(xml, "Message", 0, &end));
    throw Error(ErrorCode::kIo, "S3 listing failed: " + code + (message.empty() ? "" : ": " + message));
  }
  if (xml.find("<ListBucketResult") == std::string_view::npos) corrupt("not a ListBucketResult document");
  ListPage page;
  std::size_t at = 0;
  for (;;) {
    const std::string_view contents = element(xml, "Contents", at, &end);
    if (end == std::string_view::npos) break;
    at = end;
    std::size_t key_end = 0;
    const std::string_view key = element(contents, "Key", 0, &key_end);
    if (key_end == std::string_view::npos) corrupt("a <Contents> without a <Key>");
    page.keys.push_back(xml_unescape(key));
  }
  const std::string_view truncated = element(xml, "IsTruncated", 0, &end);
  page.truncated = end != std::string_view::npos && truncated == "true";
  if (page.truncated) {
    page.next_token = xml_unescape(element(xml, "NextContinuationToken", 0, &end));
    if (page.next_token.empty()) corrupt("a truncated page without a NextContinuationToken");
  }
  return page;
}

}  // namespace sluice::stages::remote
