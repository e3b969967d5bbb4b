// FormatTally: per-format counts and the extension mismatches for `sluice inspect`.
#include "cli/inspect_formats.hpp"

#include <cstdio>

#include "cli/console.hpp"

namespace sluice::cli {

using nlohmann::json;

void FormatTally::add(const std::string& path, std::uint64_t bytes, stages::ImageFormat content,
                      const stages::ImageProbe* probe) {
  PerFormat& f = formats_[static_cast<std::size_t>(content)];
  ++f.files;
  f.bytes += bytes;
  if (probe != nullptr) {
    ++f.bit_depths[probe->bit_depth];
    f.alpha += probe->alpha ? 1 : 0;
    f.animated += probe->animated ? 1 : 0;
  }
  const stages::ImageFormat named = stages::format_of_extension(path);
  if (content != stages::ImageFormat::kUnknown && named != stages::ImageFormat::kUnknown && named != content) {
    mismatches_.push_back({{"path", path}, {"extension", std::string(stages::format_name(named))},
                           {"content", std::string(stages::format_name(content))}});
  }
}

json FormatTally::to_json() const {
  json out = json::object();
  for (std::size_t i = 0; i < formats_.size(); ++i) {
    const PerFormat& f = formats_[i];
    if (f.files == 0) continue;
    json depths = json::object();
    for (const auto& [depth, n] : f.bit_depths) depths[std::to_string(depth)] = n;
    out[std::string(stages::format_name(static_cast<stages::ImageFormat>(i)))] = {
        {"files", f.files}, {"bytes", f.bytes}, {"bit_depths", depths}, {"alpha", f.alpha}, {"animated", f.animated}};
  }
  return {{"by_content", out}, {"extension_mismatches", mismatches_.size()}, {"mismatched_files", mismatches_}};
}

void FormatTally::print(std::ostream& out, std::size_t listed) const {
  out << "formats (by content):\n";
  for (std::size_t i = 0; i < formats_.size(); ++i) {
    const PerFormat& f = formats_[i];
    if (f.files == 0) continue;
    char line[128];
    std::snprintf(line, sizeof line, "  %-8s %8llu %10s", std::string(stages::format_name(static_cast<stages::ImageFormat>(i))).c_str(),
                  static_cast<unsigned long long>(f.files), format_bytes(f.bytes).c_str());
    out << line;
    if (!f.bit_depths.empty()) {
      out << "  bits";
      for (const auto& [depth, n] : f.bit_depths) out << ' ' << depth << " (" << n << ")";
    }
    if (f.alpha > 0) out << ", " << f.alpha << " with alpha";
    if (f.animated > 0) out << ", " << f.animated << " animated (first frame read)";
    out << '\n';
  }
  if (mismatches_.empty()) return;
  out << "extension mismatches: " << mismatches_.size() << " (decoded by content all the same)\n";
  for (std::size_t i = 0; i < mismatches_.size() && i < listed; ++i) {
    out << "  " << mismatches_[i]["path"].get<std::string>() << ": named " << mismatches_[i]["extension"].get<std::string>()
        << ", holds " << mismatches_[i]["content"].get<std::string>() << '\n';
  }
  if (mismatches_.size() > listed) out << "  ... and " << mismatches_.size() - listed << " more (--json lists all)\n";
}

}  // namespace sluice::cli
