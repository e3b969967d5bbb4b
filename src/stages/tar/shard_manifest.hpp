// The manifest `sluice prepare shards` writes last beside a shard set (PREFIX-manifest.json: each
// shard's name, members, bytes and XXH3, the class list): what tells a complete set from one a
// killed run left. load_shards checks the shards a pattern matched against it.
#pragma once

#include <string>
#include <vector>

namespace sluice::stages {

// For each folder of `shards`: a shard that a PREFIX-manifest.json there lists must have the size
// the manifest gives (else sluice::Error kCorruptData naming the shard: cut or changed since it
// was written). A shard set without a manifest whose folder holds a dead run's hidden
// ".NAME.partial-PID" is one a `prepare shards` run did not finish: refused, naming it. Sets
// written by other tools (no manifest, no partial file) are taken as they are.
void check_shard_manifests(const std::vector<std::string>& shards);

}  // namespace sluice::stages
