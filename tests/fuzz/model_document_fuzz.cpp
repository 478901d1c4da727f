// A Model JSON document (`trainscope model --json`, a report page's scaling
// models) is read back from any bytes. The reader must not crash, hang or trip
// a sanitizer; it returns a document or an error that starts with the name it
// was given; and a document it accepts, written again by the one writer,
// reads back to the same text (nothing read is lost or changed on the way).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "trainscope/scaling/model_document.hpp"

namespace sc = trainscope::scaling;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sc::ModelDocument> doc = sc::parse_model_document(text, "fuzz.json");
  if (!doc.ok()) {
    if (doc.status().message().rfind("fuzz.json: ", 0) != 0) std::abort();
    return 0;
  }
  // Everything the document holds renders (the derived fields) and evaluates.
  for (const sc::ModeledSeries& series : doc->models) {
    (void)series.model.formula();
    (void)series.model.python();
    (void)series.model.cpp();
    for (const sc::Prediction& p : series.predictions) (void)series.model.evaluate(p.coordinate);
  }
  const std::string written = sc::model_document_json(*doc);
  absl::StatusOr<sc::ModelDocument> again = sc::parse_model_document(written, "again.json");
  if (!again.ok()) std::abort();
  if (sc::model_document_json(*again) != written) std::abort();
  return 0;
}
