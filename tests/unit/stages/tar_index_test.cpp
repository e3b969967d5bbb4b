// Indexing tar shards: what a well-formed shard gives (keys, offsets, labels, long
// names by ustar prefix, pax and GNU records), every damaged-tar case as a damaged sample with
// its cause and never a crash, archives written by GNU tar, and the index file's codec refusing
// anything that is not an intact index of this very shard.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "shard_support.hpp"
#include "stages/source/file_ops.hpp"
#include "stages/tar/tar_format.hpp"
#include "stages/tar/tar_index.hpp"
#include "test_support.hpp"

namespace sluice::stages {
namespace {

namespace fs = std::filesystem;
using test::TarMember;
using test::text_bytes;

std::vector<std::uint8_t> bytes_of(int n, int seed) {
  std::vector<std::uint8_t> b(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i * 7 + seed);
  return b;
}

IndexedShard scan_bytes(const std::vector<std::uint8_t>& tar) {
  test::TempDir dir;
  const fs::path path = dir / "s.tar";
  test::write_bytes(path, tar);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  IndexedShard index = scan_shard(real_file_ops(), fd, tar.size(), 7, path.string());
  ::close(fd);
  return index;
}

// The sample's image bytes as the index says they lie in the shard.
std::vector<std::uint8_t> image_of(const std::vector<std::uint8_t>& tar, const ShardSample& s) {
  return {tar.begin() + static_cast<std::ptrdiff_t>(s.offset), tar.begin() + static_cast<std::ptrdiff_t>(s.offset + s.size)};
}

std::vector<TarMember> three_samples() {
  return {{"k0.jpg", bytes_of(700, 1)},        {"k0.cls", text_bytes("3")},
          {"dir", {}, '5'},                    {"k1.jpg", bytes_of(512, 2)},
          {"k1.json", text_bytes("{}")},       {"k1.cls", text_bytes(" 0\n")},
          {"._k1.jpg", bytes_of(10, 9)},       {"dir/k2.JPEG", bytes_of(1, 3)},
          {"dir/k2.cls", text_bytes("12")},    {"README", text_bytes("not a sample")}};
}

TEST(TarIndex, WellFormedShardGivesKeysOffsetsAndLabels) {
  const test::TarLayout tar = test::make_tar(three_samples());
  const IndexedShard index = scan_bytes(tar.bytes);
  ASSERT_EQ(index.samples.size(), 3u);
  const std::vector<std::string> names = {"k0.jpg", "k1.jpg", "dir/k2.JPEG"};
  const std::vector<int> labels = {3, 0, 12};
  const std::vector<std::vector<std::uint8_t>> images = {bytes_of(700, 1), bytes_of(512, 2), bytes_of(1, 3)};
  for (std::size_t i = 0; i < 3; ++i) {
    const ShardSample& s = index.samples[i];
    EXPECT_EQ(s.name, names[i]);
    EXPECT_TRUE(s.damage.empty()) << s.damage;
    EXPECT_EQ(s.label_kind, LabelKind::kNumber);
    EXPECT_EQ(s.number, labels[i]);
    EXPECT_EQ(s.offset % 512, 0u);
    EXPECT_EQ(image_of(tar.bytes, s), images[i]);
  }
  EXPECT_EQ(index.shard_size, tar.bytes.size());
  EXPECT_EQ(index.mtime_ns, 7);
}

TEST(TarIndex, ClassNameLabelsAndUnlabelledSamples) {
  const IndexedShard index = scan_bytes(test::make_tar({{"a.jpg", bytes_of(5, 1)}, {"a.class", text_bytes("tabby cat\r\n")},
                                                        {"b.jpg", bytes_of(5, 2)}}).bytes);
  ASSERT_EQ(index.samples.size(), 2u);
  EXPECT_EQ(index.samples[0].label_kind, LabelKind::kClassName);
  EXPECT_EQ(index.samples[0].class_name, "tabby cat");
  EXPECT_EQ(index.samples[1].label_kind, LabelKind::kNone);
  EXPECT_TRUE(index.samples[1].damage.empty());  // unlabelled is tar_source's call
}

TEST(TarIndex, LongNamesByPrefixPaxAndGnuRecords) {
  const std::string split = std::string(120, 'd') + "/" + std::string(60, 'n') + ".jpg";  // ustar prefix
  const std::string pax = std::string(150, 'p') + "/" + std::string(150, 'q') + ".jpg";   // pax path record
  const std::string gnu = std::string(130, 'g') + ".jpg";
  std::vector<TarMember> members = {{split, bytes_of(3, 1)}, {pax, bytes_of(4, 2)}};
  members.push_back({"././@LongLink", text_bytes(gnu + std::string(1, '\0')), 'L'});
  members.push_back({gnu.substr(0, 100), bytes_of(5, 3)});
  const test::TarLayout tar = test::make_tar(members);
  const IndexedShard index = scan_bytes(tar.bytes);
  ASSERT_EQ(index.samples.size(), 3u);
  EXPECT_EQ(index.samples[0].name, split);
  EXPECT_EQ(index.samples[1].name, pax);
  EXPECT_EQ(index.samples[2].name, gnu);
  EXPECT_EQ(image_of(tar.bytes, index.samples[1]), bytes_of(4, 2));
  EXPECT_EQ(image_of(tar.bytes, index.samples[2]), bytes_of(5, 3));
  for (const ShardSample& s : index.samples) EXPECT_TRUE(s.damage.empty()) << s.damage;
}

// Every way a shard is damaged gives damaged samples, with the member named, the rest intact.
TEST(TarIndex, CutMemberIsDamagedAndEndsTheShard) {
  const test::TarLayout tar = test::make_tar(three_samples());
  std::vector<std::uint8_t> cut(tar.bytes.begin(), tar.bytes.begin() + static_cast<std::ptrdiff_t>(tar.headers[3] + 512 + 100));
  const IndexedShard index = scan_bytes(cut);
  ASSERT_EQ(index.samples.size(), 2u);
  EXPECT_TRUE(index.samples[0].damage.empty());
  EXPECT_EQ(index.samples[1].name, "k1.jpg");
  EXPECT_NE(index.samples[1].damage.find("cut"), std::string::npos) << index.samples[1].damage;
}

TEST(TarIndex, BadHeaderChecksumLosesThatMemberAndResumesAtTheNextHeader) {
  test::TarLayout tar = test::make_tar(three_samples());
  tar.bytes[tar.headers[3] + 1] ^= 0x20;  // k1.jpg's header, name field
  const IndexedShard index = scan_bytes(tar.bytes);
  ASSERT_EQ(index.samples.size(), 4u);
  EXPECT_TRUE(index.samples[0].damage.empty());
  EXPECT_NE(index.samples[1].damage.find("bad header checksum"), std::string::npos) << index.samples[1].damage;
  EXPECT_NE(index.samples[1].damage.find("offset " + std::to_string(tar.headers[3])), std::string::npos);
  EXPECT_NE(index.samples[1].damage.find("resumed"), std::string::npos);
  // k1's label survived without its image: damaged too.
  EXPECT_EQ(index.samples[2].name, "k1.cls");
  EXPECT_NE(index.samples[2].damage.find("no image member"), std::string::npos);
  EXPECT_EQ(index.samples[3].name, "dir/k2.JPEG");
  EXPECT_TRUE(index.samples[3].damage.empty());
}

TEST(TarIndex, MemberLargerThanTheFileIsDamaged) {
  test::TarLayout tar = test::make_tar(three_samples());
  test::set_size_field(tar.bytes, tar.headers[3], (std::uint64_t{1} << 33) - 1);  // 8 GiB - 1: the largest octal size
  const IndexedShard index = scan_bytes(tar.bytes);
  ASSERT_EQ(index.samples.size(), 2u);
  EXPECT_NE(index.samples[1].damage.find("run past the end of the shard"), std::string::npos) << index.samples[1].damage;
}

TEST(TarIndex, CutHeaderAndNumbersThatAreNotNumbers) {
  const test::TarLayout tar = test::make_tar(three_samples(), test::EndMarker::kOmit);
  std::vector<std::uint8_t> cut(tar.bytes.begin(), tar.bytes.begin() + static_cast<std::ptrdiff_t>(tar.headers[3] + 300));
  IndexedShard index = scan_bytes(cut);
  ASSERT_EQ(index.samples.size(), 2u);
  EXPECT_NE(index.samples[1].damage.find("ends inside this header"), std::string::npos) << index.samples[1].damage;

  test::TarLayout bad = test::make_tar(three_samples());
  std::memcpy(bad.bytes.data() + bad.headers[0] + 124, "0000000007x", 11);  // size field
  test::fix_checksum(bad.bytes, bad.headers[0]);
  index = scan_bytes(bad.bytes);
  ASSERT_GE(index.samples.size(), 1u);
  EXPECT_NE(index.samples[0].damage.find("not a number"), std::string::npos) << index.samples[0].damage;
}

TEST(TarIndex, KeysWithTwoImagesTwoLabelsOrBadLabelsAreDamaged) {
  const IndexedShard index = scan_bytes(test::make_tar({{"a.jpg", bytes_of(5, 1)}, {"a.jpeg", bytes_of(5, 1)},
                                                        {"b.jpg", bytes_of(5, 1)}, {"b.cls", text_bytes("1")},
                                                        {"b.class", text_bytes("cat")},
                                                        {"c.jpg", bytes_of(5, 1)}, {"c.cls", text_bytes("-4")},
                                                        {"d.jpg", bytes_of(5, 1)}, {"d.cls", bytes_of(100, 1)},
                                                        {"e.jpg", bytes_of(5, 1)}, {"e.class", text_bytes(" \n")}})
                                             .bytes);
  ASSERT_EQ(index.samples.size(), 5u);
  EXPECT_NE(index.samples[0].damage.find("two image members"), std::string::npos);
  EXPECT_NE(index.samples[1].damage.find("two label members"), std::string::npos);
  EXPECT_NE(index.samples[2].damage.find("not a non-negative integer"), std::string::npos);
  EXPECT_NE(index.samples[3].damage.find("bytes, more than a number takes"), std::string::npos);
  EXPECT_NE(index.samples[4].damage.find("empty"), std::string::npos);
}

TEST(TarIndex, MalformedPaxHeaderDamagesTheNextMember) {
  const IndexedShard index = scan_bytes(test::make_tar({{"PaxHeaders/a", text_bytes("99 path=x\n"), 'x'},
                                                        {"a.jpg", bytes_of(5, 1)}, {"b.jpg", bytes_of(5, 2)}})
                                             .bytes);
  ASSERT_EQ(index.samples.size(), 2u);
  EXPECT_NE(index.samples[0].damage.find("pax"), std::string::npos) << index.samples[0].damage;
  EXPECT_TRUE(index.samples[1].damage.empty());
}

TEST(TarIndex, ConcatenatedTarsAreReadWhole) {
  std::vector<std::uint8_t> joined = test::make_tar({{"a.jpg", bytes_of(5, 1)}}).bytes;
  const std::vector<std::uint8_t> second = test::make_tar({{"b.jpg", bytes_of(6, 2)}}).bytes;
  joined.insert(joined.end(), second.begin(), second.end());
  const IndexedShard index = scan_bytes(joined);
  ASSERT_EQ(index.samples.size(), 2u);
  EXPECT_EQ(index.samples[1].name, "b.jpg");
  EXPECT_EQ(image_of(joined, index.samples[1]), bytes_of(6, 2));
}

TEST(TarIndex, EmptyAndGarbageFilesGiveNoCrash) {
  EXPECT_TRUE(scan_bytes({}).samples.empty());
  const IndexedShard garbage = scan_bytes(bytes_of(5000, 3));
  ASSERT_EQ(garbage.samples.size(), 1u);  // a bad header at offset 0 and nothing valid after it
  EXPECT_NE(garbage.samples[0].damage.find("no valid header follows"), std::string::npos);
}

// A compressed shard is one damaged sample that says what the file is, not a quote of its bytes.
TEST(TarIndex, CompressedShardSaysSoInsteadOfQuotingItsBytes) {
  const std::vector<std::pair<std::vector<std::uint8_t>, std::string>> magics = {
      {{0x1f, 0x8b, 0x08, 0x00}, "gzip"}, {{'B', 'Z', 'h', '9'}, "bzip2"},
      {{0xfd, '7', 'z', 'X', 'Z', 0x00}, "xz"}, {{0x28, 0xb5, 0x2f, 0xfd}, "zstd"}};
  for (const auto& [magic, name] : magics) {
    std::vector<std::uint8_t> file = bytes_of(3000, 5);
    std::copy(magic.begin(), magic.end(), file.begin());
    const IndexedShard shard = scan_bytes(file);
    ASSERT_EQ(shard.samples.size(), 1u) << name;
    EXPECT_NE(shard.samples[0].damage.find("the shard is " + name + "-compressed"), std::string::npos)
        << shard.samples[0].damage;
    EXPECT_EQ(shard.samples[0].name, "header at offset 0");
  }
  // The same bytes inside a shard, after a valid member, are an ordinary bad header.
  std::vector<std::uint8_t> tar;
  tar::append_file_header(tar, "a.cls", 1, 0);
  tar.push_back('3');
  tar.resize(tar::kBlock * 2, 0);
  std::vector<std::uint8_t> gz = bytes_of(1024, 5);
  gz[0] = 0x1f;
  gz[1] = 0x8b;
  tar.insert(tar.end(), gz.begin(), gz.end());
  for (const ShardSample& s : scan_bytes(tar).samples) EXPECT_EQ(s.damage.find("compressed"), std::string::npos) << s.damage;
}

TEST(TarFormat, Base256SizesAndSignedChecksums) {
  std::vector<std::uint8_t> tar;
  tar::append_file_header(tar, "big.jpg", std::uint64_t{9} << 30, 0);  // over 8 GiB: base-256
  tar::Header h;
  std::string why;
  ASSERT_EQ(tar::parse_header(tar.data(), h, why), tar::Block::kHeader) << why;
  EXPECT_EQ(h.size, std::uint64_t{9} << 30);
  EXPECT_EQ(tar[124], 0x80);
  EXPECT_TRUE(h.ustar);
  // Old writers summed signed chars: a header with a byte >= 0x80 in its name still parses.
  std::vector<std::uint8_t> old;
  tar::append_file_header(old, "caf\xc3\xa9.jpg", 3, 0);
  int signed_sum = 0;
  for (int i = 0; i < 512; ++i) signed_sum += (i >= 148 && i < 156) ? ' ' : static_cast<signed char>(old[static_cast<std::size_t>(i)]);
  std::snprintf(reinterpret_cast<char*>(old.data() + 148), 8, "%06o", signed_sum);
  EXPECT_EQ(tar::parse_header(old.data(), h, why), tar::Block::kHeader);
  old[0] ^= 1;
  EXPECT_EQ(tar::parse_header(old.data(), h, why), tar::Block::kBadChecksum);
}

// GNU tar's own archives, in each of its formats, index to the bytes of the files it stored.
TEST(TarIndex, ArchivesWrittenByGnuTar) {
  if (std::system("tar --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "GNU tar not found";
  test::TempDir dir;
  const std::string deep = std::string(90, 'x') + "/" + std::string(70, 'y');
  fs::create_directories(dir / "in" / deep);
  test::write_bytes(dir / "in" / "a.jpg", bytes_of(1000, 1));
  test::write_bytes(dir / "in" / "a.cls", text_bytes("5"));
  test::write_bytes(dir / "in" / deep / "b.jpg", bytes_of(70000, 2));
  for (const std::string format : {"gnu", "pax", "ustar", "v7"}) {
    const fs::path out = dir / (format + ".tar");
    const std::string files = format == "ustar" || format == "v7" ? "a.jpg a.cls" : "a.jpg a.cls " + deep + "/b.jpg";
    const std::string command = "cd '" + (dir / "in").string() + "' && tar --format=" + format + " -cf '" +
                                out.string() + "' " + files + " 2>/dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const std::vector<std::uint8_t> bytes = test::read_bytes(out);
    const IndexedShard index = scan_bytes(bytes);
    ASSERT_GE(index.samples.size(), 1u) << format;
    EXPECT_EQ(index.samples[0].name, "a.jpg") << format;
    EXPECT_EQ(index.samples[0].number, 5) << format;
    EXPECT_EQ(image_of(bytes, index.samples[0]), bytes_of(1000, 1)) << format;
    if (index.samples.size() > 1) {
      EXPECT_EQ(index.samples[1].name, deep + "/b.jpg") << format;
      EXPECT_EQ(image_of(bytes, index.samples[1]), bytes_of(70000, 2)) << format;
    }
  }
}

TEST(ShardIndexFile, RoundTripsAndRefusesAnythingElse) {
  IndexedShard index{123456, 42, {}};
  for (int i = 0; i < 5; ++i) {
    ShardSample s;
    s.name = "k" + std::to_string(i) + ".jpg";
    s.offset = 512 * static_cast<std::uint64_t>(2 * i + 1);
    s.size = 100;
    s.label_kind = i % 2 == 0 ? LabelKind::kNumber : LabelKind::kClassName;
    s.number = i;
    s.class_name = i % 2 == 0 ? "" : "cat";
    s.header_size_agrees = i != 3;
    index.samples.push_back(s);
  }
  index.samples[4].damage = "cut";
  std::vector<std::uint8_t> bytes = encode_shard_index(index);
  std::string why;
  const std::optional<IndexedShard> back = decode_shard_index(bytes, 123456, 42, why);
  ASSERT_TRUE(back) << why;
  ASSERT_EQ(back->samples.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(back->samples[i].name, index.samples[i].name);
    EXPECT_EQ(back->samples[i].offset, index.samples[i].offset);
    EXPECT_EQ(back->samples[i].label_kind, index.samples[i].label_kind);
    EXPECT_EQ(back->samples[i].class_name, index.samples[i].class_name);
    EXPECT_EQ(back->samples[i].header_size_agrees, index.samples[i].header_size_agrees);
    EXPECT_EQ(back->samples[i].damage, index.samples[i].damage);
  }
  EXPECT_TRUE(is_shard_index(bytes));
  EXPECT_FALSE(decode_shard_index(bytes, 123457, 42, why));
  EXPECT_NE(why.find("changed"), std::string::npos);
  EXPECT_FALSE(decode_shard_index(bytes, 123456, 43, why));
  std::vector<std::uint8_t> flipped = bytes;
  flipped[100] ^= 1;
  EXPECT_FALSE(decode_shard_index(flipped, 123456, 42, why));
  EXPECT_FALSE(decode_shard_index(std::span(bytes).first(bytes.size() - 1), 123456, 42, why));
  // A well-formed, checksummed index whose record points past the shard is refused too.
  index.samples[0].offset = 123456;
  EXPECT_FALSE(decode_shard_index(encode_shard_index(index), 123456, 42, why));
  EXPECT_NE(why.find("out of bounds"), std::string::npos);
  EXPECT_FALSE(is_shard_index(text_bytes("SLUICETX and more")));
}

}  // namespace
}  // namespace sluice::stages
