#pragma once
// The config system fills the runtime's option structs (actors/job_options.hpp); their names, as
// apps/ uses them.

#include "actors/job_options.hpp"

namespace troupe::apps {

using actors::CheckpointOptions;
using actors::CommOptions;
using actors::ContextOptions;
using actors::DataOptions;
using actors::ExpertOptions;
using actors::FaultOptions;
using actors::InitOptions;
using actors::JobConfig;
using actors::ModelOptions;
using actors::MonitorOptions;
using actors::PipelineOptions;
using actors::ResolvedJob;
using actors::SampleOptions;
using actors::TensorOptions;
using actors::TrainOptions;

}  // namespace troupe::apps
