#include "compare/trace_profile.h"

#include "pipeline/pipeline.h"

namespace torchneck::compare {

std::string profile_json_of_traces(const std::string& path) {
  PipelineOptions options;
  Source source = traces_source(path, options);
  return profile_json_text(source, options);
}

}  // namespace torchneck::compare
