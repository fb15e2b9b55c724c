// AMX tile setup shared by the AMX GEMM kernel (gemm_amx.cpp) and edgeflow-bench-int8's tdpbssd loop: palette 1 with
// tiles 0-7 all 16 rows x 64 bytes. Call only where the process holds AMX's tile data (gemm_dispatch.cpp asks);
// _tile_release() when done.
#pragma once
#include <cstdint>

namespace edgeflow {

// ldtilecfg's 64-byte operand.
struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads exactly 64 bytes");

// ldtilecfg through an "m" operand of the whole object: GCC 12's _tile_loadconfig(&cfg) does not tell it that all 64
// bytes are read, and it has been seen dropping the stores of colsb and rows (then ldtilecfg faults).
inline void load_tiles_16x64() {
    const TileConfig cfg;
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

}  // namespace edgeflow
