// AWS credentials, region and endpoint as the AWS CLI finds them.
#include "stages/remote/aws_credentials.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sluice::stages::remote {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string trim(std::string s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.back())) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && space(s[i])) ++i;
  return s.substr(i);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string home_file(const char* override_var, const char* name) {
  std::string path = env(override_var);
  if (!path.empty()) return path;
  const std::string home = env("HOME");
  return home.empty() ? std::string() : home + "/.aws/" + name;
}

}  // namespace

std::string ini_value(const std::string& text, const std::string& section, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = trim(line.substr(1, line.size() - 2)) == section;
      continue;
    }
    const std::size_t eq = line.find('=');
    if (inside && eq != std::string::npos && trim(line.substr(0, eq)) == key) return trim(line.substr(eq + 1));
  }
  return {};
}

AwsConfig load_aws_config(bool anonymous) {
  AwsConfig c;
  c.anonymous = anonymous;
  std::string profile = env("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  const std::string config_path = home_file("AWS_CONFIG_FILE", "config");
  const std::string config = config_path.empty() ? std::string() : read_text(config_path);
  const std::string config_section = profile == "default" ? "default" : "profile " + profile;

  c.region = env("AWS_REGION");
  if (c.region.empty()) c.region = env("AWS_DEFAULT_REGION");
  if (c.region.empty()) c.region = ini_value(config, config_section, "region");
  if (c.region.empty()) c.region = "us-east-1";
  c.endpoint = env("AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = env("AWS_ENDPOINT_URL");
  if (c.endpoint.empty()) c.endpoint = ini_value(config, config_section, "endpoint_url");
  if (anonymous) {
    c.source = "anonymous (unsigned requests)";
    return c;
  }

  c.access_key_id = env("AWS_ACCESS_KEY_ID");
  c.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
  if (!c.access_key_id.empty() && !c.secret_access_key.empty()) {
    c.session_token = env("AWS_SESSION_TOKEN");
    c.source = "environment";
    return c;
  }
  c.access_key_id.clear();
  c.secret_access_key.clear();
  const std::string credentials_path = home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  for (const auto& [path, section] : {std::pair{credentials_path, profile}, std::pair{config_path, config_section}}) {
    if (path.empty()) continue;
    const std::string text = read_text(path);
    const std::string id = ini_value(text, section, "aws_access_key_id");
    const std::string secret = ini_value(text, section, "aws_secret_access_key");
    if (!id.empty() && !secret.empty()) {
      c.access_key_id = id;
      c.secret_access_key = secret;
      c.session_token = ini_value(text, section, "aws_session_token");
      c.source = "profile " + profile + " in " + path;
      return c;
    }
  }
  c.source = "none found (environment, profile " + profile + ")";
  return c;
}

std::string AwsConfig::describe() const {
  std::string out = "credentials: " + source;
  if (signs()) {
    const std::size_t n = access_key_id.size();
    out += " (key id ..." + access_key_id.substr(n > 4 ? n - 4 : 0) + ")";
  }
  out += "; region " + region + "; endpoint " + (endpoint.empty() ? std::string("AWS") : endpoint);
  return out;
}

}  // namespace sluice::stages::remote
