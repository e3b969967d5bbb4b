// remote_parsers_fuzzer: what the remote transport reads from the network (src/stages/remote):
// ListObjectsV2 pages, and response header lines (ETag, Content-Length, Content-Range,
// Retry-After). Input: [0] selects, the rest is the text.
//   byte 0 even: an S3 listing page; each key must be shorter than the page (entities only
//                shrink text, but for &#N; that grows at most to 4 bytes from 4 or more)
//   byte 0 odd:  header lines, split at '\n', fed to one ResponseHeaders; a Retry-After is
//                never negative nor over an hour
// Expected: a page or sluice::Error. A finding: a crash, a sanitizer report, another exception,
// kInternal, a result outside those bounds.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "stages/remote/http_headers.hpp"
#include "stages/remote/s3_listing.hpp"

namespace sluice::fuzz {

void write_seeds(const std::filesystem::path& folder) {
  const std::string page =
      "\x00<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a/b&amp;c.tar</Key>"
      "</Contents><Contents><Key>&#x41;&#66;</Key></Contents><NextContinuationToken>t</NextContinuationToken></ListBucketResult>";
  write_seed(folder, "listing", std::vector<std::uint8_t>(page.begin(), page.end()));
  const std::string error = std::string(1, '\0') + "<Error><Code>NoSuchKey</Code><Message>x</Message></Error>";
  write_seed(folder, "error", std::vector<std::uint8_t>(error.begin(), error.end()));
  const std::string headers =
      "\x01HTTP/1.1 206 Partial\r\nETag: \"x\"\r\nContent-Length: 10\r\nContent-Range: bytes 5-14/15\r\n"
      "Retry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\nRetry-After: 12\r\n";
  write_seed(folder, "headers", std::vector<std::uint8_t>(headers.begin(), headers.end()));
}

}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    try {
      const stages::remote::ListPage page = stages::remote::parse_list_objects_v2(text);
      std::size_t bytes = 0;
      for (const std::string& key : page.keys) bytes += key.size();
      if (bytes > text.size()) fuzz::finding("listing", "keys longer than the page");
      if (page.truncated && page.next_token.empty()) fuzz::finding("listing", "truncated without a token");
    } catch (const Error& e) {
      fuzz::check_error(e, "listing");
    }
    return 0;
  }
  stages::remote::ResponseHeaders headers;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    headers.add_line(text.substr(start, end - start + (end < text.size() ? 1 : 0)), 1700000000);
    if (headers.retry_after_s && (*headers.retry_after_s < 0 || *headers.retry_after_s > 3600)) {
      fuzz::finding("headers", "Retry-After out of bounds");
    }
    start = end + 1;
  }
  return 0;
}
