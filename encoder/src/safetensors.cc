#include "safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tidegate::encoder {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

// Distinguishes our own messages from Boost.JSON's (which are std::runtime_errors too).
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

SafeTensorsFile::SafeTensorsFile(const std::string& path) : path_(path) {
  auto fail = [&](const std::string& why) { throw FormatError("safetensors '" + path_ + "': " + why); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(std::strerror(errno));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail("file too short");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(std::string("mmap: ") + std::strerror(errno));
  }
  try {
    const auto* base = static_cast<const unsigned char*>(map_);
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, base, 8);
    if (header_len > size_ - 8) fail("header length exceeds the file");
    boost::json::error_code ec;
    const auto header =
        boost::json::parse(std::string_view(reinterpret_cast<const char*>(base + 8), header_len), ec);
    if (ec || !header.is_object()) fail("header is not a JSON object");
    const unsigned char* data = base + 8 + header_len;
    const std::size_t data_size = size_ - 8 - header_len;
    for (const auto& [key, value] : header.as_object()) {
      if (key == "__metadata__") {
        if (const auto* meta = value.if_object())
          for (const auto& [mk, mv] : *meta)
            if (mv.is_string()) metadata_.emplace(std::string(mk), std::string(mv.as_string()));
        continue;
      }
      const auto* obj = value.if_object();
      if (obj == nullptr) fail("entry '" + std::string(key) + "' is not an object");
      Tensor t;
      try {
        t.dtype = std::string(obj->at("dtype").as_string());
        std::size_t count = 1;
        for (const auto& d : obj->at("shape").as_array()) {
          t.shape.push_back(static_cast<std::size_t>(d.to_number<std::uint64_t>()));
          // A product that wraps would pass the size check below (the fuzzer's K3).
          if (t.shape.back() != 0 && count > data_size / t.shape.back())
            fail("tensor '" + std::string(key) + "' shape is larger than the file");
          count *= t.shape.back();
        }
        const auto& offsets = obj->at("data_offsets").as_array();
        const auto begin = offsets.at(0).to_number<std::uint64_t>();
        const auto end = offsets.at(1).to_number<std::uint64_t>();
        if (begin > end || end > data_size) fail("tensor '" + std::string(key) + "' lies outside the file");
        const std::size_t elem = dtype_size(t.dtype);
        if (elem != 0 && count * elem != end - begin) fail("tensor '" + std::string(key) + "' size disagrees with shape");
        t.data = data + begin;
        t.bytes = end - begin;
      } catch (const FormatError&) {
        throw;
      } catch (const std::exception& e) {
        fail("tensor '" + std::string(key) + "': malformed entry (" + e.what() + ")");
      }
      tensors_.emplace(std::string(key), std::move(t));
    }
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

SafeTensorsFile::~SafeTensorsFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

std::string SafeTensorsFile::metadata(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? std::string() : it->second;
}

const SafeTensorsFile::Tensor* SafeTensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace tidegate::encoder
