// What a failed HTTP response tells the user (http_errors.hpp).
#include "stages/remote/http_errors.hpp"

namespace sluice::stages::remote {

std::string s3_code(const std::string& body) {
  const std::size_t a = body.find("<Code>");
  const std::size_t b = body.find("</Code>");
  if (a == std::string::npos || b == std::string::npos || b < a || b - a > 80) return {};
  std::string code = body.substr(a + 6, b - a - 6);
  for (char& c : code) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return " (" + code + ")";
}

std::string what_to_check(long status, const Download& d, const AwsConfig& aws) {
  const bool s3 = d.name.starts_with("s3://");
  std::string out = "HTTP " + std::to_string(status);
  if (status == 404) out += s3 ? ": no such bucket or key; check the URL, the region and the endpoint" : ": not found; check the URL";
  if (status == 403 || status == 401) {
    out += s3 ? ": access denied; check the credentials, the region and the endpoint, or use anonymous access for a public bucket"
              : ": access denied; check that the URL is public or carries its token";
  }
  if (status == 400) out += ": bad request; check the region and the endpoint";
  if (s3) out += " [" + aws.describe() + "]";
  return out;
}

}  // namespace sluice::stages::remote
