// JSON text that holds any path: nlohmann's dump() throws (type_error 316) on a string that is
// not valid UTF-8, and a file name on Linux is any bytes. dump_json() writes the document as
// dump() would, except that each byte of a string that is not part of a valid UTF-8 sequence is
// written as the escape \udcXX (XX its value, 80 to ff): Python's surrogateescape convention
// (PEP 383), so json.loads gives the str os.fsdecode would, and os.fsencode gives the bytes back.
// No valid UTF-8 string contains U+DC80..U+DCFF, so the escaping loses nothing (docs/stats.md).
// Used for every document sluice writes that may carry a path: statistics, `bench --json`,
// `inspect --json`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sluice {

// `indent` < 0: one line, as dump(-1); otherwise dump(indent)'s layout.
std::string dump_json(const nlohmann::json& value, int indent = -1);
std::string dump_json(const nlohmann::ordered_json& value, int indent = -1);

// For a strict parser that refuses a lone surrogate (nlohmann's parse() does): `json_text` with
// each \udc80..\udcff escape that is not the second half of a surrogate pair replaced by
// \ufffd, the replacement character. For reading the numbers of a document whose paths do not
// matter (`sluice sweep` reads `bench --json`); lossy for those paths.
std::string without_byte_escapes(std::string_view json_text);

// `text` as a JSON string literal, quotes included, with the escaping above.
void append_json_string(std::string& out, std::string_view text);

}  // namespace sluice
