#include "tidegate/common/config_error.h"

#include <cctype>
#include <cmath>
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

YAML::Node child(const YAML::Node& parent, const std::string& key) {
  if (!parent || parent.IsNull()) return YAML::Node();
  if (!parent.IsMap()) return YAML::Node();
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
  const auto node = child(parent, key);
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
  throw ConfigError(path_join(path, key), yaml_line(child(parent, key)), expected + " (got '" + value + "')");
}

double yaml_double(const YAML::Node& parent, const std::string& key, const std::string& path,
                   std::optional<double> fallback, std::optional<double> min, std::optional<double> max) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key);
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
  const auto node = child(parent, key);
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
  const auto node = child(parent, key);
  if (!node || node.IsNull()) {
    if (!fallback) throw ConfigError(full, yaml_line(parent), "required key is missing");
    return *fallback;
  }
  if (!node.IsScalar()) throw ConfigError(full, yaml_line(node), "expected true or false");
  return convert_or_throw<bool>(node, full, "true or false");
}

double parse_duration_seconds(const std::string& text) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    throw std::invalid_argument("not a duration: '" + text + "'");
  }
  std::string unit = text.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  double scale;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "us") scale = 1e-6;
  else if (unit == "ns") scale = 1e-9;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  else if (unit == "d") scale = 86400;
  else throw std::invalid_argument("unknown duration unit '" + unit + "' (use ns, us, ms, s, m, h, d)");
  if (!std::isfinite(value) || value < 0) throw std::invalid_argument("duration must be >= 0: '" + text + "'");
  return value * scale;
}

std::uint64_t parse_byte_size(const std::string& text) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    throw std::invalid_argument("not a size: '" + text + "'");
  }
  std::string unit = text.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  double scale;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB" || unit == "K" || unit == "KB") scale = 1024.0;
  else if (unit == "MiB" || unit == "M" || unit == "MB") scale = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G" || unit == "GB") scale = 1024.0 * 1024 * 1024;
  else throw std::invalid_argument("unknown size unit '" + unit + "' (use KiB, MiB, GiB)");
  if (!std::isfinite(value) || value < 0) throw std::invalid_argument("size must be >= 0: '" + text + "'");
  return static_cast<std::uint64_t>(value * scale);
}

double yaml_seconds(const YAML::Node& parent, const std::string& key, const std::string& path,
                    std::optional<double> fallback) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key);
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
                         std::optional<std::uint64_t> fallback) {
  const auto full = path_join(path, key);
  const auto node = child(parent, key);
  if (!node || node.IsNull()) {
    if (!fallback) throw ConfigError(full, yaml_line(parent), "required key is missing");
    return *fallback;
  }
  if (!node.IsScalar()) throw ConfigError(full, yaml_line(node), "expected a size such as 8MiB");
  try {
    return parse_byte_size(node.Scalar());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(full, yaml_line(node), e.what());
  }
}

void yaml_reject_unknown(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known) {
  if (!map || !map.IsMap()) return;
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

}  // namespace tidegate
