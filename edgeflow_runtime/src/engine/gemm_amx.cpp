// AMX INT8 GEMM (compiled with -mamx-tile -mamx-int8 and AVX-512; called only where the CPU has AMX-INT8 and
// AVX-512 VNNI and Linux has granted this process AMX's tile data: gemm_dispatch.cpp asks once).
//
// tdpbssd multiplies signed bytes by signed bytes. For an A tile of 16 rows x 64 bytes (16 activation rows, 64 k) and
// a B tile of 16 rows x 64 bytes (16 steps of 4 k, each 16 channels x 4 bytes) it adds
//   C[t][j] += sum_{s < 16, i < 4} A[t][4s + i] * B[s][4j + i]
// into a 16 x 16 int32 tile: 16,384 multiply-adds per instruction, summed exactly in int32, with no offset or
// correction (both operands are signed; |y| < 2^31 as gemm.h bounds it).
//
// Layout: the weights are repacked per call, 32 channels at a time, into gemm_pack16.h's groups (signed; K padded
// with zeros to whole 64-byte tiles, so a group's B tile for k-block kb is the 1 KB at group + kb * 1024, stride 64).
// The activations load straight from their rows (stride lda) when T % 16 == 0 and K % 64 == 0, as in every prefill
// chunk but the last; otherwise from a zero-padded copy (O(T K) bytes against the O(T C K) products). Each 32 x 32
// block of y is 2 x 2 accumulator tiles (tmm0-3) fed by two A tiles (tmm4-5) and two B tiles (tmm6-7), channel
// blocks outer so that their packed weights (32 x K bytes: 48 KB at K = 1536) stay in L2 while the rows stream past.
// Full 16 x 16 tiles store straight into y; tiles cut by T or C go through a scratch tile.
//
// Below kMinRows rows (decode, short chunks) the AVX-512 VNNI kernel runs instead: a tile's 16 rows would be mostly
// padding, and the repack would cost as much as the products.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstring>

#include "amx_tiles.h"
#include "gemm.h"
#include "gemm_pack16.h"

namespace edgeflow {

void gemm_s8_avx512vnni(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy);

namespace {

constexpr int kRows = 16;       // rows of every tile
constexpr int kTileK = 64;      // bytes of a tile row: k per A tile, 16 steps of 4 per B tile
constexpr int kBlock = 2 * 16;  // rows and channels of one 2 x 2 block of accumulator tiles
constexpr int kMinRows = 16;
static_assert(kRows == 16 && kTileK == 64, "amx_tiles.h configures every tile as 16 rows x 64 bytes");

// _tile_stored of accumulator tile 0-3 (the intrinsic pastes its tile number into the instruction text, so it must
// be a literal; inlined with a constant `tile`, the switch folds away).
inline void tile_stored(int tile, int32_t* dst, int stride_bytes) {
    switch (tile) {
        case 0: _tile_stored(0, dst, stride_bytes); break;
        case 1: _tile_stored(1, dst, stride_bytes); break;
        case 2: _tile_stored(2, dst, stride_bytes); break;
        default: _tile_stored(3, dst, stride_bytes); break;
    }
}

// Accumulator tile `tile` (16 x 16 int32) -> y, of which `rows` x `cols` lie inside the output.
inline void store_tile(int tile, int32_t* y, int ldy, int rows, int cols) {
    if (rows == kRows && cols == kGroup) return tile_stored(tile, y, ldy * int(sizeof(int32_t)));
    alignas(64) int32_t part[kRows * kGroup];
    tile_stored(tile, part, kGroup * int(sizeof(int32_t)));
    for (int r = 0; r < rows; ++r) std::memcpy(y + size_t(r) * ldy, part + r * kGroup, size_t(cols) * sizeof(int32_t));
}

// One block of MR x NR accumulator tiles (MR, NR in 1..2): rows a[0 .. 16 MR) (stride lda, kblocks * 64 readable
// bytes each) against the NR packed groups at pw, pw + gstride; y rows < rows and channels < cols are written.
template <int MR, int NR>
void tile_block(int kblocks, const int8_t* a, int lda, const uint8_t* pw, size_t gstride, int32_t* y, int ldy,
                int rows, int cols) {
    _tile_zero(0);
    if constexpr (NR == 2) _tile_zero(1);
    if constexpr (MR == 2) _tile_zero(2);
    if constexpr (MR == 2 && NR == 2) _tile_zero(3);
    for (int kb = 0; kb < kblocks; ++kb) {
        _tile_loadd(4, a + kb * kTileK, lda);
        _tile_loadd(6, pw + size_t(kb) * kRows * kTileK, kTileK);
        if constexpr (MR == 2) _tile_loadd(5, a + size_t(kRows) * lda + kb * kTileK, lda);
        if constexpr (NR == 2) _tile_loadd(7, pw + gstride + size_t(kb) * kRows * kTileK, kTileK);
        _tile_dpbssd(0, 4, 6);
        if constexpr (NR == 2) _tile_dpbssd(1, 4, 7);
        if constexpr (MR == 2) _tile_dpbssd(2, 5, 6);
        if constexpr (MR == 2 && NR == 2) _tile_dpbssd(3, 5, 7);
    }
    const int r0 = rows < kRows ? rows : kRows, c0 = cols < kGroup ? cols : kGroup;
    store_tile(0, y, ldy, r0, c0);
    if constexpr (NR == 2) store_tile(1, y + kGroup, ldy, r0, cols - kGroup);
    if constexpr (MR == 2) store_tile(2, y + size_t(kRows) * ldy, ldy, rows - kRows, c0);
    if constexpr (MR == 2 && NR == 2) store_tile(3, y + size_t(kRows) * ldy + kGroup, ldy, rows - kRows, cols - kGroup);
}

template <int NR>
void block_rows(int T, int Tp, int kblocks, const int8_t* a, int lda, const uint8_t* pw, size_t gstride, int32_t* y,
                int ldy, int cols) {
    int t = 0;
    for (; t + kBlock <= Tp; t += kBlock)
        tile_block<2, NR>(kblocks, a + size_t(t) * lda, lda, pw, gstride, y + size_t(t) * ldy, ldy,
                          T - t < kBlock ? T - t : kBlock, cols);
    if (t < Tp)  // one 16-row tile left
        tile_block<1, NR>(kblocks, a + size_t(t) * lda, lda, pw, gstride, y + size_t(t) * ldy, ldy, T - t, cols);
}

void gemm_tiles(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    static thread_local Scratch scratch;
    const int kblocks = (K + kTileK - 1) / kTileK, steps = kblocks * kTileK / 4;
    const int Tp = (T + kRows - 1) / kRows * kRows;
    const size_t gstride = size_t(steps) * 64;        // one packed group: K rounded up to 64, times 16 channels
    const bool copy = T != Tp || K % kTileK != 0;   // rows padded to 16 and k to 64 in a copy
    const size_t abytes = copy ? size_t(Tp) * kblocks * kTileK : 0;
    uint8_t* pw = static_cast<uint8_t*>(scratch.get(2 * gstride + abytes));
    if (copy) {
        int8_t* ap = reinterpret_cast<int8_t*>(pw + 2 * gstride);
        const int row = kblocks * kTileK;
        std::memset(ap, 0, abytes);
        for (int t = 0; t < T; ++t) std::memcpy(ap + size_t(t) * row, a + size_t(t) * lda, size_t(K));
        a = ap;
        lda = row;
    }
    load_tiles_16x64();
    for (int c = 0; c < C; c += kBlock) {
        const int cols = C - c < kBlock ? C - c : kBlock;
        pack_groups16<false>(cols, K, b + size_t(c) * ldb, ldb, pw, steps);
        if (cols > kGroup)
            block_rows<2>(T, Tp, kblocks, a, lda, pw, gstride, y + c, ldy, cols);
        else
            block_rows<1>(T, Tp, kblocks, a, lda, pw, gstride, y + c, ldy, cols);
    }
    _tile_release();
}

}  // namespace

void gemm_s8_amx(int T, int C, int K, const int8_t* a, int lda, const int8_t* b, int ldb, int32_t* y, int ldy) {
    if (T < kMinRows || K <= 0 || C <= 0) return gemm_s8_avx512vnni(T, C, K, a, lda, b, ldb, y, ldy);
    gemm_tiles(T, C, K, a, lda, b, ldb, y, ldy);
}

}  // namespace edgeflow
