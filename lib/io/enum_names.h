// A name for each value of a small enum, both ways, from one table: the
// names are what JSON reports, rules files and flags spell.
#ifndef OPTSTATE_IO_ENUM_NAMES_H_
#define OPTSTATE_IO_ENUM_NAMES_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace optstate {

template <typename E, size_t N>
class EnumNames {
 public:
  using Table = std::array<std::pair<E, std::string_view>, N>;
  // `fallback` is the name of a value outside the table (a cast from a number).
  constexpr EnumNames(Table table, std::string_view fallback) : table_(table), fallback_(fallback) {}

  std::string_view Name(E value) const {
    for (const auto& [v, name] : table_) {
      if (v == value) return name;
    }
    return fallback_;
  }

  std::optional<E> Find(std::string_view name) const {
    for (const auto& [v, n] : table_) {
      if (n == name) return v;
    }
    return std::nullopt;
  }

 private:
  Table table_;
  std::string_view fallback_;
};

}  // namespace optstate

#endif  // OPTSTATE_IO_ENUM_NAMES_H_
