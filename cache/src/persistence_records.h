#pragma once
// The records of the cache's data directory (persistence.h), apart from the files they are in:
// each record is framed as magic, length, CRC32 of the payload, payload; a payload starts with
// its type. Readers check every length before reading, and every field a live entry could not
// hold (the fuzz targets feed this code arbitrary bytes).
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tidegate/cache/entry_store.h"

namespace tidegate::cache::records {

constexpr std::uint64_t kMaxGeneration = std::uint64_t{1} << 62;
constexpr std::uint32_t kVersion = 1;
enum RecordType : std::uint8_t { kHeader = 0, kInsert = 1, kErase = 2, kTrailer = 3 };

class Writer {
 public:
  void u8(std::uint8_t v) { s_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) { raw(&v, 4); }
  void u64(std::uint64_t v) { raw(&v, 8); }
  void i64(std::int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& v) {
    u32(static_cast<std::uint32_t>(v.size()));
    s_ += v;
  }
  void raw(const void* p, std::size_t n) { s_.append(static_cast<const char*>(p), n); }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

// Throws std::runtime_error("record too short") on a read past the payload.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  template <typename T>
  T num() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = num<std::uint32_t>();
    need(n);
    std::string v(s_.substr(pos_, n));
    pos_ += n;
    return v;
  }
  void floats(std::vector<float>& out, std::size_t n) {
    need(n * sizeof(float));
    out.resize(n);
    std::memcpy(out.data(), s_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
  }

 private:
  void need(std::size_t n) const {
    if (pos_ + n > s_.size()) throw std::runtime_error("record too short");
  }
  std::string_view s_;
  std::size_t pos_ = 0;
};

// magic, length, CRC32, payload.
std::string frame(const std::string& payload);

// An insert record's payload (type included); decode_insert reads what follows the type and
// throws on a dimension other than `dim` or times no live entry has.
std::string encode_insert(const Entry& e);
Entry decode_insert(Reader& r, std::size_t dim);

// Calls `on_record` for each intact record's payload; returns "" or a description of where it
// stopped (a torn or corrupt record, or what on_record threw).
std::string scan(const std::string& data, const std::function<void(std::string_view)>& on_record);

}  // namespace tidegate::cache::records
