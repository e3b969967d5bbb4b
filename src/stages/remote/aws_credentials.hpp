// Credentials, region and endpoint for s3:// URLs, found as the AWS CLI finds them: the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION or
// AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL), then the profile (AWS_PROFILE, else
// "default") in ~/.aws/credentials and ~/.aws/config (or AWS_SHARED_CREDENTIALS_FILE and
// AWS_CONFIG_FILE). The secret never leaves this struct in a message: describe() names where the
// key came from and the key id's last four characters only.
#pragma once

#include <string>

namespace sluice::stages::remote {

struct AwsConfig {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string region = "us-east-1";
  std::string endpoint;       // empty: AWS itself (virtual-hosted addressing)
  std::string source;         // "environment", "profile default in /root/.aws/credentials", ...
  bool anonymous = false;     // unsigned requests (public buckets)

  bool signs() const { return !anonymous && !access_key_id.empty(); }
  // For messages: where the credentials came from, region and endpoint; no secret.
  std::string describe() const;
};

// Reads the environment and the AWS files now. `anonymous`: no credentials are looked up.
AwsConfig load_aws_config(bool anonymous);

// The value of `key` in section `section` of an INI file's text ("[default]", "[profile x]").
std::string ini_value(const std::string& text, const std::string& section, const std::string& key);

}  // namespace sluice::stages::remote
