// JUnit XML for `validate --junit`: one <testsuite> per checkpoint, one
// <testcase> per rule. A rule with error findings fails; warnings and infos
// are listed in the case's <system-out>; rules not run are <skipped>.
#include <sstream>

#include "terminal_safe_stream.h"
#include "validate_command.h"

namespace optstate::tools {
namespace {

// Escaped for the terminal first: that leaves valid UTF-8 without control
// characters, which XML 1.0 requires (a CI server's parser rejects the rest).
std::string Xml(std::string_view raw) {
  const std::string s = EscapeForTerminal(raw);
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters, even escaped.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

std::string ValidationJUnit(const ValidationReport& r) {
  size_t failures = 0, skipped = r.skipped.size();
  std::ostringstream cases;
  for (const RuleInfo& rule : ValidationRules()) {
    cases << "    <testcase classname=\"" << Xml(r.input) << "\" name=\"" << rule.id << "\">\n";
    bool was_skipped = false;
    for (const auto& [id, why] : r.skipped) {
      if (id == rule.id) {
        cases << "      <skipped message=\"" << Xml(why) << "\"/>\n";
        was_skipped = true;
      }
    }
    std::string errors, others;
    for (const ValidationFinding& f : r.findings) {
      if (f.rule != rule.id) continue;
      std::string line = std::string(RuleSeverityName(f.severity)) + " " + f.path + ": " + f.message + "\n";
      (f.severity == RuleSeverity::kError ? errors : others) += line;
    }
    if (!errors.empty() && !was_skipped) {
      ++failures;
      cases << "      <failure message=\"" << Xml(errors.substr(0, errors.find('\n'))) << "\" type=\"" << rule.id
            << "\">" << Xml(errors) << "</failure>\n";
    }
    if (!others.empty()) cases << "      <system-out>" << Xml(others) << "</system-out>\n";
    cases << "    </testcase>\n";
  }
  std::ostringstream doc;
  doc << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"optstate validate\" tests=\"" << ValidationRules().size() << "\" failures=\"" << failures
      << "\">\n"
      << "  <testsuite name=\"" << Xml(r.input) << "\" tests=\"" << ValidationRules().size() << "\" failures=\""
      << failures << "\" errors=\"0\" skipped=\"" << skipped << "\">\n"
      << cases.str() << "  </testsuite>\n</testsuites>\n";
  return doc.str();
}

}  // namespace optstate::tools
