// What every report page embeds (internal): Chart.js and the page's own
// script and style, compiled in by cmake/TrainscopeEmbeddedTexts.cmake.
#ifndef TRAINSCOPE_SRC_REPORT_ASSETS_HPP_
#define TRAINSCOPE_SRC_REPORT_ASSETS_HPP_

namespace trainscope::report::detail {

extern const char* const kChartJsVersion;  // "3.9.1"; empty without Chart.js
extern const char* const kChartJsPath;     // where the build found it
extern const char* const kChartJs;         // its UMD build; empty without it
extern const char* const kPageJs;
extern const char* const kPageCss;

}  // namespace trainscope::report::detail

#endif  // TRAINSCOPE_SRC_REPORT_ASSETS_HPP_
