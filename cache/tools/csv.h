#pragma once
// CSV for the cache's tools and benches (the labelled question pairs in ../shared/data).
#include <istream>
#include <string>
#include <vector>

namespace tidegate::cache {

// RFC 4180: quoted fields may hold commas, doubled quotes and newlines. Rows as read, header first.
std::vector<std::vector<std::string>> parse_csv(std::istream& in);

// The index of column `name` in the header row; throws std::runtime_error naming it when absent.
std::size_t csv_column(const std::vector<std::string>& header, const std::string& name);

}  // namespace tidegate::cache
