// A stalls.json comes from disk, copied around with its runs: any bytes. The
// report's reader must not crash, hang or trip a sanitizer, must return
// either an analysis or an error naming the file, and an analysis it accepts
// must have the fields the page draws (validated, so the page's script never
// meets a missing one).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "report/stalls_data.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json out = trainscope::report::detail::parse_stalls_analysis(text, "fuzz.json");
  const bool has_analysis = out.contains("analysis");
  const bool has_error = out.contains("error");
  if (has_analysis == has_error) std::abort();
  if (has_error) {
    const std::string error = out.at("error").get<std::string>();
    if (error.rfind("fuzz.json: ", 0) != 0) std::abort();
    return 0;
  }
  const nlohmann::json& a = out.at("analysis");
  if (!a.is_object() || !a.contains("differential") || !a.contains("runs")) std::abort();
  // The page embeds it: it must serialise (valid UTF-8 was required to parse it).
  (void)a.dump();
  return 0;
}
