// What a failed HTTP response tells the user: S3's error code from its body, and what to check
// for a status that is not retried (http_transport.cpp's messages).
#pragma once

#include <string>

#include "stages/remote/aws_credentials.hpp"
#include "stages/remote/http_transport.hpp"

namespace sluice::stages::remote {

// " (Code)" from S3's <Error> document, else nothing: the body may be anything, never echoed
// whole (at most 80 characters, non-printable ones replaced).
std::string s3_code(const std::string& body);

// "HTTP <status>", with what to check for a 400, 401, 403 or 404 and, for an s3:// name, the
// configuration it was requested with.
std::string what_to_check(long status, const Download& d, const AwsConfig& aws);

}  // namespace sluice::stages::remote
