// Object URLs: remote names and the HTTP form of s3:// URLs.
#include "stages/remote/remote_url.hpp"

#include "sluice/core/error.hpp"

namespace sluice::stages::remote {

bool is_s3_url(std::string_view name) { return name.starts_with("s3://"); }

bool is_remote_url(std::string_view name) {
  return is_s3_url(name) || name.starts_with("http://") || name.starts_with("https://");
}

S3Location parse_s3_url(const std::string& url) {
  const std::string_view rest = std::string_view(url).substr(5);
  const std::size_t slash = rest.find('/');
  S3Location out;
  out.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) out.key = std::string(rest.substr(slash + 1));
  if (out.bucket.empty()) throw Error(ErrorCode::kInvalidArgument, "an s3:// URL without a bucket", url);
  return out;
}

std::string uri_encode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool unreserved = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' ||
                            u == '_' || u == '.' || u == '~';
    if (unreserved || (keep_slash && u == '/')) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string s3_http_url(const S3Location& where, const std::string& endpoint, const std::string& region) {
  const std::string key = uri_encode(where.key, true);
  if (!endpoint.empty()) {
    std::string base = endpoint;
    while (!base.empty() && base.back() == '/') base.pop_back();
    return base + "/" + where.bucket + "/" + key;
  }
  const std::string host = region.empty() || region == "us-east-1" ? "s3.amazonaws.com" : "s3." + region + ".amazonaws.com";
  return "https://" + where.bucket + "." + host + "/" + key;
}

}  // namespace sluice::stages::remote
