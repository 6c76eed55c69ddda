#pragma once
// Read-only view of a .safetensors file: 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}}, then the raw tensor bytes. The file is memory-mapped so
// loading costs no copy and the pages are shared between processes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tidegate::encoder {

class SafeTensorsFile final {
 public:
  struct Tensor {
    std::string dtype;
    std::vector<std::size_t> shape;
    const unsigned char* data = nullptr;
    std::size_t bytes = 0;
  };

  // Throws std::runtime_error naming the path on any I/O or format problem.
  explicit SafeTensorsFile(const std::string& path);
  ~SafeTensorsFile();
  SafeTensorsFile(const SafeTensorsFile&) = delete;
  SafeTensorsFile& operator=(const SafeTensorsFile&) = delete;

  const Tensor* find(const std::string& name) const;
  // A string value of the header's __metadata__ object; "" when absent.
  std::string metadata(const std::string& key) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tidegate::encoder
