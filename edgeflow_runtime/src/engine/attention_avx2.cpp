// The tiled attention kernel (attention_tiled.h) on 8-float AVX2 vectors with FMA (compiled with -mavx2 -mfma; run
// only when CPUID reports both). 16 vector registers: scores 4 keys x 2 row vectors, P.V 4 rows x 2 vectors
// (8 accumulators, the loads and a broadcast stay in registers).
#define EF_ATTN_W 8
#define EF_ATTN_RK 4
#define EF_ATTN_NB 2
#define EF_ATTN_RP 4
#define EF_ATTN_NC 2
#include "attention_tiled.h"

namespace edgeflow {
void attention_item_avx2(const AttentionArgs& a, const AttentionItem& it) { run_item(a, it); }
}  // namespace edgeflow
