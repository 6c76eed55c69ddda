#include "tidegate/common/config_error.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <system_error>
#include <map>
#include <sstream>

namespace tidegate {
namespace {

std::string format_message(const std::string& key, int line, const std::string& message) {
  std::ostringstream out;
  out << "config: " << (key.empty() ? "<root>" : key);
  if (line > 0) out << " (line " << line << ")";
  out << ": " << message;
  return out.str();
}

// A section given as a scalar or a list (`lifecycle: 5`) is an error, not an empty section:
// silently taking every default there hid typos.
YAML::Node child(const YAML::Node& parent, const std::string& key, const std::string& parent_path) {
  if (!parent || parent.IsNull()) return YAML::Node();
  if (!parent.IsMap()) throw ConfigError(parent_path, yaml_line(parent), "expected a mapping");
  return parent[key];
}

template <typename T>
T convert_or_throw(const YAML::Node& node, const std::string& path, const char* what) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw ConfigError(path, yaml_line(node), std::string("expected ") + what);
  }
}

}  // namespace

ConfigError::ConfigError(std::string key, int line, const std::string& message)
    : std::runtime_error(format_message(key, line, message)), key_(std::move(key)), line_(line) {}

int yaml_line(const YAML::Node& node) {
  if (!node) return 0;
  const auto mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

std::string path_join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string yaml_string(const YAML::Node& parent, const std::string& key, const std::string& path,
                        const std::optional<std::string>& fallback) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key, path);
  if (!node || node.IsNull()) {
    if (fallback) return *fallback;
    throw ConfigError(full, yaml_line(parent), "required key is missing");
  }
  if (!node.IsScalar()) throw ConfigError(full, yaml_line(node), "expected a string");
  return node.Scalar();
}

std::size_t yaml_choice(const YAML::Node& parent, const std::string& key, const std::string& path,
                        const std::vector<std::string_view>& names) {
  const auto value = yaml_string(parent, key, path, std::string(names.front()));
  for (std::size_t i = 0; i < names.size(); ++i)
    if (value == names[i]) return i;
  std::string expected = "expected ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) expected += i + 1 == names.size() ? " or " : ", ";
    expected += names[i];
  }
  throw ConfigError(path_join(path, key), yaml_line(child(parent, key, path)), expected + " (got '" + value + "')");
}

double yaml_double(const YAML::Node& parent, const std::string& key, const std::string& path,
                   std::optional<double> fallback, std::optional<double> min, std::optional<double> max) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key, path);
  double v;
  if (!node || node.IsNull()) {
    if (!fallback) throw ConfigError(full, yaml_line(parent), "required key is missing");
    v = *fallback;
  } else {
    if (!node.IsScalar()) throw ConfigError(full, yaml_line(node), "expected a number");
    v = convert_or_throw<double>(node, full, "a number");
    if (!std::isfinite(v)) throw ConfigError(full, yaml_line(node), "expected a finite number");
  }
  if (min && v < *min) {
    std::ostringstream m;
    m << "must be >= " << *min << ", got " << v;
    throw ConfigError(full, yaml_line(node ? node : parent), m.str());
  }
  if (max && v > *max) {
    std::ostringstream m;
    m << "must be <= " << *max << ", got " << v;
    throw ConfigError(full, yaml_line(node ? node : parent), m.str());
  }
  return v;
}

std::int64_t yaml_int(const YAML::Node& parent, const std::string& key, const std::string& path,
                      std::optional<std::int64_t> fallback, std::optional<std::int64_t> min,
                      std::optional<std::int64_t> max) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key, path);
  std::int64_t v;
  if (!node || node.IsNull()) {
    if (!fallback) throw ConfigError(full, yaml_line(parent), "required key is missing");
    v = *fallback;
  } else {
    if (!node.IsScalar()) throw ConfigError(full, yaml_line(node), "expected an integer");
    v = convert_or_throw<std::int64_t>(node, full, "an integer");
  }
  if (min && v < *min)
    throw ConfigError(full, yaml_line(node ? node : parent),
                      "must be >= " + std::to_string(*min) + ", got " + std::to_string(v));
  if (max && v > *max)
    throw ConfigError(full, yaml_line(node ? node : parent),
                      "must be <= " + std::to_string(*max) + ", got " + std::to_string(v));
  return v;
}

bool yaml_bool(const YAML::Node& parent, const std::string& key, const std::string& path,
               std::optional<bool> fallback) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key, path);
  if (!node || node.IsNull()) {
    if (!fallback) throw ConfigError(full, yaml_line(parent), "required key is missing");
    return *fallback;
  }
  if (!node.IsScalar()) throw ConfigError(full, yaml_line(node), "expected true or false");
  return convert_or_throw<bool>(node, full, "true or false");
}

namespace {

// A plain decimal number at the start of `text` ("250", "1.5", "2e3"), the rest left for the
// unit. std::from_chars, unlike stod, takes no hex ("0x10"), no sign, no leading space and no
// locale; inf and nan come back and are refused by the callers' finiteness checks.
double leading_decimal(const std::string& text, std::size_t* pos, const char* what) {
  double value = 0;
  const auto* first = text.data();
  const auto [end, ec] = std::from_chars(first, first + text.size(), value, std::chars_format::general);
  if (ec != std::errc() || end == first || !std::isfinite(value) ||
      !std::isdigit(static_cast<unsigned char>(text.front())))
    throw std::invalid_argument(std::string("not a ") + what + ": '" + text + "'");
  *pos = static_cast<std::size_t>(end - first);
  return value;
}

std::string trimmed_unit(const std::string& text, std::size_t pos) {
  std::string unit = text.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  return unit;
}

}  // namespace

double parse_duration_seconds(const std::string& text) {
  std::size_t pos = 0;
  const double value = leading_decimal(text, &pos, "duration");
  const std::string unit = trimmed_unit(text, pos);
  double scale;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "us") scale = 1e-6;
  else if (unit == "ns") scale = 1e-9;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  else if (unit == "d") scale = 86400;
  else throw std::invalid_argument("unknown duration unit '" + unit + "' (use ns, us, ms, s, m, h, d)");
  // Durations become std::chrono deadlines and timer arguments; past a year they are a typo
  // (1e300s overflowed the conversion and fired at once).
  if (value * scale > kMaxDurationSeconds)
    throw std::invalid_argument("duration must be at most 366d: '" + text + "'");
  return value * scale;
}

std::uint64_t parse_byte_size(const std::string& text) {
  std::size_t pos = 0;
  const double value = leading_decimal(text, &pos, "size");
  const std::string unit = trimmed_unit(text, pos);
  double scale;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB" || unit == "K" || unit == "KB") scale = 1024.0;
  else if (unit == "MiB" || unit == "M" || unit == "MB") scale = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G" || unit == "GB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "TiB" || unit == "T" || unit == "TB") scale = 1024.0 * 1024 * 1024 * 1024;
  else throw std::invalid_argument("unknown size unit '" + unit + "' (use KiB, MiB, GiB, TiB)");
  // Past this the double-to-integer conversion is undefined; every caller has a lower cap.
  if (value * scale > static_cast<double>(kMaxByteSize))
    throw std::invalid_argument("size must be at most 1024TiB: '" + text + "'");
  return static_cast<std::uint64_t>(value * scale);
}

double yaml_seconds(const YAML::Node& parent, const std::string& key, const std::string& path,
                    std::optional<double> fallback) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key, path);
  if (!node || node.IsNull()) {
    if (!fallback) throw ConfigError(full, yaml_line(parent), "required key is missing");
    return *fallback;
  }
  if (!node.IsScalar()) throw ConfigError(full, yaml_line(node), "expected a duration such as 5s or 250ms");
  try {
    return parse_duration_seconds(node.Scalar());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(full, yaml_line(node), e.what());
  }
}

std::uint64_t yaml_bytes(const YAML::Node& parent, const std::string& key, const std::string& path,
                         std::optional<std::uint64_t> fallback, std::optional<std::uint64_t> min,
                         std::optional<std::uint64_t> max) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key, path);
  std::uint64_t v;
  if (!node || node.IsNull()) {
    if (!fallback) throw ConfigError(full, yaml_line(parent), "required key is missing");
    v = *fallback;
  } else {
    if (!node.IsScalar()) throw ConfigError(full, yaml_line(node), "expected a size such as 8MiB");
    try {
      v = parse_byte_size(node.Scalar());
    } catch (const std::invalid_argument& e) {
      throw ConfigError(full, yaml_line(node), e.what());
    }
  }
  if (min && v < *min)
    throw ConfigError(full, yaml_line(node ? node : parent),
                      "must be at least " + std::to_string(*min) + " bytes, got " + std::to_string(v));
  if (max && v > *max)
    throw ConfigError(full, yaml_line(node ? node : parent),
                      "must be at most " + std::to_string(*max) + " bytes, got " + std::to_string(v));
  return v;
}

void yaml_reject_unknown(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known) {
  if (!map || map.IsNull()) return;
  if (!map.IsMap()) throw ConfigError(path, yaml_line(map), "expected a mapping");
  for (const auto& kv : map) {
    const auto key = kv.first.Scalar();
    bool found = false;
    for (const auto& k : known) found = found || (k == key);
    if (!found) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw ConfigError(path_join(path, key), yaml_line(kv.first), "unknown key (expected one of: " + list + ")");
    }
  }
}

namespace {

// yaml-cpp keeps both entries of a duplicated key and every lookup finds the first, so a key
// rotated by appending a new entry left the old one in force. Aliases can make a small file
// a huge tree (a billion laughs); the walk is bounded by node count and depth.
struct DuplicateWalk {
  std::size_t visited = 0;
  static constexpr std::size_t kMaxNodes = 1'000'000;
  static constexpr int kMaxDepth = 64;

  void walk(const YAML::Node& node, const std::string& path, int depth) {
    if (++visited > kMaxNodes) throw ConfigError(path, yaml_line(node), "config too large (more than a million nodes)");
    if (depth > kMaxDepth) throw ConfigError(path, yaml_line(node), "config nested too deeply");
    if (node.IsMap()) {
      std::map<std::string, int> seen;
      for (const auto& kv : node) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("<complex key>");
        const auto full = path_join(path, key);
        if (const auto [it, fresh] = seen.emplace(key, yaml_line(kv.first)); !fresh)
          throw ConfigError(full, yaml_line(kv.first),
                            "duplicate key (first at line " + std::to_string(it->second) + "); remove one");
        walk(kv.second, full, depth + 1);
      }
    } else if (node.IsSequence()) {
      for (std::size_t i = 0; i < node.size(); ++i)
        walk(node[i], path + "[" + std::to_string(i) + "]", depth + 1);
    }
  }
};

}  // namespace

void yaml_reject_duplicate_keys(const YAML::Node& root) {
  DuplicateWalk walk;
  walk.walk(root, "", 0);
}

}  // namespace tidegate
