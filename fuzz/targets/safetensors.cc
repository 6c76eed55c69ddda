// The safetensors reader (cache/encoder/src/safetensors.cc) that loads the MiniLM weights: an
// 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, the
// tensor bytes. The reader takes a path and mmaps it, so each input is written to one memfd
// (made once) and opened through /proc/self/fd.
// Only std::runtime_error may escape the constructor (FormatError or a Boost.JSON error it
// wraps); anything else aborts. For every tensor the reader accepted, checked against the header
// parsed independently: its bytes lie inside the file's data section, and, for a known dtype,
// shape product x element size == bytes with no overflow on the way (a consumer sizes its reads
// from the shape).
#include <sys/mman.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "fuzz_util.h"
#include "safetensors.h"

namespace {

int g_fd = -1;
std::string g_path;

std::size_t elem_size(std::string_view d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_fd = ::memfd_create("fuzz_safetensors", MFD_CLOEXEC);
  if (g_fd < 0) std::abort();
  g_path = "/proc/self/fd/" + std::to_string(g_fd);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (::ftruncate(g_fd, 0) != 0 || ::pwrite(g_fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  std::unique_ptr<tidegate::encoder::SafeTensorsFile> file;
  try {
    file = std::make_unique<tidegate::encoder::SafeTensorsFile>(g_path);
  } catch (const std::runtime_error&) {
    return 0;
  }
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  FUZZ_CHECK(size >= 8, "accepted a file shorter than 8 bytes", input);
  std::uint64_t header_len;
  std::memcpy(&header_len, data, 8);
  FUZZ_CHECK(header_len <= size - 8, "accepted a header longer than the file", input);
  boost::json::error_code ec;
  const auto header = boost::json::parse(input.substr(8, header_len), ec);
  FUZZ_CHECK(!ec && header.is_object(), "accepted a header that is not a JSON object", input);
  const unsigned char* base = nullptr;
  for (const auto& [key, value] : header.as_object()) {
    if (key == "__metadata__") continue;
    const auto* t = file->find(std::string(key));
    FUZZ_CHECK(t != nullptr, "a tensor of the header is missing", input);
    if (!base) base = t->data - value.at("data_offsets").as_array().at(0).to_number<std::uint64_t>();
    const auto begin = value.at("data_offsets").as_array().at(0).to_number<std::uint64_t>();
    FUZZ_CHECK(t->data == base + begin, "tensor data pointer", input);
    FUZZ_CHECK(begin + t->bytes <= size - 8 - header_len, "tensor bytes outside the data section", input);
    const auto elem = elem_size(t->dtype);
    if (elem == 0) continue;
    std::size_t count = 1;
    bool overflow = false;
    for (auto d : t->shape) overflow |= __builtin_mul_overflow(count, d, &count);
    overflow |= __builtin_mul_overflow(count, elem, &count);
    // K3 (fixed): a shape product that wrapped ([2^32, 2^32] U8 over 0 bytes) passed the reader.
    FUZZ_CHECK(!overflow && count == t->bytes, "shape x dtype size does not match the tensor's bytes", input);
  }
  return 0;
}
