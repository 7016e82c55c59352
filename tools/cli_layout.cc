#include "cli_layout.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace optstate::tools {
namespace {

class StableFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    std::ostringstream out;
    if (opt->get_type_size() != 0) {
      if (!opt->get_type_name().empty()) out << " " << get_label(opt->get_type_name());
      if (!opt->get_default_str().empty()) out << "=" << opt->get_default_str();
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) {
        out << " ...";
      } else if (opt->get_expected_min() > 1) {
        out << " x " << opt->get_expected();
      }
      if (opt->get_required()) out << " " << get_label("REQUIRED");
    }
    if (!opt->get_envname().empty()) out << " (" << get_label("Env") << ":" << opt->get_envname() << ")";
    if (!opt->get_needs().empty()) {
      out << " " << get_label("Needs") << ":";
      for (const CLI::Option* other : opt->get_needs()) out << " " << other->get_name();
    }
    if (!opt->get_excludes().empty()) {
      out << " " << get_label("Excludes") << ":";
      for (const CLI::Option* other : opt->get_excludes()) out << " " << other->get_name();
    }
    return out.str();
  }
};

}  // namespace

std::shared_ptr<CLI::Formatter> StableHelpFormatter() { return std::make_shared<StableFormatter>(); }

CLI::Validator IntegerRange(int64_t lowest, int64_t highest, const std::string& type) {
  std::string description = type + " in [" + std::to_string(lowest) + " - " + std::to_string(highest) + "]";
  auto check = [lowest, highest](std::string& input) {
    // Base 0, as CLI11 itself converts integers: "0x10" is 16.
    errno = 0;
    char* stop = nullptr;
    long long value = input.empty() ? 0 : std::strtoll(input.c_str(), &stop, 0);
    bool whole = !input.empty() && stop == input.c_str() + input.size();
    if (!whole || errno == ERANGE || value < lowest || value > highest) {
      return "Value " + input + " not in range " + std::to_string(lowest) + " to " + std::to_string(highest);
    }
    return std::string();
  };
  return CLI::Validator(check, description);
}

}  // namespace optstate::tools
