// The tar-shard source: shard patterns expanded into files; each shard indexed, from
// its index file when that is current, else by reading its headers (stages/tar/tar_index.hpp) and
// then saved beside it where that is allowed; and the samples of all shards, in shard order, put
// into the item table with their labels.
//
// Labels: key.cls holds an integer; key.class a class name, mapped to the index of the name in
// the sorted list of every class name in the shards (as from_folder maps folder names). A data
// set uses one kind: mixing them fails the build. Without any label member, every label is 0;
// a sample without one when others have one is damaged.
//
// The index beside a shard (ShardIndex::kBesideShard) is "<shard>.sluice-idx". It is written only
// where the shard and its folder are writable and neither is chmod'ed read-only (root too:
// root may write anywhere, but a read-only data set says "do not touch"), through a temporary
// file created exclusively, synced, and then linked into place (never replacing a file someone
// else made) or renamed over an index of ours. A file of that name that is not sluice's index
// (its magic differs, or it is a symlink or a special file) is never read as one nor replaced.
// An index is used only while the shard keeps the size and mtime it was built from, and every
// read checks the member's own header (stages/source/read_file.cpp), so a stale or crafted index can
// make a sample fail but never read the wrong bytes silently.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sluice/pipeline/spec.hpp"
#include "stages/source/source.hpp"

namespace sluice::stages {

inline constexpr std::size_t kMaxShards = 1'000'000;

// Expands brace ranges ({000000..000146}: zero-padded to the wider bound when one starts with 0;
// also descending) and lists ({a,b}), innermost last, then globs (*, ?, [...]): a glob's matches
// sorted byte-wise, regular files only; a name without glob characters is taken as it is (it
// must exist, load_shards says so). Throws kInvalidArgument for more than kMaxShards names, a
// name given twice, or a glob that matches nothing.
// URLs (stages/remote/remote_url.hpp) take part in the brace expansion; an s3:// URL with a glob
// in its key is listed (ListObjectsV2) with `remote`'s credentials; an http(s) one is taken as it is.
std::vector<std::string> expand_shard_patterns(const std::vector<std::string>& patterns,
                                               const RemoteOptions& remote = {});

std::string shard_index_path(const std::string& shard);

// `fetch_on_demand`: remote shards whose index file ("<url>.sluice-idx") the server has are
// indexed from it and fetched only when an epoch reads them (stages/tar/shard_fetcher.hpp);
// the others are fetched here, as every remote shard is without it. The shard `first` names (the
// first epoch's first), when it is one of those, is fetched with the index files
// (remote::fetch_remote_indexes' `early`), so the epoch does not start by waiting for its first
// byte; its reads then find its copy current.
Dataset load_shards(const spec::Shards& shards, FileOps* ops, bool fetch_on_demand = false, const FirstShard& first = {});

}  // namespace sluice::stages
