#include "optstate/params.h"

#include <nlohmann/json.hpp>

#include "optstate/file_io.h"

namespace optstate {

StatusOr<std::vector<ParamInfo>> ParseParamManifest(std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return CorruptError("not valid JSON");
  // json::value() throws on a type mismatch, so every field is type-checked by hand.
  // A plain JSON list of parameters (what a one-line json.dump of the training
  // script's list gives) is the params array alone.
  const bool plain_list = doc.is_array();
  if (!plain_list) {
    if (!doc.is_object() || !doc.contains("format") || !doc["format"].is_string() ||
        doc["format"].get<std::string>() != "optstate-param-manifest") {
      return InvalidArgumentError(
          "not a parameter manifest: \"format\" must be \"optstate-param-manifest\" (or the file a plain list of "
          "parameters)");
    }
    if (!doc.contains("version") || !doc["version"].is_number_integer() || doc["version"].get<int64_t>() != 1) {
      return UnsupportedError("manifest version " + (doc.contains("version") ? doc["version"].dump() : "(none)") +
                              "; this optstate reads version 1");
    }
    if (!doc.contains("params") || !doc["params"].is_array()) {
      return InvalidArgumentError("params: expected an array");
    }
  }
  const nlohmann::json& list = plain_list ? doc : doc["params"];
  std::vector<ParamInfo> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& p = list[i];
    std::string where = (plain_list ? "[" : "params[") + std::to_string(i) + "]";
    if (!p.is_object()) return InvalidArgumentError(where + ": expected an object");
    ParamInfo info;
    if (!p.contains("name") || !p["name"].is_string() || p["name"].get<std::string>().empty()) {
      return InvalidArgumentError(where + ".name: expected a non-empty string");
    }
    info.name = p["name"].get<std::string>();
    if (!p.contains("shape") || !p["shape"].is_array()) {
      return InvalidArgumentError(where + ".shape: expected an array of non-negative integers");
    }
    uint64_t numel = 1;
    for (const auto& d : p["shape"]) {
      if (!d.is_number_unsigned()) {
        return InvalidArgumentError(where + ".shape: expected an array of non-negative integers");
      }
      info.shape.push_back(d.get<int64_t>());
      numel *= d.get<uint64_t>();
    }
    std::string dtype = p.contains("dtype") && p["dtype"].is_string() ? p["dtype"].get<std::string>() : "";
    std::optional<DType> dt = DTypeFromName(dtype);
    if (!dt) return InvalidArgumentError(where + ".dtype: unknown dtype '" + dtype + "'");
    info.dtype = *dt;
    if (p.contains("data_ptr")) {
      if (!p["data_ptr"].is_number_unsigned()) {
        return InvalidArgumentError(where + ".data_ptr: expected a non-negative integer");
      }
      info.data_ptr = p["data_ptr"].get<uint64_t>();
    }
    info.nbytes = numel * GetDTypeInfo(info.dtype).element_size;
    if (p.contains("nbytes")) {
      if (!p["nbytes"].is_number_unsigned()) {
        return InvalidArgumentError(where + ".nbytes: expected a non-negative integer");
      }
      info.nbytes = p["nbytes"].get<uint64_t>();
    }
    if (p.contains("group")) {
      if (!p["group"].is_number_unsigned() || p["group"].get<uint64_t>() > (1u << 20)) {
        return InvalidArgumentError(where + ".group: expected the index of a param group (a small non-negative integer)");
      }
      info.group = p["group"].get<int64_t>();
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::string ParamManifestText(const std::vector<ParamInfo>& params) {
  nlohmann::ordered_json doc = {{"format", "optstate-param-manifest"}, {"version", 1}};
  doc["params"] = nlohmann::ordered_json::array();
  for (const ParamInfo& p : params) {
    nlohmann::ordered_json j = {{"name", p.name}, {"shape", p.shape}, {"dtype", GetDTypeInfo(p.dtype).name}};
    if (p.data_ptr) j["data_ptr"] = *p.data_ptr;
    j["nbytes"] = p.nbytes;
    if (p.group) j["group"] = *p.group;
    doc["params"].push_back(std::move(j));
  }
  return doc.dump(1) + "\n";
}

StatusOr<std::vector<ParamInfo>> ReadParamManifest(const std::string& path) {
  OPTSTATE_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  StatusOr<std::vector<ParamInfo>> params = ParseParamManifest(AsChars(f.bytes()));
  if (!params.ok()) return std::move(params).status().WithContext(path);
  return params;
}

}  // namespace optstate
