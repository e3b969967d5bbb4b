// S3 ListObjectsV2 responses (the XML a GET /bucket?list-type=2&prefix=P returns), read without
// an XML library: the object keys of its <Contents>, <IsTruncated> and <NextContinuationToken>,
// or an <Error>'s code and message. The bytes come from the network, so this is fuzzed
// (fuzz/remote_parsers_fuzzer.cpp): any input gives a page or a sluice::Error, never more keys
// than the text has room for.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice::stages::remote {

struct ListPage {
  std::vector<std::string> keys;
  bool truncated = false;
  std::string next_token;  // set when truncated
};

// Throws sluice::Error (kIo) for an <Error> document, kCorruptData for text that is not a
// ListBucketResult, a truncated page without a continuation token, or an entity it cannot decode.
ListPage parse_list_objects_v2(std::string_view xml);

// XML character data: the five named entities and &#N; / &#xN; (as UTF-8) decoded.
std::string xml_unescape(std::string_view text);

}  // namespace sluice::stages::remote
