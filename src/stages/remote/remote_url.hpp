// Object URLs: which shard names are remote (http://, https://, s3://), and the HTTP request an
// s3:// URL becomes. A custom endpoint (AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL: MinIO, Ceph, R2,
// a test server on 127.0.0.1) is addressed path-style (endpoint/bucket/key); AWS itself
// virtual-hosted (https://bucket.s3.REGION.amazonaws.com/key), as the AWS CLI does.
#pragma once

#include <string>
#include <string_view>

namespace sluice::stages::remote {

bool is_remote_url(std::string_view name);
bool is_s3_url(std::string_view name);

struct S3Location {
  std::string bucket;
  std::string key;  // without the leading '/'; may be empty (the bucket itself)
};

// "s3://bucket/key" split; throws kInvalidArgument naming the URL when the bucket is missing.
S3Location parse_s3_url(const std::string& url);

// The https:// (or the endpoint's) URL of an object or of the bucket (key empty). The key is
// percent-encoded as SigV4's canonical URI wants it ('/' kept).
std::string s3_http_url(const S3Location& where, const std::string& endpoint, const std::string& region);

// RFC 3986 unreserved characters kept, everything else %XX; '/' kept when keep_slash.
std::string uri_encode(std::string_view text, bool keep_slash);

}  // namespace sluice::stages::remote
