// The semantic cache's on-disk records (cache/src/persistence.cc): the snapshot and the
// append-only log.<generation> files, each a run of [magic, length, CRC32, payload] records.
// Persistence::load reads a directory, so each input is laid out as files in a scratch
// directory, then loaded.
//
// Input: byte 0 picks the vector dimension (1..8); then chunks of
//   [file: 1 byte][mode: 1 byte][length: 2 bytes LE][payload: length bytes]
// appended to one of a few file names (the snapshot, logs with ordinary, zero, huge,
// out-of-range and malformed generations). Mode 0 frames the payload as a record with its right
// CRC (so mutations reach the record decoder instead of dying at the checksum), 1 appends it
// raw, 2 frames it with a wrong CRC, 3 frames it with a length one past the payload (torn).
//
// Checks: load() never throws; every entry has the dimension asked for, ids are unique; each
// entry is then checked for expiry exactly as SemanticCacheImpl::load does after a restart
// (UBSan sees the arithmetic on the loaded created_ms/ttl_s); and a snapshot of what was loaded,
// loaded again, gives back the same entries with no snapshot problem (the restart path writes
// that snapshot). K6 and K7 (fuzz/README.md) are fixed and checked.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_util.h"
#include "tidegate/cache/entry_store.h"
#include "tidegate/cache/persistence.h"

namespace fs = std::filesystem;
using tidegate::cache::Entry;
using tidegate::cache::Persistence;

namespace {

fs::path g_dir;

constexpr const char* kFiles[] = {"snapshot", "log.1", "log.2", "log.0", "log.18446744073709551615",
                                  "log.99999999999999999999", "log.7x", "snapshot.tmp"};

void put32(std::string& s, std::uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }

bool same_entry(const Entry& a, const Entry& b) {
  return a.id == b.id && a.scope_key == b.scope_key && a.model == b.model && a.tenant == b.tenant &&
         a.text == b.text && a.answer.content == b.answer.content &&
         a.answer.finish_reason == b.answer.finish_reason && a.answer.prompt_tokens == b.answer.prompt_tokens &&
         a.answer.completion_tokens == b.answer.completion_tokens && a.created_ms == b.created_ms &&
         a.last_hit_ms == b.last_hit_ms && std::memcmp(&a.ttl_s, &b.ttl_s, sizeof(double)) == 0 &&
         a.vector.size() == b.vector.size() &&
         (a.vector.empty() || std::memcmp(a.vector.data(), b.vector.data(), a.vector.size() * sizeof(float)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = fs::path(fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path()) / ("tidegate_fuzz_persistence." + std::to_string(::getpid()));
  fs::remove_all(g_dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // 1..8: the embedder's dimension is never 0, and with 0 Reader::floats passes memcpy a null
  // destination for 0 bytes (UBSan: cache/src/persistence.cc:75), a path no real cache takes.
  const std::size_t dim = 1 + data[0] % 8;
  std::string files[std::size(kFiles)];
  for (std::size_t at = 1; at + 4 <= size;) {
    const std::size_t file = data[at] % std::size(kFiles);
    const std::uint8_t mode = data[at + 1] % 4;
    const std::size_t len = std::min<std::size_t>(data[at + 2] | (data[at + 3] << 8), size - at - 4);
    const std::string payload(reinterpret_cast<const char*>(data + at + 4), len);
    at += 4 + len;
    auto& out = files[file];
    if (mode == 1) {
      out += payload;
      continue;
    }
    put32(out, 0x31434754);  // "TGC1"
    put32(out, static_cast<std::uint32_t>(len + (mode == 3 ? 1 : 0)));
    put32(out, tidegate::cache::crc32(payload.data(), payload.size()) ^ (mode == 2 ? 1u : 0u));
    out += payload;
  }

  fs::remove_all(g_dir);
  fs::create_directories(g_dir);
  for (std::size_t i = 0; i < std::size(kFiles); ++i) {
    if (files[i].empty()) continue;
    std::ofstream(g_dir / kFiles[i], std::ios::binary) << files[i];
  }

  std::vector<Entry> first;
  {
    Persistence p(g_dir.string());
    auto loaded = p.load(dim);
    std::uint64_t last_id = 0;
    for (std::size_t i = 0; i < loaded.entries.size(); ++i) {
      const auto& e = loaded.entries[i];
      FUZZ_CHECK(e.vector.size() == dim, "entry vector has the wrong dimension");
      FUZZ_CHECK(i == 0 || e.id > last_id, "entry ids not unique and ordered");
      last_id = e.id;
      // What SemanticCacheImpl::load does with every restored entry (a fixed "now": 2026).
      // K6 (fixed): NaN or huge ttl_s and out-of-range times are corrupt records now.
      (void)e.expired(1'790'000'000'000);
    }
    first = std::move(loaded.entries);
    FUZZ_CHECK(p.snapshot([&] { return first; }), "snapshot of the loaded entries failed");
  }
  // K7 (fixed): a log.18446744073709551615 made the next generation wrap to 0.
  Persistence again(g_dir.string());
  const auto reloaded = again.load(dim);
  for (const auto& problem : reloaded.problems)
    FUZZ_CHECK(problem.rfind("snapshot", 0) != 0, "the snapshot just written does not read back", problem);
  FUZZ_CHECK(reloaded.entries.size() == first.size(), "snapshot round trip: entry count differs");
  for (std::size_t i = 0; i < first.size(); ++i)
    FUZZ_CHECK(same_entry(first[i], reloaded.entries[i]), "snapshot round trip: an entry differs");
  return 0;
}
