// Everything a training loop needs: #include "trainscope/trainscope.hpp".
#ifndef TRAINSCOPE_TRAINSCOPE_HPP_
#define TRAINSCOPE_TRAINSCOPE_HPP_

#include "trainscope/common/errors.hpp"
#include "trainscope/export/export_pipeline.hpp"
#include "trainscope/export/exporter.hpp"
#include "trainscope/export/file_exporter.hpp"
#include "trainscope/export/stdout_exporter.hpp"
#include "trainscope/stats/stats_format.hpp"
#include "trainscope/stats/time_stats.hpp"
#include "trainscope/timing/cpu_gpu_timer.hpp"
#include "trainscope/timing/gpu_event_source.hpp"
#include "trainscope/timing/scoped_region.hpp"
#include "trainscope/timing/time_type.hpp"
#include "trainscope/timing/timer.hpp"
#include "trainscope/timing/timer_options.hpp"
#include "trainscope/version.hpp"

#endif  // TRAINSCOPE_TRAINSCOPE_HPP_
