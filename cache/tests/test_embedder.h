#pragma once
// A deterministic bag-of-words embedder for tests: each lowercased word maps to a fixed
// pseudo-random direction, a text to the normalised sum. Texts sharing most words are close,
// unrelated texts are near-orthogonal. Can be made slow or failing to test fail-open.
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tidegate/encoder/embedder.h"

namespace tidegate::cache::fakes {

class WordEmbedder final : public encoder::Embedder {
 public:
  explicit WordEmbedder(std::size_t dim = 64) : dim_(dim) {}
  std::size_t dim() const override { return dim_; }
  std::string name() const override { return "test-words"; }
  std::vector<float> embed(const std::vector<std::string>& texts,
                           std::chrono::steady_clock::time_point deadline) override {
    ++calls;
    if (fail.load()) throw std::runtime_error("embedder down");
    const auto d = delay_ms.load();
    if (d > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(d));
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("embed deadline passed");
    }
    std::vector<float> out;
    for (const auto& t : texts) {
      const auto v = one(t);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  std::vector<float> one(const std::string& text) const {
    std::vector<float> v(dim_, 0.0f);
    std::string word;
    auto flush = [&] {
      if (word.empty()) return;
      std::mt19937 rng(static_cast<std::uint32_t>(std::hash<std::string>{}(word)));
      std::normal_distribution<float> n;
      for (auto& x : v) x += n(rng);
      word.clear();
    };
    for (char c : text) {
      if (std::isalnum(static_cast<unsigned char>(c)))
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      else
        flush();
    }
    flush();
    double norm = 0;
    for (auto x : v) norm += double(x) * x;
    if (norm == 0) v[0] = 1;
    else
      for (auto& x : v) x = static_cast<float>(x / std::sqrt(norm));
    return v;
  }

  std::atomic<int> calls{0};
  std::atomic<bool> fail{false};
  std::atomic<int> delay_ms{0};

 private:
  std::size_t dim_;
};

}  // namespace tidegate::cache::fakes
