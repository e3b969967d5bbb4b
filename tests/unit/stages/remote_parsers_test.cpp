// The remote transport's pieces that need no server: ListObjectsV2 pages, response header lines
// (Content-Range, Retry-After in both forms), s3:// URLs in their HTTP forms, the AWS files read
// as the AWS CLI reads them, the shard cache's names, and what describe() shows of credentials.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "sluice/core/error.hpp"
#include "stages/remote/aws_credentials.hpp"
#include "stages/remote/http_headers.hpp"
#include "stages/remote/remote_url.hpp"
#include "stages/remote/s3_listing.hpp"
#include "stages/remote/shard_cache.hpp"
#include "test_support.hpp"

namespace sluice::stages::remote {
namespace {

TEST(S3Listing, ReadsKeysTruncationAndTheToken) {
  const ListPage page = parse_list_objects_v2(
      R"(<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">)"
      "<Name>b</Name><IsTruncated>true</IsTruncated><Contents><Key>a/train-0.tar</Key><Size>3</Size></Contents>"
      "<Contents><Key>a/x&amp;y&#233;&#x41;.tar</Key></Contents><NextContinuationToken>t/o+k=</NextContinuationToken>"
      "</ListBucketResult>");
  ASSERT_EQ(page.keys.size(), 2u);
  EXPECT_EQ(page.keys[0], "a/train-0.tar");
  EXPECT_EQ(page.keys[1], "a/x&y\xC3\xA9" "A.tar");
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_token, "t/o+k=");
  EXPECT_FALSE(parse_list_objects_v2("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>").truncated);
}

TEST(S3Listing, RejectsErrorsAndMalformedPages) {
  try {
    (void)parse_list_objects_v2("<Error><Code>AccessDenied</Code><Message>no &amp; no</Message></Error>");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AccessDenied: no & no"), std::string::npos) << e.what();
  }
  for (const char* bad : {"", "<html>", "<ListBucketResult><Contents><Key>a</Contents>",
                          "<ListBucketResult><Contents></Contents></ListBucketResult>",
                          "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
                          "<ListBucketResult><Contents><Key>&bogus;</Key></Contents></ListBucketResult>",
                          "<ListBucketResult><Contents><Key>&#0;</Key></Contents></ListBucketResult>",
                          "<ListBucketResult><Contents><Key>&#x110000;</Key></Contents></ListBucketResult>"}) {
    EXPECT_THROW((void)parse_list_objects_v2(bad), Error) << bad;
  }
}

TEST(HttpHeaders, ReadsEtagLengthRangeAndRetryAfter) {
  ResponseHeaders h;
  h.add_line("HTTP/1.1 206 Partial Content\r\n", 0);
  h.add_line("etag: \"abc\"\r\n", 0);
  h.add_line("Content-Length: 100\r\n", 0);
  h.add_line("Content-Range: bytes 50-149/150\r\n", 0);
  h.add_line("Retry-After: 7\r\n", 0);
  EXPECT_EQ(h.etag, "\"abc\"");
  EXPECT_EQ(h.content_length, 100u);
  EXPECT_EQ(h.range_start, 50u);
  EXPECT_EQ(h.total_size, 150u);
  EXPECT_EQ(h.retry_after_s, 7.0);
  h.add_line("HTTP/1.1 200 OK\r\n", 0);  // a new response (after a redirect) starts afresh
  EXPECT_TRUE(h.etag.empty());
  EXPECT_FALSE(h.content_length);
  h.add_line("Content-Length: -1\r\n", 0);
  h.add_line("Content-Range: bytes 0-9/*\r\n", 0);
  EXPECT_FALSE(h.content_length);
  EXPECT_FALSE(h.total_size);
}

TEST(HttpHeaders, RetryAfterTakesSecondsOrADateAndIsCapped) {
  // Sun, 06 Nov 1994 08:49:37 GMT is 784111777.
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111770), 7.0);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111790), 0.0);
  EXPECT_EQ(parse_retry_after("99999999", 0), 3600.0);
  EXPECT_FALSE(parse_retry_after("soon", 0));
  EXPECT_FALSE(parse_retry_after("", 0));
}

TEST(RemoteUrl, S3UrlsBecomeVirtualHostedOrPathStyleRequests) {
  EXPECT_TRUE(is_remote_url("s3://b/k"));
  EXPECT_TRUE(is_remote_url("https://h/p"));
  EXPECT_FALSE(is_remote_url("/data/s3://x"));
  const S3Location at = parse_s3_url("s3://bucket/dir/a b+c.tar");
  EXPECT_EQ(at.bucket, "bucket");
  EXPECT_EQ(at.key, "dir/a b+c.tar");
  EXPECT_EQ(s3_http_url(at, "", "eu-west-3"), "https://bucket.s3.eu-west-3.amazonaws.com/dir/a%20b%2Bc.tar");
  EXPECT_EQ(s3_http_url(at, "", "us-east-1"), "https://bucket.s3.amazonaws.com/dir/a%20b%2Bc.tar");
  EXPECT_EQ(s3_http_url(at, "http://127.0.0.1:9000/", "x"), "http://127.0.0.1:9000/bucket/dir/a%20b%2Bc.tar");
  EXPECT_THROW((void)parse_s3_url("s3:///key"), Error);
  EXPECT_EQ(uri_encode("a/b~c", false), "a%2Fb~c");
}

TEST(AwsCredentials, FoundAsTheAwsCliFindsThemAndNeverShown) {
  const test::TempDir dir;
  std::ofstream(dir / "credentials") << "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = sdefault\n"
                                        "[work]\naws_access_key_id=AKIAWORK9876\naws_secret_access_key=swork\naws_session_token=tok\n";
  std::ofstream(dir / "config") << "[profile work]\nregion = ap-south-1\nendpoint_url = http://127.0.0.1:1\n";
  for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                        "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"}) {
    ::unsetenv(v);
  }
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").c_str(), 1);
  ::setenv("AWS_CONFIG_FILE", (dir / "config").c_str(), 1);
  ::setenv("AWS_PROFILE", "work", 1);
  AwsConfig c = load_aws_config(false);
  EXPECT_EQ(c.access_key_id, "AKIAWORK9876");
  EXPECT_EQ(c.secret_access_key, "swork");
  EXPECT_EQ(c.session_token, "tok");
  EXPECT_EQ(c.region, "ap-south-1");
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:1");
  EXPECT_EQ(c.describe().find("swork"), std::string::npos);
  EXPECT_NE(c.describe().find("...9876"), std::string::npos);
  ::setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "senv", 1);
  ::setenv("AWS_REGION", "eu-north-1", 1);
  c = load_aws_config(false);
  EXPECT_EQ(c.access_key_id, "AKIAENV");
  EXPECT_EQ(c.source, "environment");
  EXPECT_EQ(c.region, "eu-north-1");
  EXPECT_FALSE(load_aws_config(true).signs());
  for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_SHARED_CREDENTIALS_FILE",
                        "AWS_CONFIG_FILE", "AWS_PROFILE"}) {
    ::unsetenv(v);
  }
}

TEST(ShardCacheNames, OnlySluicesOwnNamesAreTaken) {
  EXPECT_TRUE(is_cache_file_name(".sluice-remote-cache"));
  EXPECT_TRUE(is_cache_file_name("0123456789abcdef.tar"));
  EXPECT_TRUE(is_cache_file_name("0123456789abcdef.meta"));
  EXPECT_TRUE(is_cache_file_name("0123456789abcdef.tar.sluice-idx"));
  EXPECT_TRUE(is_cache_file_name(".0123456789abcdef.tar.tmp-12-0"));
  EXPECT_FALSE(is_cache_file_name("0123456789ABCDEF.tar"));
  EXPECT_FALSE(is_cache_file_name("0123456789abcdef.tar.bak"));
  EXPECT_FALSE(is_cache_file_name("train-000000.tar"));
}

}  // namespace
}  // namespace sluice::stages::remote
