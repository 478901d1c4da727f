// Everything a training loop needs: #include "trainscope/trainscope.hpp".
#ifndef TRAINSCOPE_TRAINSCOPE_HPP_
#define TRAINSCOPE_TRAINSCOPE_HPP_

#include "trainscope/cpu_gpu_timer.hpp"
#include "trainscope/errors.hpp"
#include "trainscope/export_pipeline.hpp"
#include "trainscope/exporter.hpp"
#include "trainscope/file_exporter.hpp"
#include "trainscope/gpu_event_source.hpp"
#include "trainscope/scoped_region.hpp"
#include "trainscope/stats_format.hpp"
#include "trainscope/stdout_exporter.hpp"
#include "trainscope/time_stats.hpp"
#include "trainscope/time_type.hpp"
#include "trainscope/timer.hpp"
#include "trainscope/timer_options.hpp"
#include "trainscope/version.hpp"

#endif  // TRAINSCOPE_TRAINSCOPE_HPP_
