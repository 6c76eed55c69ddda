#include "persistence_records.h"

#include <array>

#include "tidegate/cache/persistence.h"
#include "tidegate/common/config_error.h"

namespace tidegate::cache {
namespace {

std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

}  // namespace

std::uint32_t crc32(const void* data, std::size_t n) {
  static const auto table = make_crc_table();
  std::uint32_t c = 0xffffffffu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

namespace records {
namespace {

constexpr std::int64_t kMaxTimeMs = std::int64_t{1} << 52;  // ms since 1970: past the year 100,000
constexpr std::uint32_t kMagic = 0x31434754;                 // "TGC1"
constexpr std::size_t kMaxRecord = 64u << 20;

}  // namespace

std::string frame(const std::string& payload) {
  Writer w;
  w.u32(kMagic);
  w.u32(static_cast<std::uint32_t>(payload.size()));
  w.u32(crc32(payload.data(), payload.size()));
  w.raw(payload.data(), payload.size());
  return w.take();
}

std::string encode_insert(const Entry& e) {
  Writer w;
  w.u8(kInsert);
  w.u64(e.id);
  w.i64(e.created_ms);
  w.i64(e.last_hit_ms);
  w.f64(e.ttl_s);
  w.str(e.scope_key);
  w.str(e.model);
  w.str(e.tenant);
  w.str(e.text);
  w.str(e.answer.content);
  w.str(e.answer.finish_reason);
  w.i64(e.answer.prompt_tokens);
  w.i64(e.answer.completion_tokens);
  w.u32(static_cast<std::uint32_t>(e.vector.size()));
  w.raw(e.vector.data(), e.vector.size() * sizeof(float));
  return w.take();
}

Entry decode_insert(Reader& r, std::size_t dim) {
  Entry e;
  e.id = r.num<std::uint64_t>();
  e.created_ms = r.num<std::int64_t>();
  e.last_hit_ms = r.num<std::int64_t>();
  e.ttl_s = r.num<double>();
  // Times a live entry can have; anything else is a corrupt record (NaN or 1e300 reached
  // Entry::expired's double-to-integer conversion, undefined behaviour: the fuzzer's K6).
  if (!(e.ttl_s >= 0 && e.ttl_s <= kMaxDurationSeconds) || e.created_ms < 0 || e.created_ms > kMaxTimeMs ||
      e.last_hit_ms < 0 || e.last_hit_ms > kMaxTimeMs)
    throw std::runtime_error("entry times out of range");
  e.scope_key = r.str();
  e.model = r.str();
  e.tenant = r.str();
  e.text = r.str();
  e.answer.content = r.str();
  e.answer.finish_reason = r.str();
  e.answer.prompt_tokens = r.num<std::int64_t>();
  e.answer.completion_tokens = r.num<std::int64_t>();
  const auto n = r.num<std::uint32_t>();
  if (n != dim) throw std::runtime_error("vector dimension " + std::to_string(n) + " != " + std::to_string(dim));
  r.floats(e.vector, n);
  return e;
}

std::string scan(const std::string& data, const std::function<void(std::string_view)>& on_record) {
  std::size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 12) return "torn record header at byte " + std::to_string(pos);
    std::uint32_t magic, len, crc;
    std::memcpy(&magic, data.data() + pos, 4);
    std::memcpy(&len, data.data() + pos + 4, 4);
    std::memcpy(&crc, data.data() + pos + 8, 4);
    if (magic != kMagic) return "bad record magic at byte " + std::to_string(pos);
    if (len > kMaxRecord) return "record too large at byte " + std::to_string(pos);
    if (data.size() - pos - 12 < len) return "torn record at byte " + std::to_string(pos);
    const std::string_view payload(data.data() + pos + 12, len);
    if (crc32(payload.data(), payload.size()) != crc) return "checksum mismatch at byte " + std::to_string(pos);
    try {
      on_record(payload);
    } catch (const std::exception& e) {
      return std::string("bad record at byte ") + std::to_string(pos) + " (" + e.what() + ")";
    }
    pos += 12 + len;
  }
  return "";
}

}  // namespace records
}  // namespace tidegate::cache
