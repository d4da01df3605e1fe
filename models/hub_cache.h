// The cache huggingface_hub keeps for files downloaded from the Hugging Face Hub, in its
// layout, so that a config.json that huggingface_hub (or transformers) downloaded is found
// here and one fetched here is found by them (huggingface_hub/file_download.py:
// repo_folder_name, try_to_load_from_cache, hf_hub_download):
//
//   <cache>/models--ORG--NAME/refs/main                      the commit `main` was at
//   <cache>/models--ORG--NAME/snapshots/<commit>/config.json  a link to ../../blobs/<etag>
//   <cache>/models--ORG--NAME/blobs/<etag>                   the file's bytes
//
// Without a commit (a server that sends no X-Repo-Commit) the snapshot is named `main`
// and there is no ref; without an ETag the snapshot holds the file itself.
#pragma once

#include "models/layer.h"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "planner/core/result.h"

namespace headroom {

// The version of a file the Hub served, from its response headers; either may be "".
struct HubFileVersion {
  std::string commit;  // X-Repo-Commit: the 40-hex commit `main` resolved to
  std::string etag;    // X-Linked-Etag or ETag, quotes and W/ removed: the blob's name
};

// "models--ORG--NAME": the folder of `repo_id` in the cache.
std::string HubRepoFolderName(std::string_view repo_id);

// The cached `filename` of `repo_id` at `main`, or nullopt when it is not there.
std::optional<std::filesystem::path> FindInHubCache(const std::filesystem::path& cache,
                                                    std::string_view repo_id,
                                                    std::string_view filename);

// Stores `text` as `filename` of `repo_id` at `main`. Every file is written to a
// temporary and renamed into place, and the ref last, so a reader running at the same
// time sees the old state or the new, never a half-written file.
std::optional<Error> StoreInHubCache(const std::filesystem::path& cache, std::string_view repo_id,
                                     std::string_view filename, const std::string& text,
                                     const HubFileVersion& version);

}  // namespace headroom
