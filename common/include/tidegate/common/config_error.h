#pragma once
// Config validation errors that name the key path and the YAML line, so an operator can
// fix a file without guessing. Every library parses its own section with these helpers.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tidegate {

class ConfigError final : public std::runtime_error {
 public:
  // `key` is a dotted path such as "models[0].replicas[1].port"; line is 1-based (0 = unknown).
  ConfigError(std::string key, int line, const std::string& message);
  const std::string& key() const { return key_; }
  int line() const { return line_; }

 private:
  std::string key_;
  int line_;
};

// 1-based line of a node, or 0 when yaml-cpp has no mark (e.g. a node built in code).
int yaml_line(const YAML::Node& node);

// Typed access that throws ConfigError naming `path` and the line on a wrong type.
// Missing optional keys return std::nullopt / the fallback.
std::string yaml_string(const YAML::Node& parent, const std::string& key, const std::string& path,
                        const std::optional<std::string>& fallback = std::nullopt);
double yaml_double(const YAML::Node& parent, const std::string& key, const std::string& path,
                   std::optional<double> fallback = std::nullopt, std::optional<double> min = std::nullopt,
                   std::optional<double> max = std::nullopt);
std::int64_t yaml_int(const YAML::Node& parent, const std::string& key, const std::string& path,
                      std::optional<std::int64_t> fallback = std::nullopt,
                      std::optional<std::int64_t> min = std::nullopt,
                      std::optional<std::int64_t> max = std::nullopt);
bool yaml_bool(const YAML::Node& parent, const std::string& key, const std::string& path,
               std::optional<bool> fallback = std::nullopt);
// Durations accept numbers (seconds) or strings with a unit: "250ms", "5s", "2m", "1h", "24h".
double yaml_seconds(const YAML::Node& parent, const std::string& key, const std::string& path,
                    std::optional<double> fallback = std::nullopt);
// Sizes accept numbers (bytes) or strings: "8KiB", "8MiB", "1GiB", "512"; no hex.
std::uint64_t yaml_bytes(const YAML::Node& parent, const std::string& key, const std::string& path,
                         std::optional<std::uint64_t> fallback = std::nullopt,
                         std::optional<std::uint64_t> min = std::nullopt,
                         std::optional<std::uint64_t> max = std::nullopt);

// One of `names`, as its index; a missing key is names[0]. Any other value throws ConfigError
// naming the key, its line and the choices ("expected auto, cpu or gpu").
std::size_t yaml_choice(const YAML::Node& parent, const std::string& key, const std::string& path,
                        const std::vector<std::string_view>& names);
// yaml_choice mapped onto an enum: yaml_enum<Mode>(node, "mode", path, {{"scope", Mode::kScope},
// {"window", Mode::kWindow}}); the first pair is the default.
template <typename E>
E yaml_enum(const YAML::Node& parent, const std::string& key, const std::string& path,
            std::initializer_list<std::pair<std::string_view, E>> choices) {
  std::vector<std::string_view> names;
  for (const auto& c : choices) names.push_back(c.first);
  return (choices.begin() + yaml_choice(parent, key, path, names))->second;
}

// Rejects keys of a mapping that are not in `known` (typos are the most common config bug).
void yaml_reject_unknown(const YAML::Node& map, const std::string& path,
                         const std::vector<std::string>& known);

// Joins a path: path_join("models[0]", "port") == "models[0].port"; path_join("", "x") == "x".
std::string path_join(const std::string& path, const std::string& key);

// Every key of every mapping in the document at most once (ConfigError naming the second one
// and the first one's line). Loaders call it right after YAML::Load.
void yaml_reject_duplicate_keys(const YAML::Node& root);

// Parse helpers also usable outside YAML (headers, CLI flags). Throw std::invalid_argument.
// Numbers are plain decimals (no hex, no sign); durations are at most kMaxDurationSeconds and
// sizes at most kMaxByteSize, so no conversion downstream can overflow.
inline constexpr double kMaxDurationSeconds = 366.0 * 86400;
inline constexpr std::uint64_t kMaxByteSize = std::uint64_t{1} << 50;
double parse_duration_seconds(const std::string& text);
std::uint64_t parse_byte_size(const std::string& text);

}  // namespace tidegate
