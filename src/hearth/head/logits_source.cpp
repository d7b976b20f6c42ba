#include "hearth/head/logits_source.h"

#include "hearth/base/error.h"
#include "hearth/model/engine.h"

namespace hearth::head {

void LogitsSource::eval(int64_t seq, std::span<const int32_t> tokens, float* logits, bool all) {
  if (tokens.empty()) throw UsageError("eval of no tokens");
  model::EvalItem one{seq, tokens, logits};
  one.all_logits = all;
  eval_batch(std::span<const model::EvalItem>(&one, 1));
}

void LocalSource::eval_batch(std::span<const model::EvalItem> items) {
  engine_.eval_batch(items);
}
void LocalSource::truncate(int64_t seq, int64_t n_pos) {
  engine_.truncate(seq, n_pos);
}
void LocalSource::drop(int64_t seq) {
  engine_.drop(seq);
}
int64_t LocalSource::vocab() const {
  return engine_.hparams().vocab;
}
int64_t LocalSource::n_ctx() const {
  return engine_.n_ctx();
}
int64_t LocalSource::seq_length(int64_t seq) const {
  return engine_.seq_length(seq);
}
std::optional<LogitsSource::KvBudget> LocalSource::kv_budget() const {
  const compute::KvBlockPool* pool = engine_.kv_pool();
  if (pool == nullptr) return std::nullopt;
  return KvBudget{pool->block_rows(), pool->capacity(), pool->available()};
}
int64_t LocalSource::kv_blocks_needed(int64_t seq, int64_t n_tokens) const {
  return engine_.kv_blocks_needed(seq, n_tokens);
}
int64_t LocalSource::kv_blocks_owned(int64_t seq) const {
  return engine_.kv_blocks_owned(seq);
}
bool LocalSource::share_prefix(int64_t src, int64_t dst, int64_t n_pos) {
  if (engine_.kv_pool() == nullptr) return false;
  engine_.share_prefix(src, dst, n_pos);
  return true;
}

}  // namespace hearth::head
